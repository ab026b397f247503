/* cuda/bias_kernels.h: a bf16 convolution's per-channel bias
 * (bias_kernels.cu, compiled by nvcc) behind plain C functions, so that
 * conv.c needs no CUDA language: its f32 bias broadcast into a bf16 NCHW
 * output, and its f32 gradient summed from a bf16 output gradient.  cuDNN's
 * bias calls take the bias in the output's dtype; these keep the master
 * bias and its gradient f32.  Every pointer is device memory; N samples of
 * K channels of HW values.  Each returns 0, or the CUDA error (a
 * cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_BIAS_KERNELS_H
#define DL_BACKENDS_CUDA_BIAS_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* y[n][k][i] = b[k] rounded to bf16 (y: bf16 values). */
int dl_cuda_bias_fill_bf16(void *y, const float *b, long N, int K, long HW);
/* db[k] += the sum of dy[n][k][i] over n and i (dy: bf16 values), in f32:
 * one block a channel, its threads' sums added in a fixed tree (launch.h). */
int dl_cuda_bias_grad_bf16(float *db, const void *dy, long N, int K, long HW);

#ifdef __cplusplus
}
#endif

#endif
