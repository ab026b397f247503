/* cuda/layernorm_kernels.cu: layer normalisation's CUDA kernels
 * (layernorm_kernels.h).  Forward and backward data: one thread per
 * (sample, position), looping over its C features, which lie T apart, so
 * the threads of a warp (neighbouring positions) read neighbouring
 * addresses; sums in double as ops/layernorm.c.  Backward weights: one
 * block per feature, its threads over the (sample, position) rows, the
 * sums in double reduced in a fixed tree (launch.h), so every run gives the
 * same bits.  Built by nvcc when --with-cuda; never run on a GPU so far. */
#include "backends/cuda/layernorm_kernels.h"

#include "backends/cuda/launch.h"

static __global__ void ln_forward(const float *x, long rows, long T, long C, double eps, const float *w,
                                  const float *b, float *y, float *mean, float *rstd)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    long at = r / T * C * T + r % T; /* feature 0 of this position */
    const float *xr = x + at;
    float *yr = y + at;
    double s = 0, ss = 0;
    for (long k = 0; k < C; k++)
        s += (double)xr[k * T];
    double mu = s / (double)C;
    for (long k = 0; k < C; k++)
        ss += ((double)xr[k * T] - mu) * ((double)xr[k * T] - mu);
    double inv = 1 / sqrt(ss / (double)C + eps);
    mean[r] = (float)mu;
    rstd[r] = (float)inv;
    for (long k = 0; k < C; k++) {
        double v = ((double)xr[k * T] - mu) * inv;
        yr[k * T] = (float)(w ? v * (double)w[k] + (double)b[k] : v);
    }
}

static __global__ void ln_backward_data(const float *x, const float *dy, long rows, long T, long C, const float *w,
                                        const float *mean, const float *rstd, float *dx)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    long at = r / T * C * T + r % T;
    const float *xr = x + at, *dyr = dy + at;
    float *dxr = dx + at;
    double mu = (double)mean[r], inv = (double)rstd[r], sg = 0, sgx = 0;
    for (long k = 0; k < C; k++) {
        double g = (double)dyr[k * T] * (w ? (double)w[k] : 1), xhat = ((double)xr[k * T] - mu) * inv;
        sg += g;
        sgx += g * xhat;
    }
    sg /= (double)C;
    sgx /= (double)C;
    for (long k = 0; k < C; k++) {
        double g = (double)dyr[k * T] * (w ? (double)w[k] : 1), xhat = ((double)xr[k * T] - mu) * inv;
        dxr[k * T] = (float)(inv * (g - sg - xhat * sgx));
    }
}

/* Block k: feature k's sums over the rows. */
static __global__ void ln_backward_weights(const float *x, const float *dy, long rows, long T, long C,
                                           const float *mean, const float *rstd, float *dw, float *db)
{
    __shared__ double scratch[DL_CUDA_THREADS];
    long k = blockIdx.x;
    double sw = 0, sb = 0;
    for (long r = threadIdx.x; r < rows; r += blockDim.x) {
        long at = (r / T * C + k) * T + r % T;
        double g = (double)dy[at];
        sw += g * ((double)x[at] - (double)mean[r]) * (double)rstd[r];
        sb += g;
    }
    sw = dl_cuda_block_reduce<false>(sw, scratch);
    sb = dl_cuda_block_reduce<false>(sb, scratch);
    if (threadIdx.x == 0) {
        if (dw)
            dw[k] += (float)sw;
        if (db)
            db[k] += (float)sb;
    }
}

extern "C" int dl_cuda_layernorm_forward(const float *x, int N, long T, long C, double eps, const float *w,
                                         const float *b, float *y, float *mean, float *rstd)
{
    long rows = (long)N * T;
    if (rows > 0)
        ln_forward<<<dl_cuda_blocks(rows), DL_CUDA_THREADS>>>(x, rows, T, C, eps, w, b, y, mean, rstd);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_layernorm_backward_data(const float *x, const float *dy, int N, long T, long C,
                                               const float *w, const float *mean, const float *rstd, float *dx)
{
    long rows = (long)N * T;
    if (rows > 0)
        ln_backward_data<<<dl_cuda_blocks(rows), DL_CUDA_THREADS>>>(x, dy, rows, T, C, w, mean, rstd, dx);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_layernorm_backward_weights(const float *x, const float *dy, int N, long T, long C,
                                                  const float *mean, const float *rstd, float *dw, float *db)
{
    long rows = (long)N * T;
    if (rows > 0 && C > 0 && (dw || db))
        ln_backward_weights<<<(unsigned)C, DL_CUDA_THREADS>>>(x, dy, rows, T, C, mean, rstd, dw, db);
    return dl_cuda_launched();
}
