/* cuda/fc.c: the fully connected layer on a GPU through cuBLAS ("cublas";
 * built --with-cuda, never run on a GPU so far): the same three products as
 * cpu_blas/fc.c, y = x W^T + b, dx = dy W, dW += dy^T x, db += column sums
 * of dy, with every pointer in device memory.  cuBLAS is column-major, so a
 * row-major N x F matrix is passed as its F x N transpose: y^T = W x^T is
 * gemm(T, N) on W (F x U) and x^T (F x N); dx^T = W^T dy^T is gemm(N, N);
 * dW^T += x^T dy is gemm(N, T) with beta 1.  The bias is broadcast and
 * summed by products with a vector of mb ones the instance keeps on the
 * device.  FP32 throughout (CUBLAS_DEFAULT_MATH: no TF32). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cublas_fc {
    cublasHandle_t h;
    int F, U, mb, bias;
    float *ones; /* mb ones, device memory */
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
    f->F = (int)dl_shape_count(l->in_shape[0]);
    f->U = l->out_shape.c;
    f->mb = cfg->mb;
    f->bias = l->n_params > 1;
    cublasStatus_t s = cublasCreate(&f->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        f->h = NULL;
        cublas_fc_destroy(f);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cublas): cublasCreate failed: %s", l->name,
                         cublasGetStatusString(s));
    }
    cublasSetMathMode(f->h, CUBLAS_DEFAULT_MATH);
    float *ones = malloc(sizeof *ones * (size_t)f->mb);
    cudaError_t r = ones ? cudaMalloc((void **)&f->ones, sizeof *ones * (size_t)f->mb) : cudaErrorMemoryAllocation;
    for (int i = 0; ones && i < f->mb; i++)
        ones[i] = 1;
    if (r == cudaSuccess)
        r = cudaMemcpy(f->ones, ones, sizeof *ones * (size_t)f->mb, cudaMemcpyHostToDevice);
    free(ones);
    if (r != cudaSuccess) {
        cublas_fc_destroy(f);
        return dl_errorf(err, DL_ERR_NOMEM, "layer '%s' (kernel cublas): a vector of %d ones on the device: %s",
                         l->name, cfg->mb, cudaGetErrorString(r));
    }
    *inst = f;
    return DL_OK;
}

static void cublas_fc_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    int N = c->batch;
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
    if (c->din[0])
        dl_cublas_ok(a, "cublas",
                     cublasSgemm(f->h, CUBLAS_OP_N, CUBLAS_OP_N, f->F, c->batch, f->U, &one, c->param[0], f->F,
                                 c->dout, f->U, &zero, c->din[0], f->F),
                     "cublasSgemm");
}

static void cublas_fc_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cublas_fc *f = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1;
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

/* A flattened sample; fc at every position of a sequence has no GPU kernel yet. */
static int cublas_fc_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) != 2;
}

const struct dl_kernel dl_kernel_cublas_fc = {
    .name = "cublas",
    .backend = "cuda",
    .op = &dl_op_fc,
    .device = DL_DEVICE_CUDA,
    .supports = cublas_fc_supports,
    .create = cublas_fc_create,
    .destroy = cublas_fc_destroy,
    .forward = cublas_fc_forward,
    .backward_data = cublas_fc_backward_data,
    .backward_weights = cublas_fc_backward_weights,
};
