/* cuda/fc.c: the fully connected layer on a GPU through cuBLAS, in f32
 * ("cublas") and in bf16 ("cublas-bf16"; both built --with-cuda, never run
 * on a GPU so far): the same three products as cpu_blas/fc.c,
 * y = x W^T + b, dx = dy W, dW += dy^T x, db += column sums of dy, with
 * every pointer in device memory.  cuBLAS is column-major, so a row-major
 * N x F matrix is passed as its F x N transpose: y^T = W x^T is gemm(T, N)
 * on W (F x U) and x^T (F x N); dx^T = W^T dy^T is gemm(N, N);
 * dW^T += x^T dy is gemm(N, T) with beta 1.  At every position of a
 * sequence [T, C] (stored [C][T] per sample: core/shape.h) a sample is a
 * column-major T x C matrix X (leading dim T) and its output T x U, so
 * Y = X W^T, dX = dY W and dW^T += X^T dY: the first two one
 * strided-batched GEMM over the samples (the weights' stride 0), the
 * weight gradient one GEMM per sample in sample order (beta 1).  The bias
 * is broadcast and summed by products with a vector of ones (mb of them,
 * or T for a sequence) the instance keeps on the device.
 *
 * f32: FP32 throughout (CUBLAS_DEFAULT_MATH: no TF32).  bf16 (one create
 * function for both tables, the dtype from the kernel config), at
 * onednn-bf16's and reference-bf16's rounding points: the input, output
 * and their gradients bf16, the f32 master weights rounded to bf16 in the
 * workspace for each call (dl_cuda_cast), every product a cublasGemmEx on
 * bf16 operands with FP32 compute (gemm.h).  Forward writes its sums into
 * f32 in the workspace on top of the f32 bias (broadcast in f32, as
 * before) and rounds them once into the output; backward data writes the
 * bf16 input gradient straight from its f32 sums; the weight gradient is
 * produced in f32 by cuBLAS (C of type CUDA_R_32F, beta 1) and the bias
 * gradient by a product with ones in bf16 into f32: both gradients f32, as
 * the CPU's bf16 kernels give them. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backends/cuda/device_kernels.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/gemm.h"
#include "ops/kinds.h"

struct cublas_fc {
    cublasHandle_t h;
    int F, U, T, mb, bias; /* F features per position, T positions per sample (1: a vector) */
    enum dl_dtype dt;      /* the kernel's: its input, output and their gradients */
    const char *name;      /* the kernel's, for failures */
    void *ones; /* max(mb, T) ones in f32, then (bf16) as many in bf16; device memory */
};

static void cublas_fc_destroy(void *inst)
{
    struct cublas_fc *f = inst;
    if (!f)
        return;
    if (f->h)
        cublasDestroy(f->h);
    if (f->ones)
        cudaFree(f->ones);
    free(f);
}

static long ones_count(const struct cublas_fc *f)
{
    return f->mb > f->T ? f->mb : f->T;
}

/* The ones in dtype dt (f32: the bias's; the kernel's dtype: dy's). */
static const void *ones_in(const struct cublas_fc *f, enum dl_dtype dt)
{
    return dt == DL_F32 ? f->ones : (const char *)f->ones + dl_dtype_size(DL_F32) * (size_t)ones_count(f);
}

/* f->ones on the device: max(mb, T) ones in f32, then in bf16 for a bf16 kernel. */
static cudaError_t ones_to_device(struct cublas_fc *f)
{
    long n = ones_count(f);
    size_t bytes = dl_dtype_size(DL_F32) * (size_t)n + (f->dt == DL_BF16 ? dl_dtype_size(DL_BF16) * (size_t)n : 0);
    float *host = malloc(bytes);
    cudaError_t r = host ? cudaMalloc(&f->ones, bytes) : cudaErrorMemoryAllocation;
    if (r != cudaSuccess)
        f->ones = NULL;
    dl_bf16 *host_bf16 = host ? (dl_bf16 *)(host + n) : NULL;
    for (long i = 0; host && i < n; i++) {
        host[i] = 1;
        if (f->dt == DL_BF16)
            host_bf16[i] = dl_f32_to_bf16(1);
    }
    if (r == cudaSuccess)
        r = cudaMemcpy(f->ones, host, bytes, cudaMemcpyHostToDevice);
    free(host);
    return r;
}

