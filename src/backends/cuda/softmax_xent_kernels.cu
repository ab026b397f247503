/* cuda/softmax_xent_kernels.cu: the softmax cross-entropy loss's CUDA
 * kernels (softmax_xent_kernels.h).  Forward: one thread per (sample,
 * position), neighbouring threads neighbouring positions, so a sequence's
 * scores (class rows of P positions) are read coalesced; then one thread
 * per sample adds its positions' losses in order and divides by the
 * mini-batch's labelled positions per sample (counting the call's labels
 * itself when the caller gives no count).  Backward: one thread per sample
 * for its gradient scale, then one per score.  Built by nvcc when
 * --with-cuda; never run on a GPU so far. */
#include "backends/cuda/softmax_xent_kernels.h"

#include <math.h>

#include "backends/cuda/launch.h"

static __global__ void xent_rows(const float *x, const int *labels, long rows, long P, int C, double eps,
                                 int ignore, double *lse, double *row_loss)
{
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    int y = labels[r];
    if (y == ignore) {
        lse[r] = row_loss[r] = 0;
        return;
    }
    const float *xr = x + r / P * C * P + r % P;
    double m = xr[0], sum = 0, xsum = 0;
    for (int k = 1; k < C; k++)
        m = xr[k * P] > m ? xr[k * P] : m;
    for (int k = 0; k < C; k++) {
        sum += exp((double)xr[k * P] - m);
        xsum += xr[k * P];
    }
    lse[r] = m + log(sum);
    /* -sum_k q_k log p_k = lse - (1 - eps) x_y - eps/C sum_k x_k */
    row_loss[r] = y >= 0 && y < C ? lse[r] - (1 - eps) * xr[y * P] - eps / C * xsum : NAN;
}

/* The divisor of a sample's sum (softmax_xent_kernels.h): label_norm, or
 * the call's labelled positions per sample. */
static __device__ double norm_of(const int *labels, int N, long P, int ignore, double label_norm)
{
    if (label_norm > 0)
        return label_norm;
    long labelled = 0;
    for (long i = 0; i < N * P; i++)
        labelled += labels[i] != ignore;
    return N > 0 ? (double)labelled / N : 0;
}

static __global__ void xent_samples(const int *labels, const double *row_loss, int N, long P, int ignore,
                                    double label_norm, float *loss)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    double total = 0, norm = norm_of(labels, N, P, ignore, label_norm);
    for (long t = 0; t < P; t++)
        if (labels[n * P + t] != ignore)
            total += row_loss[n * P + t];
    loss[n] = (float)(norm > 0 ? total / norm : 0);
}

static __global__ void xent_scales(const int *labels, const float *dout, int N, long P, int ignore, double label_norm,
                                   float *scale)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    double norm = norm_of(labels, N, P, ignore, label_norm);
    scale[n] = norm > 0 ? dout[n] / (float)norm : 0;
}

static __global__ void xent_backward(const float *x, const int *labels, const double *lse, const float *scale,
                                     long total, long P, int C, float smooth, float on_label, int ignore, float *din)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    long n = i / ((long)C * P), t = i % P, r = n * P + t;
    int k = (int)(i / P % C), y = labels[r];
    if (y == ignore) {
        din[i] = 0;
        return;
    }
    float g = scale[n], p = (float)exp((double)x[i] - lse[r]), d = g * (p - smooth);
    din[i] = k == y ? d - g * on_label : d;
}

extern "C" int dl_cuda_xent_forward(const float *x, const int *labels, int N, int P, int C, double eps, int ignore,
                                    double label_norm, double *lse, double *rows, float *loss)
{
    long n_rows = (long)N * P;
    if (n_rows > 0) {
        xent_rows<<<dl_cuda_blocks(n_rows), DL_CUDA_THREADS>>>(x, labels, n_rows, P, C, eps, ignore, lse, rows);
        xent_samples<<<dl_cuda_blocks(N), DL_CUDA_THREADS>>>(labels, rows, N, P, ignore, label_norm, loss);
    }
    return dl_cuda_launched();
}

extern "C" int dl_cuda_xent_backward(const float *x, const int *labels, const double *lse, const float *dout, int N,
                                     int P, int C, double eps, int ignore, double label_norm, float *scale, float *din)
{
    long total = (long)N * C * P;
    if (total > 0) {
        xent_scales<<<dl_cuda_blocks(N), DL_CUDA_THREADS>>>(labels, dout, N, P, ignore, label_norm, scale);
        xent_backward<<<dl_cuda_blocks(total), DL_CUDA_THREADS>>>(x, labels, lse, scale, total, P, C,
                                                                  (float)(eps / C), (float)(1 - eps), ignore, din);
    }
    return dl_cuda_launched();
}
