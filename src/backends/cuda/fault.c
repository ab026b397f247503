/* cuda/fault.c: cuDNN's, cuBLAS's and the CUDA runtime's statuses as
 * kernel failures (cuda/fault.h). */
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
    return dl_cuda_ok(a, kernel, cudaMemcpyAsync(dst, src, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, 0),
                      "cudaMemcpyAsync");
}
