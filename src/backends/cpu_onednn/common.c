/* common.c: engine, stream, descriptors and primitive plumbing shared by the
 * oneDNN kernels (see common.h). */
#include "backends/cpu_onednn/common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_engine(void)
{
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success)
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
}

dnnl_engine_t dl_dnnl_engine(void)
{
    pthread_once(&once, make_engine);
    return engine;
}

dnnl_stream_t dl_dnnl_stream(void)
{
    pthread_once(&once, make_engine);
    return stream;
}

int dl_dnnl_check(dnnl_status_t st, const char *what, struct dl_error *err)
{
    if (st == dnnl_success)
        return DL_OK;
    if (st == dnnl_out_of_memory)
        return dl_errorf(err, DL_ERR_NOMEM, "oneDNN %s: out of memory", what);
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "oneDNN %s: %s", what,
                     st == dnnl_unimplemented ? "no implementation for these shapes" : "invalid arguments");
}

void dl_dnnl_md(dnnl_memory_desc_t *md, int n, struct dl_shape s, enum dl_layout l)
{
    dnnl_dims_t d = {n, s.c, s.h, s.w};
    dnnl_format_tag_t tag = l == DL_LAYOUT_BLOCK16 ? dnnl_nChw16c : l == DL_LAYOUT_BLOCK8 ? dnnl_nChw8c : dnnl_nchw;
    dnnl_memory_desc_init_by_tag(md, 4, d, dl_dnnl_type(s.dtype), tag);
}

int dl_dnnl_layout_of(const dnnl_memory_desc_t *md, int n, struct dl_shape s)
{
    for (int l = 0; l < DL_N_LAYOUTS; l++) {
        dnnl_memory_desc_t m;
        dl_dnnl_md(&m, n, s, (enum dl_layout)l);
        if (dnnl_memory_desc_equal(&m, md))
            return l;
    }
    return -1;
}

int dl_dnnl_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const_dnnl_primitive_desc_t hint)
{
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return dnnl_out_of_memory;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_status_t st = dnnl_primitive_desc_create(pd, op_desc, attr, dl_dnnl_engine(), hint);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

const dnnl_memory_desc_t *dl_dnnl_prim_md(const struct dl_dnnl_prim *p, int arg)
{
    return dnnl_primitive_desc_query_md(p->pd, dnnl_query_exec_arg_md, arg);
}

size_t dl_dnnl_prim_bytes(const struct dl_dnnl_prim *p, int arg)
{
    const dnnl_memory_desc_t *md = dl_dnnl_prim_md(p, arg);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

int dl_dnnl_prim_adopt(struct dl_dnnl_prim *p, const int *args, struct dl_error *err)
{
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(p->pd, dnnl_query_scratchpad_md, 0);
    p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
    int rc = dl_dnnl_check(dnnl_primitive_create(&p->prim, p->pd), "primitive creation", err);
    for (int i = 0; !rc && args[i]; i++) {
        if (p->n == DL_DNNL_MAX_ARGS - 1)
            return dl_errorf(err, DL_ERR_INTERNAL, "too many oneDNN arguments");
        p->arg[p->n] = args[i];
        rc = dl_dnnl_check(dnnl_memory_create(&p->mem[p->n], dl_dnnl_prim_md(p, args[i]), dl_dnnl_engine(),
                                              DNNL_MEMORY_NONE), "memory", err);
        p->n++;
    }
    if (!rc && p->scratch) {
        p->arg[p->n] = DNNL_ARG_SCRATCHPAD;
        rc = dl_dnnl_check(dnnl_memory_create(&p->mem[p->n], smd, dl_dnnl_engine(), DNNL_MEMORY_NONE),
                           "scratchpad", err);
        p->n++;
    }
    return rc;
}

int dl_dnnl_prim_init(struct dl_dnnl_prim *p, const void *op_desc, const_dnnl_primitive_desc_t hint,
                      const int *args, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    int rc = dl_dnnl_check(dl_dnnl_pd(&p->pd, op_desc, hint), "primitive descriptor", err);
    return rc ? rc : dl_dnnl_prim_adopt(p, args, err);
}

int dl_dnnl_attr(int accumulate, dnnl_primitive_attr_t *attr, struct dl_error *err)
{
    dnnl_post_ops_t po;
    if (dnnl_primitive_attr_create(attr) != dnnl_success)
        return dl_errorf(err, DL_ERR_NOMEM, "oneDNN attributes: out of memory");
    dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (!accumulate)
        return DL_OK;
    if (dnnl_post_ops_create(&po) != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        return dl_errorf(err, DL_ERR_NOMEM, "oneDNN post-ops: out of memory");
    }
    dnnl_post_ops_append_sum(po, 1.0f);
    dnnl_primitive_attr_set_post_ops(*attr, po);
    dnnl_post_ops_destroy(po);
    return DL_OK;
}

int dl_dnnl_reorder_init(struct dl_dnnl_prim *p, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                         int accumulate, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    dnnl_primitive_attr_t attr;
    int rc = dl_dnnl_attr(accumulate, &attr, err);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&p->pd, src, dl_dnnl_engine(), dst, dl_dnnl_engine(), attr);
    dnnl_primitive_attr_destroy(attr);
    rc = dl_dnnl_check(st, "reorder", err);
    static const int args[] = {DNNL_ARG_FROM, DNNL_ARG_TO, 0};
    return rc ? rc : dl_dnnl_prim_adopt(p, args, err);
}

void dl_dnnl_prim_free(struct dl_dnnl_prim *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->mem[i])
            dnnl_memory_destroy(p->mem[i]);
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    if (p->pd)
        dnnl_primitive_desc_destroy(p->pd);
    memset(p, 0, sizeof *p);
}

