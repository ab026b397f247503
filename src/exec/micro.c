/* micro.c: layers run as a sequence of micro-batches, as the tuner planned
 * (plan/mbplan.h, mu-cuDNN's idea): set-up checks a layer's plan against its
 * kernel's layouts and needs, makes one instance per (kernel, micro-batch
 * size), and sizes kernel state and workspace; the run loop slices every
 * tensor by samples (activations are batch-major in every layout) and calls
 * the part's kernel in the direction's workspace slice.  Weight gradients
 * accumulate over the parts, so the result is the undivided batch's. */
#include "exec/exec_impl.h"

#include <string.h>

static size_t align_up(size_t n)
{
    return (n + DL_PLAN_ALIGN - 1) / DL_PLAN_ALIGN * DL_PLAN_ALIGN;
}

static void *find_instance(const struct dl_exec_step *s, const struct dl_kernel *k, int mb)
{
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].kernel == k && s->inst[i].mb == mb)
            return s->inst[i].inst;
    return NULL;
}

/* The part's kernel can run layer l and wants the layouts the step's kernel
 * negotiated with the producers. */
static int check_kernel(const struct dl_exec_step *s, const struct dl_layer *l, const struct dl_kernel *k,
                        const enum dl_layout *offered, struct dl_error *err)
{
    if ((k->op && k->op != l->kind) || (k->supports && !k->supports(l)))
        return dl_errorf(err, DL_ERR_SPEC, "layer '%s': kernel %s cannot run it", l->name, k->name);
    enum dl_layout in[DL_MAX_INPUTS], out, in0[DL_MAX_INPUTS], out0;
    dl_kernel_layouts(k, l, offered, in, &out);
    dl_kernel_layouts(s->kernel, l, offered, in0, &out0);
    int same = out == out0;
    for (int j = 0; j < l->n_in; j++)
        same = same && in[j] == in0[j];
    if (!same)
        return dl_errorf(err, DL_ERR_SPEC, "layer '%s': the plan mixes kernels %s and %s, whose memory layouts differ",
                         l->name, s->kernel->name, k->name);
    return DL_OK;
}

static int setup_dir(struct dl_exec *e, struct dl_exec_step *s, int d, const enum dl_layout *offered, size_t *ws,
                     struct dl_error *err)
{
    const struct dl_layer *l = &e->g->layers[s->layer];
    const struct dl_mbplan_dir *pd = &s->mbplan->dir[d];
    int B = e->impl->mbplan.batch;
    if (dl_mbplan_dir_samples(pd) != B)
        return dl_errorf(err, DL_ERR_SPEC, "layer '%s': the %s plan covers %d samples, the batch has %d", l->name,
                         dl_dir_names[d], dl_mbplan_dir_samples(pd), B);
    for (int p = 0; p < pd->n; p++) {
        const struct dl_kernel *k = pd->part[p].kernel;
        int mb = pd->part[p].mb;
        int rc = check_kernel(s, l, k, offered, err);
        if (rc)
            return rc;
        if (k->whole_batch && mb != B)
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s': kernel %s needs the whole batch (%d), the plan gives %d",
                             l->name, k->name, B, mb);
        void *inst = find_instance(s, k, mb);
        if (!inst) {
            if ((rc = dl_exec_make_instance(s, l, k, mb, err)) != 0)
                return rc;
            inst = s->inst[s->n_inst - 1].inst;
        }
        size_t need = dl_kernel_workspace_bytes(k, inst, (enum dl_dir)d);
        if (need > pd->ws_bytes)
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s': kernel %s needs %zu bytes of %s workspace for %d samples, "
                             "the plan gives %zu", l->name, k->name, need, dl_dir_names[d], mb, pd->ws_bytes);
    }
    if (pd->ws_offset + pd->ws_bytes > *ws)
        *ws = pd->ws_offset + pd->ws_bytes;
    return DL_OK;
}

