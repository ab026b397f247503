/* max_rule.h: the comparison every max pooling loop of cpu_simd makes, the
 * reference op's rule (src/ops/maxpool.c) on floats: a value takes over from
 * the window's current top when it is larger or NaN, so the first largest
 * element wins, the last NaN wins, and -0 and +0 are equal. */
#ifndef DL_BACKENDS_SIMD_MAX_RULE_H
#define DL_BACKENDS_SIMD_MAX_RULE_H

#include <stdint.h>
#include <string.h>

/* top, at = v, idx if v is larger than top or NaN (else unchanged), as a
 * blend of bits: no branch, so loops over it vectorize and their scalar
 * tails do not mispredict. */
static inline __attribute__((always_inline)) void dl_simd_take_if_larger(float v, float idx, float *top, float *at)
{
    uint32_t vb, tb, ib, ab;
    memcpy(&vb, &v, 4), memcpy(&tb, top, 4), memcpy(&ib, &idx, 4), memcpy(&ab, at, 4);
    uint32_t take = 0u - (uint32_t)((v > *top) | (v != v));
    vb = (vb & take) | (tb & ~take);
    ib = (ib & take) | (ab & ~take);
    memcpy(top, &vb, 4), memcpy(at, &ib, 4);
}

#endif
