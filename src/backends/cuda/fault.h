/* cuda/fault.h: how a CUDA kernel's forward or backward reports a failed
 * library call (kernel.h's dl_kernel_fail): each wrapper returns 1 when
 * the call succeeded, else records the call's name and the library's
 * error string in the caller's fault and returns 0, so a kernel skips
 * what depends on the failed call.  Also the cuBLAS handle a kernel's
 * instance starts with, whose failure create() reports. */
#ifndef DL_BACKENDS_CUDA_FAULT_H
#define DL_BACKENDS_CUDA_FAULT_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backends/kernel.h"

int dl_cudnn_ok(const struct dl_kernel_args *a, const char *kernel, cudnnStatus_t st, const char *call);
int dl_cublas_ok(const struct dl_kernel_args *a, const char *kernel, cublasStatus_t st, const char *call);
int dl_cuda_ok(const struct dl_kernel_args *a, const char *kernel, cudaError_t st, const char *call);

/* dst = src, n floats within the device, queued on the default stream (in
 * order with the library calls); 1, or 0 with the failure recorded. */
int dl_cuda_copy_within(const struct dl_kernel_args *a, const char *kernel, float *dst, const float *src, long n);

/* A cuBLAS handle in *h with FP32 math (CUBLAS_DEFAULT_MATH: no TF32), or
 * DL_ERR_UNSUPPORTED naming layer l, the kernel and cuBLAS's reason. */
int dl_cublas_create(cublasHandle_t *h, const struct dl_layer *l, const char *kernel, struct dl_error *err);

#endif
