/* cuda/pointwise_kernels.cu: leaky ReLU and dropout on a GPU
 * (pointwise_kernels.h), one thread per element.  Dropout draws its mask
 * with core/rng_hash.h's functions, the ones the host's dropout uses, so
 * the two masks are the same bits.  Built by nvcc when --with-cuda; never
 * run on a GPU so far. */
#include "backends/cuda/pointwise_kernels.h"

#include <cuda_runtime.h>

#include "backends/cuda/launch.h"

#include "core/rng_hash.h"

static __global__ void leaky_forward(const float *x, long n, float slope, float *y)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = (v > 0 ? v : 0) + __fmul_rn(slope, v > 0 ? 0 : v);
    }
}

static __global__ void leaky_backward(const float *x, const float *dy, long n, float slope, float *dx)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i], d = dy[i];
        dx[i] = (v > 0 ? d : 0) + __fmul_rn(slope, v > 0 ? 0 : d);
    }
}

static __global__ void dropout_forward(const float *x, long n, long per, uint64_t key, long sample0, long first,
                                       double rate, float keep, float *m, float *y)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    long s = i / per, j = i % per;
    uint64_t sample = dl_rng_hash_of(key, (uint64_t)(sample0 + s));
    float mask = dl_rng_hash_uniform_of(sample, (uint64_t)(first + j)) >= rate ? keep : 0;
    m[i] = mask;
    y[i] = __fmul_rn(x[i], mask);
}

static __global__ void multiply(const float *a, const float *b, long n, float *out)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __fmul_rn(a[i], b[i]);
}

extern "C" int dl_cuda_leaky_relu_forward(const float *x, long n, float slope, float *y)
{
    if (n > 0)
        leaky_forward<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(x, n, slope, y);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_leaky_relu_backward(const float *x, const float *dy, long n, float slope, float *dx)
{
    if (n > 0)
        leaky_backward<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(x, dy, n, slope, dx);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_dropout_forward(const float *x, int batch, long per, uint64_t key, long sample0, long first,
                                       double rate, float keep, float *m, float *y)
{
    long n = (long)batch * per;
    if (n > 0)
        dropout_forward<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(x, n, per, key, sample0, first, rate, keep, m, y);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_multiply(const float *a, const float *b, long n, float *out)
{
    if (n > 0)
        multiply<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(a, b, n, out);
    return dl_cuda_launched();
}