void dl_dnnl_prim_args(const struct dl_dnnl_prim *p, void *const *ptr, void *scratch, dnnl_stream_t on,
                       dnnl_exec_arg_t *a)
{
    for (int i = 0; i < p->n; i++) {
        dnnl_memory_set_data_handle_v2(p->mem[i], p->arg[i] == DNNL_ARG_SCRATCHPAD ? scratch : ptr[i], on);
        a[i] = (dnnl_exec_arg_t){p->arg[i], p->mem[i]};
    }
}

void dl_dnnl_prim_run(const struct dl_dnnl_prim *p, void *const *ptr, void *scratch)
{
    dnnl_exec_arg_t a[DL_DNNL_MAX_ARGS];
    dl_dnnl_prim_args(p, ptr, scratch, dl_dnnl_stream(), a);
    dnnl_primitive_execute(p->prim, dl_dnnl_stream(), p->n, a);
    dnnl_stream_wait(dl_dnnl_stream());
}

int dl_dnnl_bf16_supports(const struct dl_layer *l)
{
    (void)l;
    return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core;
}

int dl_dnnl_all_jit(const void *const *descs, int n)
{
    dnnl_primitive_desc_t fwd = NULL;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        dnnl_primitive_desc_t pd;
        if (dl_dnnl_pd(&pd, descs[i], fwd) != dnnl_success) {
            ok = 0;
            break;
        }
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        ok = impl && strncmp(impl, "ref", 3) != 0;
        if (i == 0)
            fwd = pd;
        else
            dnnl_primitive_desc_destroy(pd);
    }
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    return ok;
}

/* ------------------------------------------------------- layers with weights */

void dl_dnnl_wprim_destroy(void *inst)
{
    struct dl_dnnl_wprim *w = inst;
    if (!w)
        return;
    struct dl_dnnl_wpass *all[] = {&w->fwd, &w->bwd_data, &w->bwd_w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        dl_dnnl_prim_free(&all[i]->prim);
        dl_dnnl_prim_free(&all[i]->weights);
        dl_dnnl_prim_free(&all[i]->act);
    }
    free(w->dbias);
    free(w);
}

/* A reorder between the user weights and the layout the pass wants: into it
 * (none when equal), or back from it accumulating (to_user). */
