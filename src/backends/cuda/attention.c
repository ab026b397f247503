/* cuda/attention.c: causal (or full) multi-head self-attention on a GPU
 * ("cublas"; built --with-cuda, never run on a GPU so far), as
 * ops/attention.c: packed q, k, v [T, 3C] or three [T, C] inputs, heads of
 * d = C / heads features, scores scaled by 1/sqrt(d), softmax in float,
 * attention dropout with the host's mask (attention_kernels.h).  A head's
 * q, k and v are [d][T] blocks of the [C][T] storage (core/shape.h), which
 * cuBLAS reads in place as column-major T x d matrices (leading dim T);
 * per sample, one strided-batched SGEMM over its heads for each product:
 *   S = scale K Q^T          (T x T a head, query t's row contiguous),
 *   P' = softmax(S) D        (attention_kernels.cu, in place; D dropout),
 *   Y = P'^T V               (written into the output's block),
 * and backward recomputes S and P from q and k (nothing is kept between
 * forward and backward: no saved memory), then
 *   dP' = V dY^T,  dS = scale P (D dP' - rowsum(P D dP')),  P' = P D,
 *   dV = P' dY,  dQ = dS^T K,  dK = dS Q.
 * Memory: the T x T scores live in the call's workspace, one sample's heads
 * at a time: H T^2 floats forward, 2 H T^2 backward (GPT-2 small at T =
 * 1024: 48 and 96 MiB), for any micro-batch size.  FP32 math (no TF32).
 * Incremental decoding (the call's key/value cache) has no GPU kernel: a
 * call with a cache records a fault. */
#include "backends/cuda/cuda.h"

#include <math.h>
#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/fault.h"
#include "ops/attention.h"
#include "ops/kinds.h"

struct cuda_attention {
    cublasHandle_t h;
    int T, C, H, d;
    long head0; /* the whole layer's index of head 0 (a tensor rank's part) */
    int packed, causal;
    double dropout;
};

static void attention_destroy(void *inst)
{
    struct cuda_attention *m = inst;
    if (m && m->h)
        cublasDestroy(m->h);
    free(m);
}

static int attention_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    struct cuda_attention *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->T = l->out_shape.h;
    m->C = l->out_shape.c;
    m->H = dl_attr_int(l, "heads", 0);
    m->d = m->C / m->H;
    m->head0 = dl_attention_first_head(l->attr);
    m->packed = l->n_in == 1;
    m->causal = dl_attr_int(l, "causal", 0);
    m->dropout = dl_attr_float(l, "dropout");
    int rc = dl_cublas_create(&m->h, l, "cublas", err);
    if (rc) {
        attention_destroy(m);
        return rc;
    }
    *inst = m;
    return DL_OK;
}

/* The T x T scores of every head of one sample: once forward, twice
 * backward (the weights and their gradients). */
static size_t attention_ws(const void *inst, enum dl_dir dir)
{
    const struct cuda_attention *m = inst;
    size_t scores = sizeof(float) * (size_t)m->H * (size_t)m->T * (size_t)m->T;
    return dir == DL_DIR_FORWARD ? scores : dir == DL_DIR_BACKWARD_DATA ? 2 * scores : 0;
}

/* Sample n's q, k, v (head 0 of each) and their gradients (NULL: not wanted). */
struct sample_qkv {
    const float *q, *k, *v;
    float *dq, *dk, *dv;
};

static struct sample_qkv sample_of(const struct cuda_attention *m, const struct dl_op_call *c, long n)
{
    long block = (long)m->C * m->T;
    struct sample_qkv x = {0};
    if (m->packed) {
        long base = n * 3 * block;
        x.q = c->in[0] + base, x.k = x.q + block, x.v = x.k + block;
        if (c->din[0])
            x.dq = c->din[0] + base, x.dk = x.dq + block, x.dv = x.dk + block;
        return x;
    }
    long base = n * block;
    x.q = c->in[0] + base, x.k = c->in[1] + base, x.v = c->in[2] + base;
    x.dq = c->din[0] ? c->din[0] + base : NULL;
    x.dk = c->din[1] ? c->din[1] + base : NULL;
    x.dv = c->din[2] ? c->din[2] + base : NULL;
    return x;
}

/* op(A) op(B) into C (beta 0) for every head of a sample: A, B and C
 * column-major with leading dim T, a head's block `stride` floats after the
 * previous one's. */
