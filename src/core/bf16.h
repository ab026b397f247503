/* bf16.h: the bfloat16 value type and its scalar casts, written once for
 * the host (core/dtype.h's casts) and for CUDA kernels compiled by nvcc (a
 * device's bf16 sums and scaling), so that both round the same bits:
 * f32 -> bf16 to nearest, ties to even, infinities kept, a finite value
 * beyond bf16's largest to an infinity, a NaN kept a NaN (quieted, its sign
 * and top payload bits kept); bf16 -> f32 exactly. */
#ifndef DL_CORE_BF16_H
#define DL_CORE_BF16_H

#include <stdint.h>
#include <string.h>

#include "core/host_device.h"

typedef uint16_t dl_bf16;

static inline DL_HOST_DEVICE dl_bf16 dl_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, whatever its low payload bits */
        return (dl_bf16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even; carries into the exponent (to infinity) */
    return (dl_bf16)(u >> 16);
}

static inline DL_HOST_DEVICE float dl_bf16_to_f32(dl_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
