/* simd.h: the project's own vectorized loops for the few ops where the
 * libraries have nothing fast for a layout we use (oneDNN 2.6 has no JIT
 * pooling on NCHW).  Each function has the signature and the results of its
 * op's reference forward or backward, so a kernel can call either. */
#ifndef DL_BACKENDS_SIMD_H
#define DL_BACKENDS_SIMD_H

#include "ops/op.h"

/* Max pooling forward (float, NCHW): y and the saved winners, bit for bit
 * those of dl_op_maxpool's forward. */
void dl_simd_maxpool_forward(const struct dl_op_call *c);

#endif