static int heads_gemm(const struct cuda_attention *m, const struct dl_kernel_args *a, cublasOperation_t ta,
                      cublasOperation_t tb, int rows, int cols, int inner, float alpha, const float *A, long stride_a,
                      const float *B, long stride_b, float *C, long stride_c)
{
    const float zero = 0;
    return dl_cublas_ok(a, "cublas",
                        cublasSgemmStridedBatched(m->h, ta, tb, rows, cols, inner, &alpha, A, m->T, stride_a, B, m->T,
                                                  stride_b, &zero, C, m->T, stride_c, m->H),
                        "cublasSgemmStridedBatched");
}

/* Dropout of sample n of the call: none outside training or at rate 0. */
static struct dl_cuda_attention_dropout dropout_of(const struct cuda_attention *m, const struct dl_op_call *c, long n)
{
    struct dl_cuda_attention_dropout drop = {c->key, c->sample0 + n, m->head0, 0, 1};
    if (c->training && m->dropout > 0)
        drop.rate = m->dropout, drop.keep = (float)(1 / (1 - m->dropout));
    return drop;
}

/* The weights of sample x's heads into p (H x T x T): softmax(scale K Q^T),
 * times the dropout factors of drop. */
static int weights(const struct cuda_attention *m, const struct dl_kernel_args *a, const struct sample_qkv *x,
                   struct dl_cuda_attention_dropout drop, float *p)
{
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    return heads_gemm(m, a, CUBLAS_OP_N, CUBLAS_OP_T, m->T, m->T, m->d, (float)(1 / sqrt((double)m->d)), x->k, dT,
                      x->q, dT, p, TT) &&
           dl_cuda_ok(a, "cublas", (cudaError_t)dl_cuda_attention_softmax(p, m->H, m->T, m->causal, drop),
                      "attention softmax launch");
}

/* A cached call (incremental decoding) has no GPU kernel. */
static int uncached(const struct dl_kernel_args *a)
{
    if (!a->c.cache)
        return 1;
    dl_kernel_fail(a, "cublas", "attention", "incremental decoding (a key/value cache) has no GPU kernel");
    return 0;
}

static void attention_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_attention *m = inst;
    const struct dl_op_call *c = &a->c;
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    float *p = a->workspace;
    if (!uncached(a))
        return;
    for (long n = 0; n < c->batch; n++) {
        struct sample_qkv x = sample_of(m, c, n);
        if (!weights(m, a, &x, dropout_of(m, c, n), p) ||
            !heads_gemm(m, a, CUBLAS_OP_T, CUBLAS_OP_N, m->T, m->d, m->T, 1, p, TT, x.v, dT,
                        c->out + n * (long)m->C * m->T, dT))
            return;
    }
}

static void attention_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_attention *m = inst;
    const struct dl_op_call *c = &a->c;
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    float *p = a->workspace, *g = p + (long)m->H * TT;
    for (long n = 0; n < c->batch; n++) {
        struct sample_qkv x = sample_of(m, c, n);
        if (!x.dq && !x.dk && !x.dv)
            return;
        const float *dy = c->dout + n * (long)m->C * m->T;
        struct dl_cuda_attention_dropout drop = dropout_of(m, c, n), none = drop;
        none.rate = 0;
        if (!weights(m, a, &x, none, p) ||
            !heads_gemm(m, a, CUBLAS_OP_N, CUBLAS_OP_T, m->T, m->T, m->d, 1, x.v, dT, dy, dT, g, TT) ||
            !dl_cuda_ok(a, "cublas",
                        (cudaError_t)dl_cuda_attention_score_grad(p, g, m->H, m->T, m->causal,
                                                                  (float)(1 / sqrt((double)m->d)), drop),
                        "attention score gradient launch") ||
            (x.dv && !heads_gemm(m, a, CUBLAS_OP_N, CUBLAS_OP_N, m->T, m->d, m->T, 1, p, TT, dy, dT, x.dv, dT)) ||
            (x.dq && !heads_gemm(m, a, CUBLAS_OP_T, CUBLAS_OP_N, m->T, m->d, m->T, 1, g, TT, x.k, dT, x.dq, dT)) ||
            (x.dk && !heads_gemm(m, a, CUBLAS_OP_N, CUBLAS_OP_N, m->T, m->d, m->T, 1, g, TT, x.q, dT, x.dk, dT)))
            return;
    }
}

const struct dl_kernel dl_kernel_cublas_attention = {
    .name = "cublas",
    .backend = "cuda",
    .op = &dl_op_attention,
    .device = DL_DEVICE_CUDA,
    .create = attention_create,
    .destroy = attention_destroy,
    .workspace_bytes = attention_ws,
    .forward = attention_forward,
    .backward_data = attention_backward,
};
