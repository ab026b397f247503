/* relu_fold.c: the loops a kernel with a fused ReLU needs (kernel.h,
 * "Fused ReLU"): clamping its output at zero, and masking the incoming
 * gradient by that output (into one destination or two: an add's inputs),
 * in f32 and in bf16; and an add of two tensors with the ReLU folded into
 * its one pass.  All as bit operations, so that they vectorize
 * without branches (half the values are masked, a branch would mispredict
 * on every other one) and treat NaN as the ReLU op does: max(NaN, 0) is 0,
 * and no gradient passes it. */
#include "backends/cpu_simd/simd.h"

#include <stdint.h>
#include <string.h>

#include "core/bf16.h"
#include "core/long_loop.h"

/* All ones when v > 0, else 0. */
static inline __attribute__((always_inline)) uint32_t positive_mask(float v)
{
    return 0u - (uint32_t)(v > 0);
}

static inline __attribute__((always_inline)) float keep_if(float v, uint32_t mask)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= mask;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The loops are static clones behind plain functions: clang exports a
 * public target_clones function only as NAME.ifunc, which other files
 * cannot call. */
__attribute__((target_clones("avx2", "default"))) static void relu_inplace(float *y, long n)
{
    DL_EACH(n, y[i] = keep_if(y[i], positive_mask(y[i])));
}

__attribute__((target_clones("avx2", "default"))) static void relu_mask(float *dst, const float *dy, const float *y,
                                                                       long n)
{
    DL_EACH(n, dst[i] = keep_if(dy[i], positive_mask(y[i])));
}

__attribute__((target_clones("avx2", "default"))) static void relu_mask2(float *dst, float *dst2, const float *dy,
                                                                        const float *y, long n)
{
    DL_EACH(n, dst[i] = dst2[i] = keep_if(dy[i], positive_mask(y[i])));
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void add_relu(float *dst, const float *a,
                                                                                 const float *b, long n)
{
    DL_EACH(n, float s = a[i] + b[i]; dst[i] = keep_if(s, positive_mask(s)));
}

/* bf16 bits h are a positive number (not zero, not NaN, not negative):
 * 0x0001 .. 0x7f80 (infinity). */
static inline __attribute__((always_inline)) uint16_t positive_mask_bf16(uint16_t h)
{
    return (uint16_t)(0u - (uint32_t)((uint16_t)(h - 1u) < 0x7f80u));
}

__attribute__((target_clones("avx2", "default"))) static void relu_inplace_bf16(uint16_t *y, long n)
{
    DL_EACH(n, y[i] &= positive_mask_bf16(y[i]));
}

__attribute__((target_clones("avx2", "default"))) static void relu_mask_bf16(uint16_t *dst, const uint16_t *dy,
                                                                            const uint16_t *y, long n)
{
    DL_EACH(n, dst[i] = dy[i] & positive_mask_bf16(y[i]));
}

__attribute__((target_clones("avx2", "default"))) static void relu_mask2_bf16(uint16_t *dst, uint16_t *dst2,
                                                                             const uint16_t *dy, const uint16_t *y,
                                                                             long n)
{
    DL_EACH(n, dst[i] = dst2[i] = dy[i] & positive_mask_bf16(y[i]));
}

/* The sum in f32 rounded once (as oneDNN's bf16 sum), then clamped. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void add_relu_bf16(uint16_t *dst, const uint16_t *a,
                                                                                      const uint16_t *b, long n)
{
    DL_EACH(n, uint16_t h = dl_f32_to_bf16(dl_bf16_to_f32(a[i]) + dl_bf16_to_f32(b[i])); dst[i] = h & positive_mask_bf16(h));
}

void dl_simd_relu_inplace_bf16(dl_bf16 *y, long n)
{
    relu_inplace_bf16(y, n);
}

void dl_simd_relu_mask_bf16(dl_bf16 *dst, const dl_bf16 *dy, const dl_bf16 *y, long n)
{
    relu_mask_bf16(dst, dy, y, n);
}

void dl_simd_relu_mask2_bf16(dl_bf16 *dst, dl_bf16 *dst2, const dl_bf16 *dy, const dl_bf16 *y, long n)
{
    relu_mask2_bf16(dst, dst2, dy, y, n);
}

void dl_simd_add_relu_bf16(dl_bf16 *dst, const dl_bf16 *a, const dl_bf16 *b, long n)
{
    add_relu_bf16(dst, a, b, n);
}

void dl_simd_relu_inplace(float *y, long n)
{
    relu_inplace(y, n);
}

void dl_simd_relu_mask(float *dst, const float *dy, const float *y, long n)
{
    relu_mask(dst, dy, y, n);
}

void dl_simd_relu_mask2(float *dst, float *dst2, const float *dy, const float *y, long n)
{
    relu_mask2(dst, dst2, dy, y, n);
}

void dl_simd_add_relu(float *dst, const float *a, const float *b, long n)
{
    add_relu(dst, a, b, n);
}
