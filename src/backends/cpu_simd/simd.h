/* simd.h: the project's own vectorized loops for the few ops and shapes
 * where the libraries have nothing fast (oneDNN 2.6 has no JIT pooling on
 * NCHW, its blocked JIT pooling is slow on small planes, and no library runs
 * a convolution with one input channel well), and the kernels built on
 * them.  Each loop has the results of its op's
 * reference forward or backward (src/ops), saved state included. */
#ifndef DL_BACKENDS_SIMD_H
#define DL_BACKENDS_SIMD_H

#include "backends/attr.h"
#include "backends/kernel.h"
#include "ops/op.h"

/* Max pooling forward (float, NCHW) with the layer's window geometry g
 * (backends/attr.h's dl_maxpool_geom): y and the saved winners, bit for bit
 * those of dl_op_maxpool's forward. */
void dl_simd_maxpool_forward(const struct dl_op_call *c, const struct dl_pool_geom *g);

/* The same on nChw8c (block 8) or nChw16c (block 16) tensors: y and the
 * winners (each channel's reference index) in the output's layout; backward
 * writes din[0] (the padding channels' gradient as zeros). */
void dl_simd_maxpool_blocked_forward(const struct dl_op_call *c, const struct dl_pool_geom *g, int block);
void dl_simd_maxpool_blocked_backward(const struct dl_op_call *c, const struct dl_pool_geom *g, int block);

/* A fused ReLU (relu_fold.c): y = max(y, 0) over n values, and dst = dy
 * where y > 0, else 0 (NaN in y counting as not positive); mask2 writes
 * that gradient to dst and dst2 in one pass; add_relu: dst = max(a + b, 0)
 * (in bf16 the sum in f32, rounded once). */
void dl_simd_relu_inplace(float *y, long n);
void dl_simd_relu_mask(float *dst, const float *dy, const float *y, long n);
void dl_simd_relu_mask2(float *dst, float *dst2, const float *dy, const float *y, long n);
void dl_simd_add_relu(float *dst, const float *a, const float *b, long n);
void dl_simd_relu_inplace_bf16(dl_bf16 *y, long n);
void dl_simd_relu_mask_bf16(dl_bf16 *dst, const dl_bf16 *dy, const dl_bf16 *y, long n);
void dl_simd_relu_mask2_bf16(dl_bf16 *dst, dl_bf16 *dst2, const dl_bf16 *dy, const dl_bf16 *y, long n);
void dl_simd_add_relu_bf16(dl_bf16 *dst, const dl_bf16 *a, const dl_bf16 *b, long n);

/* The batch norm kernel's loops (batchnorm_loops.c) over count planes of
 * len floats, stride apart, whose lane j (of each run of 16) has its own
 * sums and parameters: s1, s2 and m are [16] doubles, q is 3 (normalize: m,
 * k, sh) or 5 (input gradient: k, mdy, m, is, mdx) rows of 16 floats.
 * sum_x: s1 = sum of x - m, s2 = sum of (x - m)^2; sum_dy: s1 = sum of g,
 * s2 = sum of g * (x - m), g = dy masked by out > 0 (a fused ReLU's output;
 * out NULL: g = dy); normalize: y = (x - m) * k + sh (relu: clamped at 0);
 * input_gradient: dx = k * (g - mdy - (x - m) * is * mdx). */
#define DL_SIMD_BN_LANES 16
void dl_simd_bn_sum_x(long len, int count, long stride, const float *x, const double *m, double *s1, double *s2);
void dl_simd_bn_sum_dy(long len, int count, long stride, const float *x, const float *dy, const float *out,
                       const double *m, double *s1, double *s2);
void dl_simd_bn_normalize(long len, int count, long stride, const float *x, const float *q, int relu, float *y);
void dl_simd_bn_input_gradient(long len, int count, long stride, const float *x, const float *dy, const float *out,
                               const float *q, float *dx);

/* Kernels (registry order = preference: these come first for their ops;
 * the direct convolution supports only few-channel, stride-1 layers). */
extern const struct dl_kernel dl_kernel_simd_maxpool, dl_kernel_direct_conv, dl_kernel_simd_batchnorm,
    dl_kernel_simd_softmax_xent, dl_kernel_simd_layernorm, dl_kernel_simd_rmsnorm, dl_kernel_simd_swiglu;
#define DL_SIMD_KERNELS &dl_kernel_simd_maxpool, &dl_kernel_direct_conv, &dl_kernel_simd_batchnorm, \
    &dl_kernel_simd_softmax_xent, &dl_kernel_simd_layernorm, &dl_kernel_simd_rmsnorm, &dl_kernel_simd_swiglu,

#endif
