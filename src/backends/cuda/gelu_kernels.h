/* cuda/gelu_kernels.h: the GELU activation's CUDA kernels
 * (gelu_kernels.cu, compiled by nvcc) behind plain C functions, so that
 * pointwise.c needs no CUDA language.  Every pointer is device memory, n
 * counts elements; exact is 1 for approximate: none (x Phi(x) with erf), 0
 * for the tanh approximation.  Each returns 0, or the CUDA error (a
 * cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_GELU_KERNELS_H
#define DL_BACKENDS_CUDA_GELU_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* y = gelu(x), in double as ops/gelu.c. */
int dl_cuda_gelu_forward(const float *x, long n, int exact, float *y);
/* dx = dy gelu'(x). */
int dl_cuda_gelu_backward(const float *x, const float *dy, long n, int exact, float *dx);

#ifdef __cplusplus
}
#endif

#endif
