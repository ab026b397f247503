/* cuda/fc.c: the fully connected layer on a GPU through cuBLAS ("cublas";
 * built --with-cuda, never run on a GPU so far): the same three products as
 * cpu_blas/fc.c, y = x W^T + b, dx = dy W, dW += dy^T x, db += column sums
 * of dy, with every pointer in device memory.  cuBLAS is column-major, so a
 * row-major N x F matrix is passed as its F x N transpose: y^T = W x^T is
 * gemm(T, N) on W (F x U) and x^T (F x N); dx^T = W^T dy^T is gemm(N, N);
 * dW^T += x^T dy is gemm(N, T) with beta 1.  At every position of a
 * sequence [T, C] (stored [C][T] per sample: core/shape.h) a sample is a
 * column-major T x C matrix X (leading dim T) and its output T x U, so
 * Y = X W^T, dX = dY W and dW^T += X^T dY: the first two one
 * strided-batched SGEMM over the samples (the weights' stride 0), the
 * weight gradient one SGEMM per sample in sample order (beta 1).  The bias
 * is broadcast and summed by products with a vector of ones (mb of them,
 * or T for a sequence) the instance keeps on the device.  FP32 throughout
 * (CUBLAS_DEFAULT_MATH: no TF32). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cublas_fc {
    cublasHandle_t h;
    int F, U, T, mb, bias; /* F features per position, T positions per sample (1: a vector) */
    float *ones; /* max(mb, T) ones, device memory */
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
    int rc = dl_cublas_create(&f->h, l, "cublas", err);
    if (rc) {
        cublas_fc_destroy(f);
        return rc;
    }
    int n = f->mb > f->T ? f->mb : f->T;
    float *ones = malloc(sizeof *ones * (size_t)n);
    cudaError_t r = ones ? cudaMalloc((void **)&f->ones, sizeof *ones * (size_t)n) : cudaErrorMemoryAllocation;
    for (int i = 0; ones && i < n; i++)
        ones[i] = 1;
    if (r == cudaSuccess)
        r = cudaMemcpy(f->ones, ones, sizeof *ones * (size_t)n, cudaMemcpyHostToDevice);
    free(ones);
    if (r != cudaSuccess) {
        cublas_fc_destroy(f);
        return dl_errorf(err, DL_ERR_NOMEM, "layer '%s' (kernel cublas): a vector of %d ones on the device: %s",
                         l->name, n, cudaGetErrorString(r));
    }
    *inst = f;
    return DL_OK;
}

/* Per position of a sequence: Y (T x U a sample) = ones b^T, then += X W^T. */
static void sequence_forward(const struct cublas_fc *f, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    long out = (long)f->U * f->T;
    if (f->bias &&
        !dl_cublas_ok(a, "cublas",
                      cublasSgemmStridedBatched(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->T, f->U, 1, &one, f->ones, f->T, 0,
                                                c->param[1], 1, 0, &zero, c->out, f->T, out, c->batch),
                      "cublasSgemmStridedBatched (bias)"))
        return;
    dl_cublas_ok(a, "cublas",
                 cublasSgemmStridedBatched(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->T, f->U, f->F, &one, c->in[0], f->T,
                                           (long)f->F * f->T, c->param[0], f->F, 0, f->bias ? &one : &zero, c->out,
                                           f->T, out, c->batch),
                 "cublasSgemmStridedBatched");
}

static void cublas_fc_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    int N = c->batch;
    if (f->T > 1) {
        sequence_forward(f, a);
        return;
    }
    if (f->bias && /* y^T (U x N) = b (U x 1) ones^T (1 x N) */
        !dl_cublas_ok(a, "cublas",
                      cublasSgemm(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->U, N, 1, &one, c->param[1], f->U, f->ones, 1,
                                  &zero, c->out, f->U),
                      "cublasSgemm (bias)"))
        return;
    dl_cublas_ok(a, "cublas",
                 cublasSgemm(f->h, CUBLAS_OP_T, CUBLAS_OP_N, f->U, N, f->F, &one, c->param[0], f->F, c->in[0], f->F,
                             f->bias ? &one : &zero, c->out, f->U),
                 "cublasSgemm");
}

static void cublas_fc_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    if (!c->din[0])
        return;
    if (f->T > 1) /* dX (T x F a sample) = dY W */
        dl_cublas_ok(a, "cublas",
                     cublasSgemmStridedBatched(f->h, CUBLAS_OP_N, CUBLAS_OP_T, f->T, f->F, f->U, &one, c->dout, f->T,
                                               (long)f->U * f->T, c->param[0], f->F, 0, &zero, c->din[0], f->T,
                                               (long)f->F * f->T, c->batch),
                     "cublasSgemmStridedBatched");
    else
        dl_cublas_ok(a, "cublas",
                     cublasSgemm(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->F, c->batch, f->U, &one, c->param[0], f->F,
                                 c->dout, f->U, &zero, c->din[0], f->F),
                     "cublasSgemm");
}

/* Per position of a sequence, sample by sample: dW^T (F x U) += X^T dY,
 * db (U) += dY^T ones. */
static void sequence_backward_weights(const struct cublas_fc *f, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    const float one = 1;
    for (long n = 0; n < c->batch; n++) {
        const float *x = c->in[0] + n * f->F * f->T, *dy = c->dout + n * f->U * f->T;
        if (c->dparam[0] &&
            !dl_cublas_ok(a, "cublas",
                          cublasSgemm(f->h, CUBLAS_OP_T, CUBLAS_OP_N, f->F, f->U, f->T, &one, x, f->T, dy, f->T, &one,
                                      c->dparam[0], f->F),
                          "cublasSgemm"))
            return;
        if (f->bias && c->dparam[1] &&
            !dl_cublas_ok(a, "cublas",
                          cublasSgemv(f->h, CUBLAS_OP_T, f->T, f->U, &one, dy, f->T, f->ones, 1, &one, c->dparam[1], 1),
                          "cublasSgemv"))
            return;
    }
}

static void cublas_fc_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1;
    if (f->T > 1) {
        sequence_backward_weights(f, a);
        return;
    }
    if (c->dparam[0])
        dl_cublas_ok(a, "cublas",
                     cublasSgemm(f->h, CUBLAS_OP_N, CUBLAS_OP_T, f->F, f->U, c->batch, &one, c->in[0], f->F, c->dout,
                                 f->U, &one, c->dparam[0], f->F),
                     "cublasSgemm");
    if (f->bias && c->dparam[1]) /* db (U) += dy^T (U x N) ones (N) */
        dl_cublas_ok(a, "cublas",
                     cublasSgemv(f->h, CUBLAS_OP_N, f->U, c->batch, &one, c->dout, f->U, f->ones, 1, &one,
                                 c->dparam[1], 1),
                     "cublasSgemv");
}

const struct dl_kernel dl_kernel_cublas_fc = {
    .name = "cublas",
    .backend = "cuda",
    .op = &dl_op_fc,
    .device = DL_DEVICE_CUDA,
    .create = cublas_fc_create,
    .destroy = cublas_fc_destroy,
    .forward = cublas_fc_forward,
    .backward_data = cublas_fc_backward_data,
    .backward_weights = cublas_fc_backward_weights,
};
