/* cuda/pointwise_kernels.h: element-wise CUDA kernels of the layers cuDNN
 * has no call for (pointwise_kernels.cu, compiled by nvcc): leaky ReLU and
 * dropout, behind plain C functions so that pointwise.c needs no CUDA
 * language.  Every pointer is device memory, n counts elements; each
 * returns 0, or the CUDA error (a cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_POINTWISE_KERNELS_H
#define DL_BACKENDS_CUDA_POINTWISE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = x > 0 ? x : slope * x, as ops/leaky_relu.c (both terms added). */
int dl_cuda_leaky_relu_forward(const float *x, long n, float slope, float *y);
/* dx = x > 0 ? dy : slope * dy. */
int dl_cuda_leaky_relu_backward(const float *x, const float *dy, long n, float slope, float *dx);

/* Dropout's mask and output for batch samples of per values each, as
 * ops/dropout.c: m[s][i] = keep when dl_rng_hash_uniform(dl_rng_hash(key,
 * sample0 + s), first + i) >= rate, else 0; y = x * m. */
int dl_cuda_dropout_forward(const float *x, int batch, long per, uint64_t key, long sample0, long first, double rate,
                            float keep, float *m, float *y);
/* out = a * b element by element (dropout's backward: dy * m). */
int dl_cuda_multiply(const float *a, const float *b, long n, float *out);

#ifdef __cplusplus
}
#endif

#endif
