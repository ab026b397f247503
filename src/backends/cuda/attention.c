/* cuda/attention.c: causal (or full) multi-head self-attention on a GPU,
 * in f32 ("cublas") and in bf16 ("cublas-bf16"; both built --with-cuda,
 * never run on a GPU so far), as ops/attention.c: packed q, k, v [T, 3C]
 * or three [T, C] inputs, heads of d = C / heads features, scores scaled
 * by 1/sqrt(d), softmax in float, attention dropout with the host's mask
 * (attention_kernels.h).  A head's q, k and v are [d][T] blocks of the
 * [C][T] storage (core/shape.h), which cuBLAS reads in place as
 * column-major T x d matrices (leading dim T); per sample, one
 * strided-batched GEMM over its heads for each product (gemm.h):
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
 * call with a cache records a fault.
 *
 * bf16 (one create function for both tables, the dtype from the kernel
 * config): q, k, v, the output and their gradients bf16, everything
 * between them f32, so its results are the f32 kernel's on the same bf16
 * values rounded once to bf16: reference-bf16's rounding points (the CPU
 * has no bf16 attention: under --precision bf16 its attention computes in
 * f32 between the bf16 projections before and after it, which rounds at
 * the same points).  The products of two bf16 tensors, S = scale K Q^T
 * and dP' = V dY^T, are cublasGemmStridedBatchedEx on them with FP32
 * compute into the f32 scores; a product with the f32 weights or score
 * gradients has its bf16 operand widened to f32 in the workspace first
 * (cuBLAS takes two operands of one type) and writes f32 sums there, which
 * are rounded once into the bf16 output or input gradient (dl_cuda_cast).
 * That takes two more [C][T] blocks of floats of the workspace in each
 * direction (one sample's widened operand and its sums). */
#include "backends/cuda/cuda.h"

#include <math.h>
#include <stdlib.h>

#include "backends/attention_rows.h"
#include "backends/attr.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/device_kernels.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/gemm.h"
#include "ops/attention.h"
#include "ops/kinds.h"

struct cuda_attention {
    cublasHandle_t h;
    int T, C, H, d;
    long head0; /* the whole layer's index of head 0 (a tensor rank's part) */
    int packed, causal;
    double dropout;
    enum dl_dtype dt; /* the kernel's: q, k, v, the output and their gradients */
    const char *name; /* the kernel's, for failures */
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
    m->dt = cfg->dtype;
    m->name = m->dt == DL_BF16 ? "cublas-bf16" : "cublas";
    int rc = dl_cublas_create(&m->h, l, m->name, err);
    if (rc) {
        attention_destroy(m);
        return rc;
    }
    *inst = m;
    return DL_OK;
}

/* Values in one sample's [C][T] block of q, k, v or the output. */
static long block_of(const struct cuda_attention *m)
{
    return (long)m->C * m->T;
}

/* The T x T scores of every head of one sample: once forward, twice
 * backward (the weights and their gradients); in bf16 also two [C][T]
 * blocks of floats in each direction (a widened operand and f32 sums). */
static size_t attention_ws(const void *inst, enum dl_dir dir)
{
    const struct cuda_attention *m = inst;
    size_t scores = dl_dtype_size(DL_F32) * (size_t)m->H * (size_t)m->T * (size_t)m->T;
    size_t spare = m->dt == DL_F32 ? 0 : 2 * dl_dtype_size(DL_F32) * (size_t)block_of(m);
    return dir == DL_DIR_FORWARD ? scores + spare : dir == DL_DIR_BACKWARD_DATA ? 2 * scores + spare : 0;
}

/* p advanced by `values` values of the kernel's dtype. */
static const void *at(const struct cuda_attention *m, const void *p, long values)
{
    return (const char *)p + (size_t)values * dl_dtype_size(m->dt);
}

/* Sample n's q, k, v (head 0 of each) and their gradients (NULL: not
 * wanted), in the kernel's dtype. */
struct sample_qkv {
    const void *q, *k, *v;
    void *dq, *dk, *dv;
};

