/* optim/cuda/optim_kernels.cu: the optimizers' update loops on a GPU
 * (optim_kernels.h): one thread per weight, each applying the rule of
 * optim/update_rules.h that the host's loops apply.  Built by nvcc when
 * --with-cuda; never run on a GPU so far. */
#include "optim/cuda/optim_kernels.h"

#include <cuda_runtime.h>

#include "optim/update_rules.h"

#define THREADS 256

static unsigned blocks(long n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

static __global__ void sgd(float *w, const float *g, float *buf, long n, float wd, float mu, int nesterov, float rate)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (mu == 0)
        dl_rule_sgd(&w[i], g[i], wd, rate);
    else if (nesterov)
        dl_rule_sgd_nesterov(&w[i], g[i], &buf[i], wd, mu, rate);
    else
        dl_rule_sgd_momentum(&w[i], g[i], &buf[i], wd, mu, rate);
}

static __global__ void adagrad(float *w, const float *g, float *sum, long n, double wd, double eps, double lr)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dl_rule_adagrad(&w[i], g[i], &sum[i], wd, eps, lr);
}

static __global__ void rmsprop(float *w, const float *g, float *v, float *buf, long n, double wd, double alpha,
                               double eps, double mu, double lr)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (mu > 0)
        dl_rule_rmsprop_momentum(&w[i], g[i], &v[i], &buf[i], wd, alpha, eps, mu, lr);
    else
        dl_rule_rmsprop(&w[i], g[i], &v[i], wd, alpha, eps, lr);
}

static __global__ void adam(float *w, const float *g, float *m, float *v, long n, int decoupled, double b1, double b2,
                            double c1, double c2, double wd, double shrink, double eps, double lr)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dl_rule_adam(&w[i], g[i], &m[i], &v[i], decoupled, b1, b2, c1, c2, wd, shrink, eps, lr);
}

extern "C" int dl_cuda_sgd(float *w, const float *g, float *buf, long n, float wd, float mu, int nesterov, float rate)
{
    if (n > 0)
        sgd<<<blocks(n), THREADS>>>(w, g, buf, n, wd, mu, nesterov, rate);
    return (int)cudaGetLastError();
}

extern "C" int dl_cuda_adagrad(float *w, const float *g, float *sum, long n, double wd, double eps, double lr)
{
    if (n > 0)
        adagrad<<<blocks(n), THREADS>>>(w, g, sum, n, wd, eps, lr);
    return (int)cudaGetLastError();
}

extern "C" int dl_cuda_rmsprop(float *w, const float *g, float *v, float *buf, long n, double wd, double alpha,
                               double eps, double mu, double lr)
{
    if (n > 0)
        rmsprop<<<blocks(n), THREADS>>>(w, g, v, buf, n, wd, alpha, eps, mu, lr);
    return (int)cudaGetLastError();
}

extern "C" int dl_cuda_adam(float *w, const float *g, float *m, float *v, long n, int decoupled, double b1, double b2,
                            double c1, double c2, double wd, double shrink, double eps, double lr)
{
    if (n > 0)
        adam<<<blocks(n), THREADS>>>(w, g, m, v, n, decoupled, b1, b2, c1, c2, wd, shrink, eps, lr);
    return (int)cudaGetLastError();
}
