/* cuda/softmax_xent_kernels.cu: the softmax cross-entropy loss's CUDA
 * kernels (softmax_xent_kernels.h): forward one thread per sample (the
 * maximum subtracted before exp, then the log-sum-exp, as the reference
 * op), backward one thread per score.  Built by nvcc when --with-cuda;
 * never run on a GPU so far. */
#include "backends/cuda/softmax_xent_kernels.h"

#include <math.h>

#include <cuda_runtime.h>

static __global__ void xent_forward(const float *x, const int *labels, int N, int C, double eps, float *loss,
                                    float *p)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    const float *xn = x + (long)n * C;
    float *pn = p + (long)n * C;
    double m = xn[0], sum = 0, xsum = 0;
    for (int k = 1; k < C; k++)
        m = xn[k] > m ? xn[k] : m;
    for (int k = 0; k < C; k++) {
        sum += exp((double)xn[k] - m);
        xsum += xn[k];
    }
    double lse = m + log(sum);
    for (int k = 0; k < C; k++)
        pn[k] = (float)exp((double)xn[k] - lse);
    int y = labels[n];
    /* -sum_k q_k log p_k = lse - (1 - eps) x_y - eps/C sum_k x_k */
    loss[n] = y >= 0 && y < C ? (float)(lse - (1 - eps) * xn[y] - eps / C * xsum) : NAN;
}

static __global__ void xent_backward(const float *p, const int *labels, const float *dout, int N, int C, double eps,
                                     float *din)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)N * C)
        return;
    int n = (int)(i / C), k = (int)(i % C);
    double q = eps / C + (k == labels[n] ? 1 - eps : 0);
    din[i] = (float)(dout[n] * ((double)p[i] - q));
}

extern "C" int dl_cuda_xent_forward(const float *x, const int *labels, int N, int C, double eps, float *loss,
                                    float *p)
{
    int threads = 128;
    if (N > 0)
        xent_forward<<<(N + threads - 1) / threads, threads>>>(x, labels, N, C, eps, loss, p);
    return (int)cudaGetLastError();
}

extern "C" int dl_cuda_xent_backward(const float *p, const int *labels, const float *dout, int N, int C, double eps,
                                     float *din)
{
    int threads = 256;
    long total = (long)N * C;
    if (total > 0)
        xent_backward<<<(unsigned)((total + threads - 1) / threads), threads>>>(p, labels, dout, N, C, eps, din);
    return (int)cudaGetLastError();
}
