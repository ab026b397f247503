/* cuda/attention_kernels.h: the row-wise CUDA kernels of multi-head
 * attention (attention_kernels.cu, compiled by nvcc) between attention.c's
 * cuBLAS products, behind plain C functions so that attention.c needs no
 * CUDA language.  s, p and g hold H heads of T x T scores of one sample,
 * query t's row at (h T + t) T, in device memory.  Dropout's factor of
 * weight (t, s) of local head h is ops/attention.c's dl_attention_kept for
 * the sample `sample` of the mini-batch and head head0 + h: keep when the
 * hash of (key, sample) and (head T + t) T + s draws at least rate, else
 * 0; rate 0 applies none.  Each returns 0, or the CUDA error (a
 * cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_ATTENTION_KERNELS_H
#define DL_BACKENDS_CUDA_ATTENTION_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Dropout of one call's sample (see above). */
struct dl_cuda_attention_dropout {
    uint64_t key;
    long sample, head0;
    double rate;  /* 0: no dropout */
    float keep;   /* 1 / (1 - rate) */
};

/* In place, row by row: s = softmax(s) over keys [0, len) (len = t + 1
 * when causal, else T) in float, 0 past len, times dropout's factors. */
int dl_cuda_attention_softmax(float *s, int H, long T, int causal, struct dl_cuda_attention_dropout drop);

/* From the weights p (softmax, without dropout) and g = dP', the gradient
 * of the weights after dropout: g = scale p (D g - sum_s p D g) (the
 * scores' gradient, D the dropout factors), and p = p D when dropout
 * applies (the weights the forward multiplied v by). */
int dl_cuda_attention_score_grad(float *p, float *g, int H, long T, int causal, float scale,
                                 struct dl_cuda_attention_dropout drop);

#ifdef __cplusplus
}
#endif

#endif
