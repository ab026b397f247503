/* cuda/device_kernels.cu: the CUDA device's accumulate and scale
 * and cast (device_kernels.h), one thread per value, in f32 or bf16.  bf16 values
 * are widened to f32, summed or scaled, and rounded once by core/bf16.h's
 * cast, the host's, so a GPU's bf16 gradient sums are the host's bits.
 * Built by nvcc when --with-cuda; never run on a GPU so far. */
#include "backends/cuda/device_kernels.h"

#include <cuda_runtime.h>

#include "backends/cuda/launch.h"

#include "core/bf16.h"
#include "core/dtype.h"

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

/* Value i of an f32, bf16 or i32 array, widened to f32. */
static __device__ float widened(const void *p, int t, long i)
{
    return t == DL_BF16 ? dl_bf16_to_f32(((const dl_bf16 *)p)[i])
         : t == DL_I32  ? (float)((const int32_t *)p)[i]
                        : ((const float *)p)[i];
}

static __global__ void cast_values(void *dst, int to, const void *src, int from, long n, int add)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = widened(src, from, i);
    if (add)
        v = __fadd_rn(widened(dst, to, i), v);
    if (to == DL_BF16)
        ((dl_bf16 *)dst)[i] = dl_f32_to_bf16(v);
    else
        ((float *)dst)[i] = v;
}

extern "C" int dl_cuda_cast(void *dst, int to, const void *src, int from, long n, int add)
{
    int floats = (from == DL_F32 || from == DL_BF16 || from == DL_I32) && (to == DL_F32 || to == DL_BF16);
    if (!add && from == to) { /* a copy of any dtype */
        size_t bytes = (size_t)(n > 0 ? n : 0) * dl_dtype_size((enum dl_dtype)from);
        return bytes ? (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice) : 0;
    }
    if (!floats || (add && from == DL_I32))
        return -1;
    if (n > 0)
        cast_values<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(dst, to, src, from, n, add);
    return dl_cuda_launched();
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
