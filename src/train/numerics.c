/* numerics.c: locating the first non-finite value of a training step (see
 * numerics.h). */
#include "train/numerics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/layout.h"

/* Index of the first non-finite value of x[0..n), or -1. */
static long first_bad(const dl_real *x, long n)
{
    for (long i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

int dl_numerics_all_finite(const dl_real *x, long n)
{
    /* Summing x*0 turns any NaN or infinity into NaN; the vectorised sum is
     * far cheaper than a branch per element on the hot path (the simd
     * reduction lets the compiler reorder the sum, which is exact here). */
    dl_real acc = 0;
    #pragma omp simd reduction(+ : acc)
    for (long i = 0; i < n; i++)
        acc += x[i] * 0;
    return acc == 0;
}

int dl_numerics_first_nonfinite_output(const struct dl_exec *e, struct dl_nonfinite *nf)
{
    const struct dl_graph *g = e->g;
    dl_real *staging = NULL, *wide = NULL; /* on a device: each output copied out; a bf16 one widened */
    long cap = 0, wide_cap = 0;
    struct dl_error err = {0};
    *nf = (struct dl_nonfinite){DL_NF_NONE, -1, -1, 0};
    for (int i = 0; i < g->n && nf->where == DL_NF_NONE; i++) {
        const struct dl_tensor *a = &e->act[i];
        if (!a->data) /* a layer of another pipeline stage */
            continue;
        long n = dl_layout_count(a->layout, a->shape) * e->run.batch;
        size_t size = dl_dtype_size(a->shape.dtype);
        long words = (long)(((size_t)n * size + sizeof(dl_real) - 1) / sizeof(dl_real)); /* its bytes, as values */
        const dl_real *out = dl_exec_host_values(e, a->data, words, &staging, &cap, &err);
        if (out && a->shape.dtype != DL_F32) { /* widened to f32 (exact) */
            const dl_real *raw = out;
            out = NULL;
            if (n > wide_cap) {
                dl_real *grown = realloc(wide, sizeof *grown * (size_t)n);
                if (grown)
                    wide = grown, wide_cap = n;
            }
            if (n <= wide_cap && dl_cast(raw, a->shape.dtype, wide, DL_F32, n, &err) == DL_OK)
                out = wide;
        }
        long at = out ? first_bad(out, n) : -1; /* a failed copy: nothing found */
        if (at >= 0)
            *nf = (struct dl_nonfinite){DL_NF_OUTPUT, i, at, out[at]};
    }
    free(staging);
    free(wide);
    return nf->where != DL_NF_NONE;
}

int dl_numerics_first_nonfinite_param(const struct dl_exec *e, struct dl_nonfinite *nf, struct dl_error *err)
{
    const struct dl_graph *g = e->g;
    dl_real *staging = NULL; /* on a device: the parameter copied out */
    long cap = 0;
    int rc = 0;
    *nf = (struct dl_nonfinite){DL_NF_NONE, -1, -1, 0, -1};
    for (int i = 0; i < g->n && !rc; i++) {
        for (int j = 0; e->param[i] && j < g->layers[i].n_params && !rc; j++) {
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (p->shares || p->dtype != DL_F32 || !e->param[i][j]) /* tied: checked as its owner's; counters */
                continue;
            const dl_real *x = dl_exec_host_values(e, e->param[i][j], p->count, &staging, &cap, err);
            if (!x)
                rc = -1;
            else if (!dl_numerics_all_finite(x, p->count)) {
                long k = first_bad(x, p->count);
                *nf = (struct dl_nonfinite){DL_NF_PARAM, i, k, x[k], j};
                rc = 1;
            }
        }
    }
    free(staging);
    return rc;
}

static void watch_hook(void *ctx, int layer)
{
    struct dl_numerics_watch *w = ctx;
    struct dl_exec *e = w->e;
    long lo = e->flat.weight_begin[layer], hi = e->flat.weight_begin[layer + 1], cap = 0;
    dl_real *staging = NULL; /* on a device: the gradients copied out */
    /* the layer's own weights (not a tied copy's owner's), wherever their
     * gradients are (the gradient vector, or ZeRO-2's buckets) */
    for (int j = 0; w->first.where == DL_NF_NONE && !e->status && j < e->g->layers[layer].n_params; j++) {
        long at = e->flat.weight_index[e->flat.param_first[layer] + j], n = e->g->layers[layer].param[j].count;
        if (at < lo || at >= hi || !e->dparam[layer][j])
            continue;
        const dl_real *grad = dl_exec_host_values(e, e->dparam[layer][j], n, &staging, &cap, &e->err);
        if (!grad)
            e->status = e->err.code;
        else if (!dl_numerics_all_finite(grad, n)) {
            long k = first_bad(grad, n);
            w->first = (struct dl_nonfinite){DL_NF_WEIGHT_GRAD, layer, at - lo + k, grad[k]};
        }
    }
    free(staging);
    if (w->next)
        w->next(w->next_ctx, layer);
}

void dl_numerics_watch_install(struct dl_numerics_watch *w, struct dl_exec *e)
{
    w->e = e;
    w->next = e->hooks.grad_hook;
    w->next_ctx = e->hooks.grad_hook_ctx;
    e->hooks.grad_hook = watch_hook;
    e->hooks.grad_hook_ctx = w;
    dl_numerics_watch_reset(w);
}

void dl_numerics_watch_reset(struct dl_numerics_watch *w)
{
    w->first = (struct dl_nonfinite){DL_NF_NONE, -1, -1, 0};
}

void dl_numerics_watch_uninstall(struct dl_numerics_watch *w)
{
    if (w->e && w->e->hooks.grad_hook == watch_hook && w->e->hooks.grad_hook_ctx == w) {
        w->e->hooks.grad_hook = w->next;
        w->e->hooks.grad_hook_ctx = w->next_ctx;
    }
    w->e = NULL;
}

int dl_numerics_error(const struct dl_graph *g, long global_step, double loss, const struct dl_nonfinite *nf,
                      struct dl_error *err)
{
    char where[600] = "not found in the layer outputs or weight gradients";
    if (nf && nf->where != DL_NF_NONE && nf->layer >= 0 && nf->layer < g->n) {
        const struct dl_layer *l = &g->layers[nf->layer];
        snprintf(where, sizeof where, "%s of layer '%s' (%s), element %ld = %g",
                 nf->where == DL_NF_OUTPUT ? "output" : "weight gradient", l->name, l->kind->name, nf->index,
                 nf->value);
    }
    return dl_errorf(err, DL_ERR_DATA,
                     "step %ld: %s %g; first non-finite value: %s (lower the learning rate, or check the data; "
                     "the last checkpoint is kept)",
                     global_step, isfinite(loss) ? "the loss is finite but the gradients are not: loss" : "the loss is",
                     loss, where);
}

int dl_numerics_param_error(const struct dl_graph *g, long global_step, const struct dl_nonfinite *nf,
                            struct dl_error *err)
{
    char where[600] = "on another rank";
    if (nf && nf->where == DL_NF_PARAM && nf->layer >= 0 && nf->layer < g->n && nf->param >= 0 &&
        nf->param < g->layers[nf->layer].n_params) {
        const struct dl_layer *l = &g->layers[nf->layer];
        snprintf(where, sizeof where, "parameter '%s.%s' (layer '%s', %s), element %ld = %g", l->name,
                 l->param[nf->param].name, l->name, l->kind->name, nf->index, nf->value);
    }
    return dl_errorf(err, DL_ERR_DATA,
                     "after step %ld: the weights are no longer finite: %s (lower the learning rate, or check the "
                     "data; no checkpoint or weights file is written with them, the last checkpoint is kept)",
                     global_step, where);
}