static int weights_reorder(const dnnl_memory_desc_t *user, struct dl_dnnl_wpass *p, int to_user,
                           struct dl_error *err)
{
    const dnnl_memory_desc_t *md = dl_dnnl_prim_md(&p->prim, p->warg);
    if (!to_user && dnnl_memory_desc_equal(md, user))
        return DL_OK;
    if (to_user && dl_dnnl_unblock16_wanted(md, user, &p->unblock))
        return DL_OK;
    return to_user ? dl_dnnl_reorder_init(&p->weights, md, user, 1, err)
                   : dl_dnnl_reorder_init(&p->weights, user, md, 0, err);
}

/* A reorder between forward's input layout and the one the pass wants for
 * its aarg (none when equal): into it, or back from it (to_src). */
static int act_reorder(const dnnl_memory_desc_t *src, struct dl_dnnl_wpass *p, int to_src, struct dl_error *err)
{
    const dnnl_memory_desc_t *md = dl_dnnl_prim_md(&p->prim, p->aarg);
    if (dnnl_memory_desc_equal(md, src))
        return DL_OK;
    return to_src ? dl_dnnl_reorder_init(&p->act, md, src, 0, err) : dl_dnnl_reorder_init(&p->act, src, md, 0, err);
}

int dl_dnnl_wprim_create(const void *fwd, const void *bd, const void *bw, const dnnl_memory_desc_t *user_w,
                         int n_bias, void **inst, struct dl_error *err)
{
    struct dl_dnnl_wprim *w = dl_calloc(1, sizeof *w, err);
    if (!w)
        return DL_ERR_NOMEM;
    w->n_bias = n_bias;
    w->dbias = dl_calloc(n_bias ? (size_t)n_bias : 1, sizeof *w->dbias, err);
    w->fwd.warg = w->bwd_data.warg = DNNL_ARG_WEIGHTS;
    w->bwd_w.warg = DNNL_ARG_DIFF_WEIGHTS;
    w->bwd_data.aarg = DNNL_ARG_DIFF_SRC;
    w->bwd_w.aarg = DNNL_ARG_SRC;
    const int fa[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, n_bias ? DNNL_ARG_BIAS : 0, 0};
    const int da[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC, 0};
    const int wa[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, n_bias ? DNNL_ARG_DIFF_BIAS : 0, 0};
    int rc = w->dbias ? DL_OK : DL_ERR_NOMEM;
    if (!rc)
        rc = dl_dnnl_prim_init(&w->fwd.prim, fwd, NULL, fa, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&w->bwd_data.prim, bd, w->fwd.prim.pd, da, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&w->bwd_w.prim, bw, w->fwd.prim.pd, wa, err);
    if (!rc)
        rc = weights_reorder(user_w, &w->fwd, 0, err);
    if (!rc)
        rc = weights_reorder(user_w, &w->bwd_data, 0, err);
    if (!rc)
        rc = weights_reorder(user_w, &w->bwd_w, 1, err);
    if (!rc)
        rc = act_reorder(dl_dnnl_prim_md(&w->fwd.prim, DNNL_ARG_SRC), &w->bwd_data, 1, err);
    if (!rc)
        rc = act_reorder(dl_dnnl_prim_md(&w->fwd.prim, DNNL_ARG_SRC), &w->bwd_w, 0, err);
    if (rc) {
        dl_dnnl_wprim_destroy(w);
        return rc;
    }
    *inst = w;
    return DL_OK;
}

/* A pass's workspace: the largest scratchpad of its primitive and reorders,
 * then the weights (or weight gradient) in the primitive's layout at
 * weights_at(), then, when the pass reorders the layer's input (or its
 * gradient), that tensor in the pass's layout at act_at(). */
static size_t weights_at(const struct dl_dnnl_wpass *p)
{
    size_t s = p->prim.scratch > p->weights.scratch ? p->prim.scratch : p->weights.scratch;
    return dl_dnnl_align(s > p->act.scratch ? s : p->act.scratch);
}

static size_t act_at(const struct dl_dnnl_wpass *p)
{
    return weights_at(p) + dl_dnnl_align(dl_dnnl_prim_bytes(&p->prim, p->warg));
}

