/* kernel_check.c: see kernel_check.h. */
#include "kernel_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

double kc_rel_err(const float *a, const float *b, long n)
{
    double num = 0, den = 1e-30;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d)
            num = d;
        if (fabs(b[i]) > den)
            den = fabs(b[i]);
    }
    return num / den;
}

void kc_fill(float *v, long n, uint64_t seed)
{
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    for (long i = 0; i < n; i++)
        v[i] = (float)dl_rng_normal(&r);
}

static float *vec(long n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(float));
}

void kc_alloc(struct kc_tensors *t, const struct dl_layer *l, int batch, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->batch = batch;
    for (int i = 0; i < l->n_in; i++) {
        long n = batch * dl_shape_count(l->in_shape[i]);
        t->x[i] = vec(n);
        t->dx[i] = vec(n);
        kc_fill(t->x[i], n, seed + (uint64_t)i);
    }
    long ny = batch * dl_shape_count(l->out_shape);
    t->y = vec(ny);
    t->dy = vec(ny);
    kc_fill(t->dy, ny, seed + 100);
    for (int j = 0; j < l->n_params; j++) {
        long n = l->param[j].count;
        t->param[j] = vec(n);
        kc_fill(t->param[j], n, seed + 200 + (uint64_t)j);
        if (strcmp(l->param[j].name, "running_var") == 0)
            for (long i = 0; i < n; i++)
                t->param[j][i] = 0.5f + fabsf(t->param[j][i]);
        if (l->param[j].trainable) {
            t->dparam[j] = vec(n);
            kc_fill(t->dparam[j], n, seed + 300 + (uint64_t)j);
        }
    }
}

void kc_free(struct kc_tensors *t, const struct dl_layer *l)
{
    for (int i = 0; i < l->n_in; i++) {
        free(t->x[i]);
        free(t->dx[i]);
    }
    free(t->y);
    free(t->dy);
    for (int j = 0; j < l->n_params; j++) {
        free(t->param[j]);
        free(t->dparam[j]);
    }
}

/* A buffer of n samples of s in layout lo holding plain src, or, for a
 * kernel's output, NaN everywhere: forward and backward_data overwrite their
 * outputs (kernel.h), so a value left unwritten shows as NaN; in training the
 * arena hands out buffers holding what earlier layers left. */
static float *to_layout(const float *src, enum dl_layout lo, int n, struct dl_shape s)
{
    long count = (long)n * dl_layout_count(lo, s);
    float *d = vec(count);
    if (src)
        dl_layout_reorder(src, DL_LAYOUT_PLAIN, d, lo, n, s, 0);
    else
        for (long i = 0; i < count; i++)
            d[i] = NAN;
    return d;
}

int kc_run(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb)
{
    return kc_run_offered(k, l, t, mb, DL_LAYOUT_PLAIN);
}

int kc_run_offered(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                   enum dl_layout offer)
{
    return kc_run_fused(k, l, t, mb, offer, 0);
}

int kc_run_fused(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                 enum dl_layout offer, int relu)
{
    struct dl_error err = {0};
    struct dl_kernel_config cfg = {.mb = mb, .relu = relu};
    enum dl_layout offered[DL_MAX_INPUTS] = {offer};
    dl_kernel_layouts(k, l, offered, cfg.in, &cfg.out);
    void *inst = NULL;
    int rc = k->create(l, &cfg, &inst, &err);
    if (rc)
        return rc;
    size_t ws_bytes = dl_kernel_workspace_max(k, inst), saved_bytes = dl_kernel_saved_bytes(k, inst);
    ws_bytes = ws_bytes > 64 ? ws_bytes : 64;
    int slices = t->batch / mb;
    void *ws = NULL;
    unsigned char *saved = calloc((size_t)slices * saved_bytes + 64, 1);
    if (posix_memalign(&ws, 64, ws_bytes))
        return DL_ERR_NOMEM;
    float *x[DL_MAX_INPUTS] = {0}, *dx[DL_MAX_INPUTS] = {0};
    for (int i = 0; i < l->n_in; i++) {
        x[i] = to_layout(t->x[i], cfg.in[i], t->batch, l->in_shape[i]);
        dx[i] = to_layout(NULL, cfg.in[i], t->batch, l->in_shape[i]);
    }
    float *y = to_layout(NULL, cfg.out, t->batch, l->out_shape);
    float *dy = to_layout(t->dy, cfg.out, t->batch, l->out_shape);
    long ycount = dl_layout_count(cfg.out, l->out_shape);
    for (int pass = 0; pass < 2; pass++)
        for (int sl = 0; sl < slices; sl++) {
            struct dl_kernel_args a;
            memset(&a, 0, sizeof a);
            struct dl_op_call *c = &a.c;
            c->attr = l->attr;
            c->batch = mb;
            c->n_in = l->n_in;
            for (int i = 0; i < l->n_in; i++) {
                long cnt = dl_layout_count(cfg.in[i], l->in_shape[i]);
                c->in_shape[i] = l->in_shape[i];
                c->in[i] = x[i] + (long)sl * mb * cnt;
                c->din[i] = dx[i] + (long)sl * mb * cnt;
            }
            c->out_shape = l->out_shape;
            c->out = y + (long)sl * mb * ycount;
            c->dout = dy + (long)sl * mb * ycount;
            for (int j = 0; j < l->n_params; j++) {
                c->param[j] = t->param[j];
                c->dparam[j] = t->dparam[j];
            }
            c->saved = (float *)(saved + (size_t)sl * saved_bytes);
            c->training = 1;
            a.workspace = ws;
            if (pass == 0) {
                dl_kernel_run(k, inst, &a, DL_DIR_FORWARD, l->n_params > 0, 1);
            } else {
                dl_kernel_run(k, inst, &a, DL_DIR_BACKWARD_DATA, l->n_params > 0, 1);
                dl_kernel_run(k, inst, &a, DL_DIR_BACKWARD_WEIGHTS, l->n_params > 0, 1);
            }
        }
    dl_layout_reorder(y, cfg.out, t->y, DL_LAYOUT_PLAIN, t->batch, l->out_shape, 0);
    for (int i = 0; i < l->n_in; i++) {
        dl_layout_reorder(dx[i], cfg.in[i], t->dx[i], DL_LAYOUT_PLAIN, t->batch, l->in_shape[i], 0);
        free(x[i]);
        free(dx[i]);
    }
    free(y);
    free(dy);
    free(ws);
    free(saved);
    k->destroy(inst);
    return DL_OK;
}
