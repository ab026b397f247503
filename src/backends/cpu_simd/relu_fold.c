/* relu_fold.c: the two loops a kernel with a fused ReLU needs (kernel.h,
 * "Fused ReLU"): clamping its output at zero, and masking the incoming
 * gradient by that output.  Both as bit operations, so that they vectorize
 * without branches (half the values are masked, a branch would mispredict
 * on every other one) and treat NaN as the ReLU op does: max(NaN, 0) is 0,
 * and no gradient passes it. */
#include "backends/cpu_simd/simd.h"

#include <stdint.h>
#include <string.h>

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
    #pragma omp simd
    for (long i = 0; i < n; i++)
        y[i] = keep_if(y[i], positive_mask(y[i]));
}

__attribute__((target_clones("avx2", "default"))) static void relu_mask(float *dst, const float *dy, const float *y,
                                                                       long n)
{
    #pragma omp simd
    for (long i = 0; i < n; i++)
        dst[i] = keep_if(dy[i], positive_mask(y[i]));
}

void dl_simd_relu_inplace(float *y, long n)
{
    relu_inplace(y, n);
}

void dl_simd_relu_mask(float *dst, const float *dy, const float *y, long n)
{
    relu_mask(dst, dy, y, n);
}