static size_t pass_ws(const struct dl_dnnl_wpass *p)
{
    return act_at(p) + (p->act.prim ? dl_dnnl_align(dl_dnnl_prim_bytes(&p->prim, p->aarg)) : 0);
}

size_t dl_dnnl_wprim_ws(const void *inst, enum dl_dir dir)
{
    const struct dl_dnnl_wprim *w = inst;
    return pass_ws(dir == DL_DIR_FORWARD ? &w->fwd : dir == DL_DIR_BACKWARD_DATA ? &w->bwd_data : &w->bwd_w);
}

/* Weights for a pass: the user's, or reordered into the workspace. */
static void *pass_weights(const struct dl_dnnl_wpass *p, const float *user, void *ws)
{
    if (!p->weights.prim)
        return (void *)user;
    void *w = (char *)ws + weights_at(p);
    void *ptr[2] = {(void *)user, w};
    dl_dnnl_prim_run(&p->weights, ptr, ws);
    return w;
}

void dl_dnnl_wprim_forward(void *inst, const struct dl_kernel_args *a)
{
    struct dl_dnnl_wprim *w = inst;
    void *wt = pass_weights(&w->fwd, a->c.param[0], a->workspace);
    void *ptr[4] = {dl_tensor_any(&a->c.in[0]), wt, dl_tensor_any(&a->c.out), w->n_bias ? a->c.param[1] : NULL};
    dl_dnnl_prim_run(&w->fwd.prim, ptr, a->workspace);
}

void dl_dnnl_wprim_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_dnnl_wpass *p = &((struct dl_dnnl_wprim *)inst)->bwd_data;
    if (!a->c.din[0].data)
        return;
    void *wt = pass_weights(p, a->c.param[0], a->workspace);
    void *dsrc = p->act.prim ? (char *)a->workspace + act_at(p) : (void *)dl_tensor_any(&a->c.din[0]);
    void *ptr[3] = {dl_tensor_any(&a->c.dout), wt, dsrc};
    dl_dnnl_prim_run(&p->prim, ptr, a->workspace);
    if (p->act.prim) {
        void *rp[2] = {dsrc, dl_tensor_any(&a->c.din[0])};
        dl_dnnl_prim_run(&p->act, rp, a->workspace);
    }
}

void dl_dnnl_wprim_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    struct dl_dnnl_wprim *w = inst;
    const struct dl_dnnl_wpass *p = &w->bwd_w;
    void *dw = (char *)a->workspace + weights_at(p);
    void *src = dl_tensor_any(&a->c.in[0]);
    if (p->act.prim) {
        src = (char *)a->workspace + act_at(p);
        void *rp[2] = {dl_tensor_any(&a->c.in[0]), src};
        dl_dnnl_prim_run(&p->act, rp, a->workspace);
    }
    void *ptr[4] = {src, dl_tensor_any(&a->c.dout), dw, w->dbias};
    dl_dnnl_prim_run(&p->prim, ptr, a->workspace);
    if (a->c.dparam[0] && p->unblock.k) {
        dl_dnnl_unblock16_add(&p->unblock, dw, a->c.dparam[0]);
    } else if (a->c.dparam[0]) {
        void *rp[2] = {dw, a->c.dparam[0]};
        dl_dnnl_prim_run(&p->weights, rp, a->workspace);
    }
    if (w->n_bias && a->c.dparam[1])
        for (int k = 0; k < w->n_bias; k++)
            a->c.dparam[1][k] += w->dbias[k];
}

/* oneDNN's own block on this CPU: 16 channels with AVX-512, else 8 (what its
 * convolutions pick, see conv.c). */
static enum dl_layout native_block(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? DL_LAYOUT_BLOCK16 : DL_LAYOUT_BLOCK8;
}

void dl_dnnl_blocked_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                             enum dl_layout *out)
{
    struct dl_shape s = l->in_shape[0];
    if (offered[0] != DL_LAYOUT_PLAIN || s.c < 8 || (long)s.h * s.w <= 1) {
        dl_kernel_follow_layouts(l, offered, in, out);
        return;
    }
    enum dl_layout want = native_block();
    for (int i = 0; i < l->n_in; i++)
        in[i] = want;
    *out = want;
}
