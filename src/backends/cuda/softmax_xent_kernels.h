/* cuda/softmax_xent_kernels.h: the CUDA kernels of the softmax
 * cross-entropy loss (softmax_xent_kernels.cu, compiled by nvcc), behind
 * plain C functions so that the C side (softmax_xent.c) needs no CUDA
 * language.  Every pointer is device memory; each returns 0, or the CUDA
 * error (a cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_SOFTMAX_XENT_KERNELS_H
#define DL_BACKENDS_CUDA_SOFTMAX_XENT_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Per sample n of x [N][C]: p[n] = softmax(x[n]) and loss[n] =
 * -sum_k q_k log p_k with q = (1 - eps) onehot(labels[n]) + eps / C (NaN for
 * a label outside [0, C)); sums in double, as the reference op. */
int dl_cuda_xent_forward(const float *x, const int *labels, int N, int C, double eps, float *loss, float *p);

/* din[n][k] = dout[n] * (p[n][k] - q_k). */
int dl_cuda_xent_backward(const float *p, const int *labels, const float *dout, int N, int C, double eps, float *din);

#ifdef __cplusplus
}
#endif

#endif
