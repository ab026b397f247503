/* tanh.c: hyperbolic tangent, out = tanh(x).  No attributes, no parameters;
 * backward uses the output: d/dx = 1 - out^2.
 * Element-wise over any shape; the loops come from eltwise.h. */
#include "ops/eltwise.h"

#include <math.h>

static inline dl_real tanh_value(const void *attr, dl_real x)
{
    return (dl_real)tanh((double)x);
}

static inline dl_real tanh_grad(const void *attr, dl_real x, dl_real y, dl_real dy)
{
    return dy * (1 - y * y);
}

DL_ELTWISE_LOOPS(tanh)

const struct dl_op_kind dl_op_tanh = {
    .name = "tanh",
    .summary = "hyperbolic tangent",
    DL_ELTWISE_KIND_FIELDS(tanh),
};