static struct sample_qkv sample_of(const struct cuda_attention *m, const struct dl_op_call *c, long n)
{
    long block = block_of(m);
    struct sample_qkv x = {0};
    if (m->packed) {
        long base = n * 3 * block;
        x.q = at(m, dl_tensor_const_any(&c->in[0]), base), x.k = at(m, x.q, block), x.v = at(m, x.k, block);
        if (c->din[0].data) {
            x.dq = (void *)at(m, dl_tensor_any(&c->din[0]), base);
            x.dk = (void *)at(m, x.dq, block), x.dv = (void *)at(m, x.dk, block);
        }
        return x;
    }
    long base = n * block;
    x.q = at(m, dl_tensor_const_any(&c->in[0]), base), x.k = at(m, dl_tensor_const_any(&c->in[1]), base), x.v = at(m, dl_tensor_const_any(&c->in[2]), base);
    x.dq = c->din[0].data ? (void *)at(m, dl_tensor_any(&c->din[0]), base) : NULL;
    x.dk = c->din[1].data ? (void *)at(m, dl_tensor_any(&c->din[1]), base) : NULL;
    x.dv = c->din[2].data ? (void *)at(m, dl_tensor_any(&c->din[2]), base) : NULL;
    return x;
}

/* op(A) op(B) into C (f32, beta 0) for every head of a sample: A and B of
 * dtype ab, all three column-major with leading dim T, a head's block
 * `stride` values after the previous one's. */
static int heads_gemm(const struct cuda_attention *m, const struct dl_kernel_args *a, cublasOperation_t ta,
                      cublasOperation_t tb, int rows, int cols, int inner, float alpha, const void *A, long stride_a,
                      const void *B, long stride_b, enum dl_dtype ab, float *C, long stride_c)
{
    struct dl_gemm g = {ta, tb, rows, cols, inner, alpha, A, m->T, B, m->T, 0, C, m->T, ab, DL_F32, m->H,
                        stride_a, stride_b, stride_c};
    return dl_cublas_gemm(m->h, a, m->name, &g);
}

/* One sample's block src (kernel's dtype) as f32: src itself for an f32
 * kernel, else widened into spare; NULL with the failure recorded. */
static const float *as_f32(const struct cuda_attention *m, const struct dl_kernel_args *a, const void *src,
                           float *spare)
{
    if (m->dt == DL_F32)
        return src;
    return dl_cuda_ok(a, m->name, (cudaError_t)dl_cuda_cast(spare, DL_F32, src, m->dt, block_of(m), 0),
                      "dl_cuda_cast (to f32)")
               ? spare
               : NULL;
}

/* Where a product for the block dst writes its f32 sums: dst itself for an
 * f32 kernel, else spare, which stored() then rounds into dst. */
static float *sums_for(const struct cuda_attention *m, void *dst, float *spare)
{
    return m->dt == DL_F32 ? dst : spare;
}

static int stored(const struct cuda_attention *m, const struct dl_kernel_args *a, void *dst, const float *sums)
{
    return m->dt == DL_F32 ||
           dl_cuda_ok(a, m->name, (cudaError_t)dl_cuda_cast(dst, m->dt, sums, DL_F32, block_of(m), 0),
                      "dl_cuda_cast (from f32)");
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
                      x->q, dT, m->dt, p, TT) &&
           dl_cuda_ok(a, m->name, (cudaError_t)dl_cuda_attention_softmax(p, m->H, m->T, m->causal, drop),
                      "attention softmax launch");
}

/* A cached call (incremental decoding) has no GPU kernel. */
static int uncached(const struct cuda_attention *m, const struct dl_kernel_args *a)
{
    if (!a->c.cache)
        return 1;
    dl_kernel_fail(a, m->name, "attention", "incremental decoding (a key/value cache) has no GPU kernel");
    return 0;
}

