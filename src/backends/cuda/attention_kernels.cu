/* cuda/attention_kernels.cu: attention's row kernels
 * (attention_kernels.h): one block per (query, head) row of T scores, its
 * threads over the keys, the row's maximum and sums reduced in a fixed tree
 * (launch.h) in float.  Dropout draws each weight's factor with
 * core/rng_hash.h's functions at ops/attention.c's index, so the mask is
 * the host's bit for bit.  Built by nvcc when --with-cuda; never run on a
 * GPU so far. */
#include "backends/cuda/attention_kernels.h"

#include <math.h>

#include "backends/cuda/launch.h"
#include "core/rng_hash.h"

/* Dropout's factor of weight (t, s) of global head h, from the sample's
 * hash (ops/attention.c's dl_attention_kept). */
static __device__ float kept(const struct dl_cuda_attention_dropout *drop, uint64_t sample, long h, long T, long t,
                             long s)
{
    if (drop->rate == 0)
        return 1;
    return dl_rng_hash_uniform_of(sample, (uint64_t)((h * T + t) * T + s)) >= drop->rate ? drop->keep : 0;
}

static __global__ void softmax_rows(float *scores, long T, int causal, struct dl_cuda_attention_dropout drop)
{
    __shared__ float scratch[DL_CUDA_THREADS];
    long t = blockIdx.x, h = blockIdx.y, len = causal ? t + 1 : T;
    float *row = scores + (h * T + t) * T;
    float most = -INFINITY, sum = 0;
    for (long s = threadIdx.x; s < len; s += blockDim.x)
        most = fmaxf(most, row[s]);
    most = dl_cuda_block_reduce<true>(most, scratch);
    for (long s = threadIdx.x; s < len; s += blockDim.x)
        sum += expf(row[s] - most);
    sum = dl_cuda_block_reduce<false>(sum, scratch);
    uint64_t sample = dl_rng_hash_of(drop.key, (uint64_t)drop.sample);
    for (long s = threadIdx.x; s < T; s += blockDim.x)
        row[s] = s < len ? expf(row[s] - most) / sum * kept(&drop, sample, drop.head0 + h, T, t, s) : 0;
}

static __global__ void score_grad_rows(float *weights, float *grads, long T, int causal, float scale,
                                       struct dl_cuda_attention_dropout drop)
{
    __shared__ float scratch[DL_CUDA_THREADS];
    long t = blockIdx.x, h = blockIdx.y, len = causal ? t + 1 : T;
    float *p = weights + (h * T + t) * T, *g = grads + (h * T + t) * T;
    uint64_t sample = dl_rng_hash_of(drop.key, (uint64_t)drop.sample);
    float dot = 0;
    for (long s = threadIdx.x; s < len; s += blockDim.x)
        dot += p[s] * kept(&drop, sample, drop.head0 + h, T, t, s) * g[s];
    dot = dl_cuda_block_reduce<false>(dot, scratch);
    for (long s = threadIdx.x; s < T; s += blockDim.x) {
        if (s >= len) {
            g[s] = 0;
            continue;
        }
        float factor = kept(&drop, sample, drop.head0 + h, T, t, s);
        g[s] = scale * p[s] * (factor * g[s] - dot);
        p[s] *= factor;
    }
}

extern "C" int dl_cuda_attention_softmax(float *s, int H, long T, int causal, struct dl_cuda_attention_dropout drop)
{
    if (H > 0 && T > 0)
        softmax_rows<<<dim3((unsigned)T, (unsigned)H), DL_CUDA_THREADS>>>(s, T, causal, drop);
    return dl_cuda_launched();
}

extern "C" int dl_cuda_attention_score_grad(float *p, float *g, int H, long T, int causal, float scale,
                                            struct dl_cuda_attention_dropout drop)
{
    if (H > 0 && T > 0)
        score_grad_rows<<<dim3((unsigned)T, (unsigned)H), DL_CUDA_THREADS>>>(p, g, T, causal, scale, drop);
    return dl_cuda_launched();
}
