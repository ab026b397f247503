/* reference.h: the kernels that run every op kind's plain-C reference
 * forward and backward (src/ops/), in NCHW: in f32 (or f64 in the
 * gradient-check build), and the autocast ops in bf16. */
#ifndef DL_BACKENDS_REFERENCE_H
#define DL_BACKENDS_REFERENCE_H

#include "backends/kernel.h"

extern const struct dl_kernel dl_kernel_reference;
/* reference_bf16.c: the autocast ops (fc, conv) at bf16's rounding points,
 * through the same code; bf16 tensors, f32 master weights. */
extern const struct dl_kernel dl_kernel_reference_bf16;

#endif