static void attention_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_attention *m = inst;
    const struct dl_op_call *c = &a->c;
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    float *p = a->workspace;
    float *v_f32 = m->dt == DL_F32 ? NULL : p + m->H * TT, *sums = v_f32 ? v_f32 + block_of(m) : NULL;
    if (!uncached(m, a))
        return;
    for (long n = 0; n < c->batch; n++) {
        struct sample_qkv x = sample_of(m, c, n);
        void *y = (void *)at(m, dl_tensor_any(&c->out), n * block_of(m));
        const float *v;
        if (!weights(m, a, &x, dropout_of(m, c, n), p) || !(v = as_f32(m, a, x.v, v_f32)) ||
            !heads_gemm(m, a, CUBLAS_OP_T, CUBLAS_OP_N, m->T, m->d, m->T, 1, p, TT, v, dT, DL_F32,
                        sums_for(m, y, sums), dT) ||
            !stored(m, a, y, sums))
            return;
    }
}

/* dst = op(A) B for every head, B a sample's block (kernel's dtype) taken
 * as f32 (widened into spare) and dst's sums f32 (in sums, then rounded
 * into dst); skipped when dst is NULL (not wanted). */
static int gradient(const struct cuda_attention *m, const struct dl_kernel_args *a, cublasOperation_t ta,
                    const float *A, const void *B, void *dst, float *spare, float *sums)
{
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    const float *b;
    return !dst || ((b = as_f32(m, a, B, spare)) &&
                    heads_gemm(m, a, ta, CUBLAS_OP_N, m->T, m->d, m->T, 1, A, TT, b, dT, DL_F32,
                               sums_for(m, dst, sums), dT) &&
                    stored(m, a, dst, sums));
}

static void attention_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_attention *m = inst;
    const struct dl_op_call *c = &a->c;
    long dT = (long)m->d * m->T, TT = (long)m->T * m->T;
    float *p = a->workspace, *g = p + m->H * TT;
    float *spare = m->dt == DL_F32 ? NULL : g + m->H * TT, *sums = spare ? spare + block_of(m) : NULL;
    for (long n = 0; n < c->batch; n++) {
        struct sample_qkv x = sample_of(m, c, n);
        if (!x.dq && !x.dk && !x.dv)
            return;
        const void *dy = at(m, dl_tensor_const_any(&c->dout), n * block_of(m));
        struct dl_cuda_attention_dropout drop = dropout_of(m, c, n), none = drop;
        none.rate = 0;
        if (!weights(m, a, &x, none, p) ||
            !heads_gemm(m, a, CUBLAS_OP_N, CUBLAS_OP_T, m->T, m->T, m->d, 1, x.v, dT, dy, dT, m->dt, g, TT) ||
            !dl_cuda_ok(a, m->name,
                        (cudaError_t)dl_cuda_attention_score_grad(p, g, m->H, m->T, m->causal,
                                                                  (float)(1 / sqrt((double)m->d)), drop),
                        "attention score gradient launch") ||
            !gradient(m, a, CUBLAS_OP_N, p, dy, x.dv, spare, sums) ||  /* dV = P' dY */
            !gradient(m, a, CUBLAS_OP_T, g, x.k, x.dq, spare, sums) || /* dQ = dS^T K */
            !gradient(m, a, CUBLAS_OP_N, g, x.q, x.dk, spare, sums))   /* dK = dS Q */
            return;
    }
}

#define CUBLAS_ATTENTION_KERNEL(SYM, NAME, DTYPE)                                                \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cuda", .op = &dl_op_attention, .device = DL_DEVICE_CUDA, .dtype = DTYPE, \
        .supports = dl_attention_ungrouped, /* not yet grouped kv heads */                       \
        .create = attention_create, .destroy = attention_destroy, .workspace_bytes = attention_ws, \
        .forward = attention_forward, .backward_data = attention_backward,                       \
    };
CUBLAS_ATTENTION_KERNEL(dl_kernel_cublas_attention, "cublas", DL_F32)
CUBLAS_ATTENTION_KERNEL(dl_kernel_cublas_attention_bf16, "cublas-bf16", DL_BF16)
