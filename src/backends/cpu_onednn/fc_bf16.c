/* fc_bf16.c: the fully connected layer in bf16 on oneDNN's matmul
 * ("onednn-bf16"): bf16 input, output and gradients, the f32 master weights
 * rounded to bf16 (see weights_bytes), the bias added in f32,
 * the weight and bias gradients accumulated in f32.  Plain layouts.
 *
 * A vector input [N, C] (per sample C = C*H*W features): y = x W^T + b,
 * dx = dy W, dW += dy^T x.  A sequence [T, C] is stored [C][T] per sample
 * (core/shape.h), so per sample y[n] (U x T) = W (U x C) x[n] (C x T) + b:
 * one batched matmul over the samples with W broadcast, into f32 in the
 * workspace, then the bias added and the sum rounded once to bf16 (oneDNN
 * 2.6 has only its slow reference code for a bias broadcast over the
 * positions; without a bias, as GPT-2's head, the matmul writes bf16);
 * dx = W^T dy and dW += sum over n of dy[n] x[n]^T (whose reduction runs
 * over samples and positions) are one matmul each on copies of dy and x
 * laid out [U][N T] and [C][N T] in the workspace, dx made [C][N T] there
 * and copied back. */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu_onednn/common.h"

struct fcb_inst {
    struct dl_dnnl_prim fwd, bd, bw;
    long N, T, C, U;
    int bias;
};

static void fcb_destroy(void *p)
{
    struct fcb_inst *q = p;
    if (!q)
        return;
    dl_dnnl_prim_free(&q->fwd);
    dl_dnnl_prim_free(&q->bd);
    dl_dnnl_prim_free(&q->bw);
    free(q);
}

/* A descriptor of dims d (n of them) with strides s in type t. */
static void strided(dnnl_memory_desc_t *md, int n, const dnnl_dims_t d, const dnnl_dims_t s, dnnl_data_type_t t)
{
    dnnl_memory_desc_init_by_strides(md, n, d, t, s);
}

/* The matmul src x weights (+ bias) -> dst, accumulating into dst when sum. */
static int matmul(struct dl_dnnl_prim *p, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *w,
                  const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, int sum, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    dnnl_matmul_desc_t d;
    int rc = dl_dnnl_check(dnnl_matmul_desc_init(&d, src, w, bias, dst), "matmul descriptor", err);
    dnnl_primitive_attr_t attr;
    if (rc || (rc = dl_dnnl_attr(sum, &attr, err)))
        return rc;
    rc = dl_dnnl_check(dnnl_primitive_desc_create(&p->pd, &d, attr, dl_dnnl_engine(), NULL), "matmul", err);
    dnnl_primitive_attr_destroy(attr);
    const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, bias ? DNNL_ARG_BIAS : 0, 0};
    return rc ? rc : dl_dnnl_prim_adopt(p, args, err);
}

