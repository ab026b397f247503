/* cuda/fault.c: cuDNN's, cuBLAS's and the CUDA runtime's statuses as
 * kernel failures, and a cuBLAS kernel's handle (cuda/fault.h). */
#include "backends/cuda/fault.h"

int dl_cudnn_ok(const struct dl_kernel_args *a, const char *kernel, cudnnStatus_t st, const char *call)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 1;
    dl_kernel_fail(a, kernel, call, cudnnGetErrorString(st));
    return 0;
}

int dl_cublas_ok(const struct dl_kernel_args *a, const char *kernel, cublasStatus_t st, const char *call)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 1;
    dl_kernel_fail(a, kernel, call, cublasGetStatusString(st));
    return 0;
}

int dl_cuda_ok(const struct dl_kernel_args *a, const char *kernel, cudaError_t st, const char *call)
{
    if (st == cudaSuccess)
        return 1;
    dl_kernel_fail(a, kernel, call, cudaGetErrorString(st));
    return 0;
}

int dl_cuda_copy_within(const struct dl_kernel_args *a, const char *kernel, float *dst, const float *src, long n)
{
    return dl_cuda_ok(a, kernel, cudaMemcpyAsync(dst, src, sizeof *dst * (size_t)n, cudaMemcpyDeviceToDevice, 0),
                      "cudaMemcpyAsync");
}

int dl_cublas_create(cublasHandle_t *h, const struct dl_layer *l, const char *kernel, struct dl_error *err)
{
    cublasStatus_t s = cublasCreate(h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *h = NULL;
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel %s): cublasCreate failed: %s", l->name, kernel,
                         cublasGetStatusString(s));
    }
    cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH);
    return DL_OK;
}