int dl_exec_micro_setup(struct dl_exec *e, struct dl_exec_step *s, const enum dl_layout *offered, size_t *ws,
                        struct dl_error *err)
{
    const struct dl_layer *l = &e->g->layers[s->layer];
    const struct dl_mbplan_layer *pl = s->mbplan;
    if (e->impl->mbplan.batch > e->max_batch)
        return dl_errorf(err, DL_ERR_SPEC, "micro-batch plan for batch %d, the executor's batch is %d",
                         e->impl->mbplan.batch, e->max_batch);
    for (int d = 0; d < DL_N_DIRS; d++) {
        int rc = pl->dir[d].n ? setup_dir(e, s, d, offered, ws, err) : DL_OK;
        if (rc)
            return rc;
    }
    /* Kernel state goes from a forward part to the backward part of the same
     * samples: a kernel that keeps any (or computes weight gradients inside
     * backward-data) needs every direction split like the forward. */
    const struct dl_mbplan_dir *f = &pl->dir[DL_DIR_FORWARD];
    size_t saved = 0;
    int coupled = 0;
    for (int p = 0; p < f->n; p++) {
        const struct dl_kernel *k = f->part[p].kernel;
        size_t b = dl_kernel_saved_bytes(k, find_instance(s, k, f->part[p].mb));
        saved += align_up(b) * (size_t)f->part[p].count;
        coupled |= dl_kernel_couples(k, b, l->n_params > 0);
    }
    coupled |= l->n_params && dl_kernel_weights_in_data(s->kernel);
    for (int d = DL_DIR_BACKWARD_DATA; coupled && d < DL_N_DIRS; d++)
        if (pl->dir[d].n && !dl_mbplan_dir_same(f, &pl->dir[d]))
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s': its kernels keep state from forward to backward, so the %s "
                             "plan must split the batch as the forward does", l->name, dl_dir_names[d]);
    if (saved > s->saved_bytes)
        s->saved_bytes = saved;
    s->n_fixed = s->n_inst;
    return DL_OK;
}

int dl_exec_micro_run(struct dl_exec *e, const struct dl_exec_step *s, const struct dl_kernel_args *a, enum dl_dir dir,
                      int any_din)
{
    const struct dl_exec_impl *m = e->impl;
    if (!s->mbplan || e->run.batch != m->mbplan.batch || !s->mbplan->dir[dir].n)
        return 0;
    const struct dl_mbplan_dir *pd = &s->mbplan->dir[dir];
    const struct dl_layer *l = &e->g->layers[s->layer];
    const struct dl_exec_tensor *out = &m->tensors[s->out];
    int n0 = 0;
    size_t saved_off = 0;
    for (int p = 0; p < pd->n; p++) {
        const struct dl_kernel *k = pd->part[p].kernel;
        int mb = pd->part[p].mb;
        void *inst = find_instance(s, k, mb);
        size_t saved = align_up(dl_kernel_saved_bytes(k, inst));
        for (int c = 0; c < pd->part[p].count; c++, n0 += mb, saved_off += saved) {
            struct dl_kernel_args b = *a;
            b.c.batch = mb;
            for (int j = 0; j < l->n_in; j++) {
                const struct dl_exec_tensor *in = &m->tensors[s->in[j]];
                b.c.in[j].data = dl_exec_samples_at(a->c.in[j].data, in, n0);
                b.c.din[j].data = dl_exec_samples_at(a->c.din[j].data, in, n0);
            }
            b.c.out.data = dl_exec_samples_at(a->c.out.data, out, n0);
            b.c.dout.data = dl_exec_samples_at(a->c.dout.data, out, n0);
            b.c.labels = a->c.labels ? a->c.labels + (long)n0 * e->g->positions : NULL;
            b.c.doc_start = a->c.doc_start ? a->c.doc_start + (long)n0 * e->impl->doc_T : NULL;
            b.c.sample0 = a->c.sample0 + n0;
            b.c.saved = a->c.saved ? (dl_real *)((unsigned char *)a->c.saved + saved_off) : NULL;
            b.workspace = (unsigned char *)m->mem.workspace + pd->ws_offset;
            dl_kernel_run(k, inst, &b, dir, l->n_params > 0, any_din);
        }
    }
    return 1;
}