static int cublas_fc_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    struct cublas_fc *f = dl_calloc(1, sizeof *f, err);
    if (!f)
        return DL_ERR_NOMEM;
    *inst = NULL;
    int seq = dl_shape_rank(l->in_shape[0]) == 2;
    f->F = seq ? l->in_shape[0].c : (int)dl_shape_count(l->in_shape[0]);
    f->T = seq ? l->in_shape[0].h : 1;
    f->U = l->out_shape.c;
    f->mb = cfg->mb;
    f->bias = l->n_params > 1;
    f->dt = cfg->dtype;
    f->name = f->dt == DL_BF16 ? "cublas-bf16" : "cublas";
    int rc = dl_cublas_create(&f->h, l, f->name, err);
    if (rc) {
        cublas_fc_destroy(f);
        return rc;
    }
    cudaError_t r = ones_to_device(f);
    if (r != cudaSuccess) {
        rc = dl_errorf(err, DL_ERR_NOMEM, "layer '%s' (kernel %s): a vector of %ld ones on the device: %s", l->name,
                       f->name, ones_count(f), cudaGetErrorString(r));
        cublas_fc_destroy(f);
        return rc;
    }
    *inst = f;
    return DL_OK;
}

/* bf16: the weights rounded to bf16 at the workspace's start (256-byte
 * multiples), then forward's f32 sums; f32: nothing. */
static size_t weights_bytes(const struct cublas_fc *f)
{
    return f->dt == DL_F32 ? 0 : ((size_t)f->U * (size_t)f->F * sizeof(dl_bf16) + 255) / 256 * 256;
}

static size_t cublas_fc_workspace_bytes(const void *inst, enum dl_dir dir)
{
    const struct cublas_fc *f = inst;
    if (f->dt == DL_F32 || dir == DL_DIR_BACKWARD_WEIGHTS)
        return 0;
    size_t sums = dir == DL_DIR_FORWARD ? dl_dtype_size(DL_F32) * (size_t)f->mb * (size_t)f->U * (size_t)f->T : 0;
    return weights_bytes(f) + sums;
}

/* The weights the products read: the f32 master weights, or (bf16) them
 * rounded to bf16 in the workspace; NULL with the failure recorded. */
static const void *weights(const struct cublas_fc *f, const struct dl_kernel_args *a)
{
    if (f->dt == DL_F32)
        return a->c.param[0];
    return dl_cuda_ok(a, f->name,
                      (cudaError_t)dl_cuda_cast(a->workspace, DL_BF16, a->c.param[0], DL_F32, (long)f->U * f->F, 0),
                      "dl_cuda_cast (weights to bf16)")
               ? a->workspace
               : NULL;
}

/* Bytes from one sample's first value of a tensor of `per` values a sample to the next's. */
static size_t sample_bytes(const struct cublas_fc *f, long per)
{
    return dl_dtype_size(f->dt) * (size_t)per;
}

static void cublas_fc_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    int N = c->batch;
    long out = (long)f->U * f->T;
    const void *w = weights(f, a);
    float *y = f->dt == DL_F32 ? dl_tensor_f32(&c->out) : (float *)((char *)a->workspace + weights_bytes(f));
    if (!w)
        return;
    /* y = the bias at every sample (and position): y^T (U x N) = b ones^T;
     * a sequence's Y (T x U) = ones b^T */
    const float *b = f->bias ? c->param[1] : NULL;
    struct dl_gemm bias = {CUBLAS_OP_N, CUBLAS_OP_N, f->U, N, 1, 1, b, f->U, ones_in(f, DL_F32), 1, 0, y, f->U,
                           DL_F32, DL_F32};
    if (f->T > 1)
        bias = (struct dl_gemm){CUBLAS_OP_N, CUBLAS_OP_N, f->T, f->U, 1, 1, ones_in(f, DL_F32), f->T, b, 1, 0, y, f->T,
                                DL_F32, DL_F32, N, 0, 0, out};
    /* then y^T (U x N) += W x^T; a sequence's Y (T x U) += X W^T */
    struct dl_gemm product = {CUBLAS_OP_T, CUBLAS_OP_N, f->U, N, f->F, 1, w, f->F, dl_tensor_const_any(&c->in[0]), f->F, f->bias, y, f->U,
                              f->dt, DL_F32};
    if (f->T > 1)
        product = (struct dl_gemm){CUBLAS_OP_N, CUBLAS_OP_N, f->T, f->U, f->F, 1, dl_tensor_const_any(&c->in[0]), f->T, w, f->F, f->bias, y,
                                   f->T, f->dt, DL_F32, N, (long)f->F * f->T, 0, out};
    if ((f->bias && !dl_cublas_gemm(f->h, a, f->name, &bias)) || !dl_cublas_gemm(f->h, a, f->name, &product))
        return;
    if (f->dt != DL_F32) /* the f32 sums rounded once into the output */
        dl_cuda_ok(a, f->name, (cudaError_t)dl_cuda_cast(dl_tensor_any(&c->out), f->dt, y, DL_F32, N * out, 0),
                   "dl_cuda_cast (output)");
}