static int fcb_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct fcb_inst *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    struct dl_shape s = l->in_shape[0];
    int seq = dl_shape_rank(s) == 2;
    q->N = cfg->mb, q->T = seq ? s.h : 1, q->C = seq ? s.c : dl_shape_count(s), q->U = l->out_shape.c;
    q->bias = l->n_params > 1;
    long N = q->N, T = q->T, C = q->C, U = q->U;
    dnnl_data_type_t bf = dnnl_bf16, f = dnnl_f32;
    dnnl_memory_desc_t x, w, wt, b, y, dyt, xt, dw;
    int rc;
    if (T == 1) { /* [N, C] rows */
        strided(&x, 2, (dnnl_dims_t){N, C}, (dnnl_dims_t){C, 1}, bf);
        strided(&wt, 2, (dnnl_dims_t){C, U}, (dnnl_dims_t){1, C}, bf); /* W^T: W is [U][C] */
        strided(&w, 2, (dnnl_dims_t){U, C}, (dnnl_dims_t){C, 1}, bf);
        strided(&b, 2, (dnnl_dims_t){1, U}, (dnnl_dims_t){U, 1}, f);
        strided(&y, 2, (dnnl_dims_t){N, U}, (dnnl_dims_t){U, 1}, bf);
        strided(&dyt, 2, (dnnl_dims_t){U, N}, (dnnl_dims_t){1, U}, bf); /* dy^T */
        strided(&dw, 2, (dnnl_dims_t){U, C}, (dnnl_dims_t){C, 1}, f);
        rc = matmul(&q->fwd, &x, &wt, q->bias ? &b : NULL, &y, 0, err);
        if (!rc)
            rc = matmul(&q->bd, &y, &w, NULL, &x, 0, err); /* dx [N, C] = dy [N, U] W */
        if (!rc)
            rc = matmul(&q->bw, &dyt, &x, NULL, &dw, 1, err); /* dW += dy^T x */
    } else { /* per sample [C][T]; W broadcast over the samples */
        strided(&w, 3, (dnnl_dims_t){1, U, C}, (dnnl_dims_t){U * C, C, 1}, bf);
        strided(&x, 3, (dnnl_dims_t){N, C, T}, (dnnl_dims_t){C * T, T, 1}, bf);
        strided(&y, 3, (dnnl_dims_t){N, U, T}, (dnnl_dims_t){U * T, T, 1}, bf);
        dnnl_memory_desc_t y32, dxt;
        strided(&y32, 3, (dnnl_dims_t){N, U, T}, (dnnl_dims_t){U * T, T, 1}, f);
        rc = matmul(&q->fwd, &w, &x, NULL, q->bias ? &y32 : &y, 0, err); /* no bias: rounded by oneDNN */
        /* DY [U, N T] and X [C, N T]: the copies' layouts; dX [C, N T] = W^T DY
         * (one matmul: 10-15% faster than one per sample with W broadcast),
         * dW [U, C] += DY X^T */
        strided(&dyt, 2, (dnnl_dims_t){U, N * T}, (dnnl_dims_t){N * T, 1}, bf);
        strided(&xt, 2, (dnnl_dims_t){N * T, C}, (dnnl_dims_t){1, N * T}, bf);
        strided(&dxt, 2, (dnnl_dims_t){C, N * T}, (dnnl_dims_t){N * T, 1}, bf);
        strided(&wt, 2, (dnnl_dims_t){C, U}, (dnnl_dims_t){1, C}, bf);
        if (!rc)
            rc = matmul(&q->bd, &wt, &dyt, NULL, &dxt, 0, err);
        strided(&dw, 2, (dnnl_dims_t){U, C}, (dnnl_dims_t){C, 1}, f);
        if (!rc)
            rc = matmul(&q->bw, &dyt, &xt, NULL, &dw, 1, err);
    }
    if (rc) {
        fcb_destroy(q);
        return rc;
    }
    *inst = q;
    return DL_OK;
}

/* The bf16 weights: a vector's in the workspace of each call; a
 * sequence's (whose weights serve N T positions: GPT's linears) in its
 * saved state, cast by forward and read again by backward data, once a step
 * as PyTorch's autocast caches them. */
static size_t weights_bytes(const struct fcb_inst *q)
{
    return dl_dnnl_align(2 * (size_t)(q->U * q->C));
}

static size_t fcb_saved(const void *inst)
{
    const struct fcb_inst *q = inst;
    return q->T > 1 ? weights_bytes(q) : 0;
}

/* The workspace: a vector's bf16 weights, then the primitive's scratchpad,
 * then (a sequence) the f32 output forward, the copies of dy and x
 * backward. */
static size_t in_workspace(const struct fcb_inst *q)
{
    return q->T == 1 ? weights_bytes(q) : 0;
}

static size_t fcb_ws(const void *inst, enum dl_dir dir)
{
    const struct fcb_inst *q = inst;
    const struct dl_dnnl_prim *p = dir == DL_DIR_FORWARD ? &q->fwd : dir == DL_DIR_BACKWARD_DATA ? &q->bd : &q->bw;
    size_t copies = q->T == 1                          ? 0
                    : dir != DL_DIR_FORWARD          ? 2 * (size_t)(q->N * q->T * (q->U + q->C))
                    : q->bias                        ? 4 * (size_t)(q->N * q->T * q->U)
                                                     : 0;
    return in_workspace(q) + dl_dnnl_align(p->scratch) + dl_dnnl_align(copies);
}

/* Where the weights rounded to bf16 (to nearest even) are; cast there
 * (forward, and a vector's backward data) when cast is 1. */
static void *bf16_weights(const struct fcb_inst *q, const struct dl_kernel_args *a, int cast)
{
    void *w = q->T > 1 ? (void *)a->c.saved : a->workspace;
    if (cast || q->T == 1)
        dl_cast(a->c.param[0], DL_F32, w, DL_BF16, q->U * q->C, NULL);
    return w;
}

static void *scratch(const struct fcb_inst *q, const struct dl_kernel_args *a)
{
    return (char *)a->workspace + in_workspace(q);
}

