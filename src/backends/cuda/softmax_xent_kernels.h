/* cuda/softmax_xent_kernels.h: the CUDA kernels of the softmax
 * cross-entropy loss (softmax_xent_kernels.cu, compiled by nvcc), behind
 * plain C functions so that the C side (softmax_xent.c) needs no CUDA
 * language.  Scores x are N samples of [C][P] (core/shape.h: class k of
 * position t at k P + t; a vector of scores is P = 1), labels N samples of
 * P class indices, a label equal to `ignore` (ignore_index) no target.
 * Every pointer is device memory; each returns 0, or the CUDA error (a
 * cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_SOFTMAX_XENT_KERNELS_H
#define DL_BACKENDS_CUDA_SOFTMAX_XENT_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The divisor of a sample's summed loss, norm: label_norm (op.h: the
 * mini-batch's labelled positions per sample) when above 0, else this
 * call's labels that are not ignored over its N samples
 * (ops/softmax_xent.h's dl_softmax_xent_norm, counted on the device).
 *
 * Per position: lse = log sum_k exp(x_k) (the maximum subtracted first,
 * sums in double, as the reference op) into lse[N P], and the position's
 * loss -sum_k q_k log p_k with q = (1 - eps) onehot(label) + eps / C (NaN
 * for a label outside [0, C), 0 where ignored) into rows[N P]; then per
 * sample loss[n] = the sum of its positions' losses (in position order)
 * over norm (0 when norm is 0). */
int dl_cuda_xent_forward(const float *x, const int *labels, int N, int P, int C, double eps, int ignore,
                         double label_norm, double *lse, double *rows, float *loss);

/* din = g (p - q) with p = exp(x - lse) recomputed and g = dout[n] / norm
 * (0 when norm is 0), in float as the reference; 0 at ignored positions.
 * scale: N floats of scratch (g). */
int dl_cuda_xent_backward(const float *x, const int *labels, const double *lse, const float *dout, int N, int P,
                          int C, double eps, int ignore, double label_norm, float *scale, float *din);

#ifdef __cplusplus
}
#endif

#endif