static void cublas_fc_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    const void *w = weights(f, a);
    /* dx^T (F x N) = W^T dy^T; a sequence's dX (T x F) = dY W */
    struct dl_gemm g = {CUBLAS_OP_N, CUBLAS_OP_N, f->F, c->batch, f->U, 1, w, f->F, dl_tensor_const_any(&c->dout), f->U, 0, dl_tensor_any(&c->din[0]), f->F,
                        f->dt, f->dt};
    if (f->T > 1)
        g = (struct dl_gemm){CUBLAS_OP_N, CUBLAS_OP_T, f->T, f->F, f->U, 1, dl_tensor_const_any(&c->dout), f->T, w, f->F, 0, dl_tensor_any(&c->din[0]), f->T,
                             f->dt, f->dt, c->batch, (long)f->U * f->T, 0, (long)f->F * f->T};
    if (w)
        dl_cublas_gemm(f->h, a, f->name, &g);
}

/* dW^T (F x U) += x^T dy and db (U) += dy^T ones for `rows` rows of x
 * (F values apart; a sequence's sample: T rows, x and dy column-major
 * with leading dim T). */
static int weight_sums(const struct cublas_fc *f, const struct dl_kernel_args *a, const void *x, const void *dy,
                       int rows)
{
    const struct dl_op_call *c = &a->c;
    int seq = f->T > 1;
    struct dl_gemm dw = {seq ? CUBLAS_OP_T : CUBLAS_OP_N, seq ? CUBLAS_OP_N : CUBLAS_OP_T, f->F, f->U, rows, 1, x,
                         seq ? f->T : f->F, dy, seq ? f->T : f->U, 1, c->dparam[0], f->F, f->dt, DL_F32};
    float *dbias = f->bias ? c->dparam[1] : NULL;
    struct dl_gemm db = {seq ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, f->U, 1, rows, 1, dy, seq ? f->T : f->U,
                         ones_in(f, f->dt), rows, 1, dbias, f->U, f->dt, DL_F32};
    return (!c->dparam[0] || dl_cublas_gemm(f->h, a, f->name, &dw)) && (!dbias || dl_cublas_gemm(f->h, a, f->name, &db));
}

static void cublas_fc_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    if (f->T == 1) {
        weight_sums(f, a, dl_tensor_const_any(&c->in[0]), dl_tensor_const_any(&c->dout), c->batch);
        return;
    }
    for (long n = 0; n < c->batch; n++) /* sample by sample, in order */
        if (!weight_sums(f, a, (const char *)dl_tensor_const_any(&c->in[0]) + n * sample_bytes(f, (long)f->F * f->T),
                         (const char *)dl_tensor_const_any(&c->dout) + n * sample_bytes(f, (long)f->U * f->T), f->T))
            return;
}

#define CUBLAS_FC_KERNEL(SYM, NAME, DTYPE)                                                       \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cuda", .op = &dl_op_fc, .device = DL_DEVICE_CUDA, .dtype = DTYPE, \
        .create = cublas_fc_create, .destroy = cublas_fc_destroy,                                \
        .workspace_bytes = cublas_fc_workspace_bytes, .forward = cublas_fc_forward,              \
        .backward_data = cublas_fc_backward_data, .backward_weights = cublas_fc_backward_weights, \
    };
CUBLAS_FC_KERNEL(dl_kernel_cublas_fc, "cublas", DL_F32)
CUBLAS_FC_KERNEL(dl_kernel_cublas_fc_bf16, "cublas-bf16", DL_BF16)