static void fcb_forward(void *inst, const struct dl_kernel_args *a)
{
    struct fcb_inst *q = inst;
    void *w = bf16_weights(q, a, 1), *b = q->bias ? a->c.param[1] : NULL;
    if (q->T == 1) {
        void *ptr[4] = {dl_tensor_bf16(&a->c.in[0]), w, dl_tensor_bf16(&a->c.out), b};
        dl_dnnl_prim_run(&q->fwd, ptr, scratch(q, a));
        return;
    }
    float *acc = (float *)((char *)scratch(q, a) + dl_dnnl_align(q->fwd.scratch));
    void *ptr[3] = {w, dl_tensor_bf16(&a->c.in[0]), b ? (void *)acc : dl_tensor_bf16(&a->c.out)};
    dl_dnnl_prim_run(&q->fwd, ptr, scratch(q, a));
    if (!b) /* the f32 sums rounded once by the matmul */
        return;
    long N = q->N, U = q->U, T = q->T;
    const float *bias = b;
    dl_bf16 *y = dl_tensor_bf16(&a->c.out);
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < N * U; r++) {
        float add = bias[r % U];
        for (long t = 0; t < T; t++)
            y[r * T + t] = dl_f32_to_bf16(acc[r * T + t] + add);
    }
}

/* The copies of a sequence's tensors [N][R][T] as [R][N T] (rows of all
 * samples side by side) after the scratchpad of p, dy's (R = U) first. */
static dl_bf16 *copies(const struct fcb_inst *q, const struct dl_kernel_args *a, const struct dl_dnnl_prim *p)
{
    return (dl_bf16 *)((char *)scratch(q, a) + dl_dnnl_align(p->scratch));
}

/* [N][R][T] samples to [R][N T] rows (back: the other way). */
static void sample_rows(dl_bf16 *rows, dl_bf16 *samples, long N, long R, long T, int back)
{
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < N; n++)
        for (long r = 0; r < R; r++) {
            dl_bf16 *one = rows + r * N * T + n * T, *other = samples + (n * R + r) * T;
            memcpy(back ? other : one, back ? one : other, 2 * (size_t)T);
        }
}

static void fcb_backward_data(void *inst, const struct dl_kernel_args *a)
{
    struct fcb_inst *q = inst;
    if (!a->c.din[0].data)
        return;
    void *w = bf16_weights(q, a, 0);
    if (q->T == 1) {
        void *ptr[3] = {dl_tensor_bf16(&a->c.dout), w, dl_tensor_bf16(&a->c.din[0])};
        dl_dnnl_prim_run(&q->bd, ptr, scratch(q, a));
        return;
    }
    dl_bf16 *dyt = copies(q, a, &q->bd), *dxt = dyt + q->N * q->T * q->U;
    sample_rows(dyt, dl_tensor_bf16(&a->c.dout), q->N, q->U, q->T, 0);
    void *ptr[3] = {w, dyt, dxt};
    dl_dnnl_prim_run(&q->bd, ptr, scratch(q, a));
    sample_rows(dxt, dl_tensor_bf16(&a->c.din[0]), q->N, q->C, q->T, 1);
}

static void fcb_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    struct fcb_inst *q = inst;
    long N = q->N, T = q->T, C = q->C, U = q->U;
    const dl_bf16 *dy = dl_tensor_const_bf16(&a->c.dout), *x = dl_tensor_const_bf16(&a->c.in[0]);
    if (a->c.dparam[0]) {
        const void *src = dy, *w = x;
        if (T > 1) { /* dy and x as [U][N T] and [C][N T] */
            dl_bf16 *dyt = copies(q, a, &q->bw), *xt = dyt + N * T * U;
            sample_rows(dyt, dl_tensor_bf16(&a->c.dout), N, U, T, 0);
            sample_rows(xt, dl_tensor_bf16(&a->c.in[0]), N, C, T, 0);
            src = dyt, w = xt;
        }
        void *ptr[3] = {(void *)src, (void *)w, a->c.dparam[0]};
        dl_dnnl_prim_run(&q->bw, ptr, scratch(q, a));
    }
    if (q->bias && a->c.dparam[1]) {
        float *db = a->c.dparam[1];
        #pragma omp parallel for schedule(static)
        for (long u = 0; u < U; u++) {
            float sum = 0;
            for (long n = 0; n < N; n++)
                for (long t = 0; t < T; t++)
                    sum += dl_bf16_to_f32(dy[(n * U + u) * T + t]);
            db[u] += sum;
        }
    }
}

const struct dl_kernel dl_kernel_onednn_fc_bf16 = {
    .name = "onednn-bf16", .backend = "cpu_onednn", .op = &dl_op_fc, .dtype = DL_BF16,
    .supports = dl_dnnl_bf16_supports, .create = fcb_create, .destroy = fcb_destroy, .workspace_bytes = fcb_ws,
    .saved_bytes = fcb_saved, .forward = fcb_forward, .backward_data = fcb_backward_data,
    .backward_weights = fcb_backward_weights,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};
