/* cuda/layernorm_kernels.h: the CUDA kernels of layer normalisation over
 * the features of each position (layernorm_kernels.cu, compiled by nvcc),
 * behind plain C functions so that layernorm.c needs no CUDA language.
 * Tensors are N samples of [C][T] (core/shape.h: feature k of position t
 * at k T + t; a vector is T = 1), every pointer device memory; mean and
 * rstd hold one value per (sample, position), N T of each.  Each returns
 * 0, or the CUDA error (a cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_LAYERNORM_KERNELS_H
#define DL_BACKENDS_CUDA_LAYERNORM_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) rstd w + b per position (w, b NULL: no affine), with
 * rstd = 1 / sqrt(var + eps); the sums in double, as ops/layernorm.c. */
int dl_cuda_layernorm_forward(const float *x, int N, long T, long C, double eps, const float *w, const float *b,
                              float *y, float *mean, float *rstd);
/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w (w NULL: dy). */
int dl_cuda_layernorm_backward_data(const float *x, const float *dy, int N, long T, long C, const float *w,
                                    const float *mean, const float *rstd, float *dx);
/* dw[k] += sum dy xhat, db[k] += sum dy over samples and positions (either
 * may be NULL: skipped). */
int dl_cuda_layernorm_backward_weights(const float *x, const float *dy, int N, long T, long C, const float *mean,
                                       const float *rstd, float *dw, float *db);

#ifdef __cplusplus
}
#endif

#endif
