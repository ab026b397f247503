/* cuda/device_kernels.cu: the CUDA device's accumulate and scale
 * (device_kernels.h), one thread per value, in f32 or bf16.  bf16 values
 * are widened to f32, summed or scaled, and rounded once by core/bf16.h's
 * cast, the host's, so a GPU's bf16 gradient sums are the host's bits.
 * Built by nvcc when --with-cuda; never run on a GPU so far. */
#include "backends/cuda/device_kernels.h"

#include <cuda_runtime.h>

#include "backends/cuda/launch.h"

#include "core/bf16.h"

static __global__ void accumulate_f32(float *dst, const float *src, long n)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] += src[i];
}

static __global__ void accumulate_bf16(dl_bf16 *dst, const dl_bf16 *src, long n)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = dl_f32_to_bf16(__fadd_rn(dl_bf16_to_f32(dst[i]), dl_bf16_to_f32(src[i])));
}

static __global__ void scale_f32(float *x, long n, float f)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = __fmul_rn(x[i], f);
}

static __global__ void scale_bf16(dl_bf16 *x, long n, float f)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = dl_f32_to_bf16(__fmul_rn(dl_bf16_to_f32(x[i]), f));
}

extern "C" int dl_cuda_accumulate(void *dst, const void *src, long n, int bf16)
{
    if (n > 0 && bf16)
        accumulate_bf16<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>((dl_bf16 *)dst, (const dl_bf16 *)src, n);
    else if (n > 0)
        accumulate_f32<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>((float *)dst, (const float *)src, n);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_scale(void *x, long n, float f, int bf16)
{
    if (n > 0 && bf16)
        scale_bf16<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>((dl_bf16 *)x, n, f);
    else if (n > 0)
        scale_f32<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>((float *)x, n, f);
    return dl_cuda_launched();
}
