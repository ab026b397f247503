/* cuda/gelu_kernels.cu: the GELU activation on a GPU (gelu_kernels.h), one
 * thread per element, with ops/gelu.c's formulas in double: tanh,
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); exact, 0.5 x (1 +
 * erf(x / sqrt 2)); and their derivatives.  Built by nvcc when --with-cuda;
 * never run on a GPU so far. */
#include "backends/cuda/gelu_kernels.h"

#include "backends/cuda/launch.h"

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

static __device__ double gelu_value(double v, int exact)
{
    if (exact)
        return 0.5 * v * (1 + erf(v * INV_SQRT2));
    return 0.5 * v * (1 + tanh(GELU_K * (v + GELU_A * v * v * v)));
}

static __device__ double gelu_slope(double v, int exact)
{
    if (exact)
        return 0.5 * (1 + erf(v * INV_SQRT2)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
    double th = tanh(GELU_K * (v + GELU_A * v * v * v));
    return 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * GELU_K * (1 + 3 * GELU_A * v * v);
}

static __global__ void gelu_forward(const float *x, long n, int exact, float *y)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = (float)gelu_value((double)x[i], exact);
}

static __global__ void gelu_backward(const float *x, const float *dy, long n, int exact, float *dx)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dx[i] = (float)((double)dy[i] * gelu_slope((double)x[i], exact));
}

extern "C" int dl_cuda_gelu_forward(const float *x, long n, int exact, float *y)
{
    if (n > 0)
        gelu_forward<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(x, n, exact, y);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_gelu_backward(const float *x, const float *dy, long n, int exact, float *dx)
{
    if (n > 0)
        gelu_backward<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>(x, dy, n, exact, dx);
    return dl_cuda_launched();
}
