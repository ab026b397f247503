/* reference.h: the kernel that runs every op kind's plain-C reference
 * forward and backward (src/ops/), in NCHW. */
#ifndef DL_BACKENDS_REFERENCE_H
#define DL_BACKENDS_REFERENCE_H

#include "backends/kernel.h"

extern const struct dl_kernel dl_kernel_reference;

#endif
