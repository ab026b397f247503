/* cuda/bias_kernels.cu: a bf16 convolution's f32 bias and its gradient
 * (bias_kernels.h): the fill one thread per output value, the gradient one
 * block per channel whose threads stride over the channel's values and
 * whose sums are reduced in a fixed order, so the same inputs give the same
 * bits on every run.  Built by nvcc when --with-cuda; never run on a GPU so
 * far. */
#include "backends/cuda/bias_kernels.h"

#include "backends/cuda/launch.h"
#include "core/bf16.h"

static __global__ void bias_fill(dl_bf16 *y, const float *b, long n, int K, long HW)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = dl_f32_to_bf16(b[i / HW % K]);
}

static __global__ void bias_grad(float *db, const dl_bf16 *dy, long N, int K, long HW)
{
    __shared__ float scratch[DL_CUDA_THREADS];
    int k = blockIdx.x;
    float sum = 0;
    for (long j = threadIdx.x; j < N * HW; j += blockDim.x) {
        long n = j / HW, i = j % HW;
        sum += dl_bf16_to_f32(dy[(n * K + k) * HW + i]);
    }
    sum = dl_cuda_block_reduce<false>(sum, scratch);
    if (threadIdx.x == 0)
        db[k] += sum;
}

extern "C" int dl_cuda_bias_fill_bf16(void *y, const float *b, long N, int K, long HW)
{
    long n = N * K * HW;
    if (n > 0)
        bias_fill<<<dl_cuda_blocks(n), DL_CUDA_THREADS>>>((dl_bf16 *)y, b, n, K, HW);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_bias_grad_bf16(float *db, const void *dy, long N, int K, long HW)
{
    if (K > 0)
        bias_grad<<<K, DL_CUDA_THREADS>>>(db, (const dl_bf16 *)dy, N, K, HW);
    return dl_cuda_launched();
}
