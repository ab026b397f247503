/* cuda/embedding_kernels.cu: the lookup tables' CUDA kernels
 * (embedding_kernels.h).  Forward passes write one output value per thread,
 * neighbouring threads neighbouring positions.  The token embedding's
 * weight gradient is deterministic without atomics: a thread per feature
 * walks every (sample, position) in order and adds into its own column of
 * the rows, as ops/embedding.c does; the position embedding's sums a row's
 * value over the samples per thread.  Built by nvcc when --with-cuda; never
 * run on a GPU so far. */
#include "backends/cuda/embedding_kernels.h"

#include "backends/cuda/launch.h"

static __global__ void embedding_forward(const int32_t *ids, long total, long T, long C, long row0, long vocab,
                                         const float *w, float *y)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    long t = i % T, k = i / T % C, n = i / (C * T), r = (long)ids[n * T + t] - row0;
    y[i] = r >= 0 && r < vocab ? w[r * C + k] : 0;
}

static __global__ void embedding_backward(const int32_t *ids, const float *dy, long N, long T, long C, long row0,
                                          long vocab, float *dw)
{
    long k = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= C)
        return;
    for (long n = 0; n < N; n++)
        for (long t = 0; t < T; t++) {
            long r = (long)ids[n * T + t] - row0;
            if (r >= 0 && r < vocab)
                dw[r * C + k] += dy[(n * C + k) * T + t];
        }
}

static __global__ void position_forward(const float *x, long total, long T, long C, long p0, const float *w, float *y)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total)
        y[i] = x[i] + w[(p0 + i % T) * C + i / T % C];
}

static __global__ void position_backward(const float *dy, long N, long T, long C, long p0, float *dw)
{
    long j = (long)blockIdx.x * blockDim.x + threadIdx.x; /* feature j / T, position j % T */
    if (j >= C * T)
        return;
    double s = 0;
    for (long n = 0; n < N; n++)
        s += (double)dy[n * C * T + j];
    dw[(p0 + j % T) * C + j / T] += (float)s;
}

extern "C" int dl_cuda_embedding_forward(const int32_t *ids, int N, long T, long C, long row0, long vocab,
                                         const float *w, float *y)
{
    long total = (long)N * C * T;
    if (total > 0)
        embedding_forward<<<dl_cuda_blocks(total), DL_CUDA_THREADS>>>(ids, total, T, C, row0, vocab, w, y);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_embedding_backward(const int32_t *ids, const float *dy, int N, long T, long C, long row0,
                                          long vocab, float *dw)
{
    if (C > 0)
        embedding_backward<<<dl_cuda_blocks(C), DL_CUDA_THREADS>>>(ids, dy, N, T, C, row0, vocab, dw);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_position_embedding_forward(const float *x, int N, long T, long C, long p0, const float *w,
                                                  float *y)
{
    long total = (long)N * C * T;
    if (total > 0)
        position_forward<<<dl_cuda_blocks(total), DL_CUDA_THREADS>>>(x, total, T, C, p0, w, y);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_position_embedding_backward(const float *dy, int N, long T, long C, long p0, float *dw)
{
    if (C * T > 0)
        position_backward<<<dl_cuda_blocks(C * T), DL_CUDA_THREADS>>>(dy, N, T, C, p0, dw);
    return dl_cuda_launched();
}
