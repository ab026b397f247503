/* measure.c: times one kernel on one layer for one micro-batch size, every
 * direction asked for: buffers of random values in the layouts the kernel
 * negotiates from plain inputs, one forward first (kernel state for the
 * backward passes), then for each direction warm-up calls and the median of
 * the timed ones.  Kernels are called through kernel.h, but the buffers are
 * host memory and the clock is the host's: a device backend needs both from
 * its own memory space and clock (CUDA events) before it can be tuned. */
#include "tune/tune_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/rng.h"
#include "plan/plan.h"

/* The buffers of one measurement, in one list so they are freed together. */
struct bufs {
    int n;
    void *p[3 * DL_MAX_INPUTS + 2 * DL_MAX_PARAMS + 8];
};

static void *buf(struct bufs *b, size_t bytes, struct dl_rng *r, int fill)
{
    void *p = NULL;
    if (posix_memalign(&p, DL_PLAN_ALIGN, bytes ? bytes : DL_PLAN_ALIGN))
        return NULL;
    b->p[b->n++] = p;
    dl_real *x = p;
    for (size_t i = 0; i < bytes / sizeof(dl_real); i++)
        x[i] = fill ? (dl_real)(0.1 * (2.0 * dl_rng_uniform(r) - 1.0)) : 0;
    return p;
}

static int fill_args(const struct dl_layer *l, const struct dl_kernel_config *cfg, size_t saved, size_t ws,
                     struct bufs *b, struct dl_rng *r, struct dl_kernel_args *a)
{
    struct dl_op_call *c = &a->c;
    size_t real = sizeof(dl_real), mb = (size_t)cfg->mb;
    c->attr = l->attr;
    c->batch = cfg->mb;
    c->n_in = l->n_in;
    c->out_shape = l->out_shape;
    int ok = 1;
    for (int j = 0; j < l->n_in; j++) {
        size_t n = mb * (size_t)dl_layout_count(cfg->in[j], l->in_shape[j]) * real;
        c->in_shape[j] = l->in_shape[j];
        ok &= (c->in[j] = buf(b, n, r, 1)) != NULL;
        ok &= (c->din[j] = buf(b, n, r, 0)) != NULL;
    }
    size_t n = mb * (size_t)dl_layout_count(cfg->out, l->out_shape) * real;
    ok &= (c->out = buf(b, n, r, 0)) != NULL;
    dl_real *dout = buf(b, n, r, 1);
    c->dout = dout;
    ok &= dout != NULL;
    for (int j = 0; j < l->n_params; j++) {
        ok &= (c->param[j] = buf(b, (size_t)l->param[j].count * real, r, 1)) != NULL;
        ok &= (c->dparam[j] = l->param[j].trainable ? buf(b, (size_t)l->param[j].count * real, r, 0) : NULL) ||
              !l->param[j].trainable;
    }
    ok &= (c->saved = buf(b, saved, r, 0)) != NULL;
    ok &= (a->workspace = buf(b, ws, r, 0)) != NULL;
    c->training = 1;
    return ok;
}

int dl_tune_measure(const struct dl_kernel *k, const struct dl_layer *l, int mb, const int want[DL_N_DIRS],
                    int warmup, int repeats, size_t ws_cap, struct dl_tune_row row[DL_N_DIRS], struct dl_error *err)
{
    struct dl_kernel_config cfg;
    void *inst;
    int rc = dl_kernel_create_plain(k, l, mb, &cfg, &inst, err);
    if (rc)
        return rc;
    size_t ws = 0, saved = dl_kernel_saved_bytes(k, inst);
    for (int d = 0; d < DL_N_DIRS; d++) {
        row[d] = (struct dl_tune_row){.time_s = 0, .saved = saved};
        row[d].ws = dl_kernel_workspace_bytes(k, inst, (enum dl_dir)d);
        if (want[d] && row[d].ws > ws)
            ws = row[d].ws;
    }
    if (ws > ws_cap) {
        for (int d = 0; d < DL_N_DIRS; d++)
            row[d].time_s = NAN;
        k->destroy(inst);
        return DL_OK;
    }
    struct bufs b = {0};
    struct dl_rng r;
    dl_rng_seed(&r, 12345);
    struct dl_kernel_args a;
    memset(&a, 0, sizeof a);
    a.c.key = 12345;
    double t[64];
    if (repeats > 64)
        repeats = 64;
    if (!fill_args(l, &cfg, saved, ws, &b, &r, &a)) {
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory measuring layer '%s' (kernel %s, %d samples)", l->name,
                       k->name, mb);
    } else {
        k->forward(inst, &a);
        int has_params = l->n_params > 0;
        for (int d = 0; d < DL_N_DIRS; d++) { /* every input gradient wanted (fill_args) */
            enum dl_dir dir = (enum dl_dir)d;
            if (!want[d] || !dl_kernel_runs(k, dir, has_params, 1))
                continue;
            for (int i = 0; i < warmup; i++)
                dl_kernel_run(k, inst, &a, dir, has_params, 1);
            int n = 0;
            for (double spent = 0; n < repeats; n++) {
                double t0 = dl_clock_now();
                dl_kernel_run(k, inst, &a, dir, has_params, 1);
                t[n] = dl_clock_now() - t0;
                spent += t[n];
                if (n >= 2 && spent > 1.0) /* slow calls: three are enough for a median */
                    break;
            }
            n += n < repeats;
            row[d].time_s = dl_median(t, n);
        }
    }
    for (int i = 0; i < b.n; i++)
        free(b.p[i]);
    k->destroy(inst);
    return rc;
}
