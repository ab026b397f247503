/* sigmoid.c: logistic function, out = 1 / (1 + exp(-x)).  No attributes, no
 * parameters; backward uses the output: d/dx = out * (1 - out).
 * Element-wise over any shape; the loops come from eltwise.h. */
#include "ops/eltwise.h"

#include <math.h>

/* exp is only ever taken of -|x|, so it cannot overflow for large |x|:
 * for x < 0, 1 / (1 + e^-x) = e^x / (1 + e^x). */
static inline dl_real sigmoid_value(const void *attr, dl_real x)
{
    double e = exp(-fabs((double)x));
    return (dl_real)(x >= 0 ? 1 / (1 + e) : e / (1 + e));
}

static inline dl_real sigmoid_grad(const void *attr, dl_real x, dl_real y, dl_real dy)
{
    return dy * y * (1 - y);
}

DL_ELTWISE_LOOPS(sigmoid)

const struct dl_op_kind dl_op_sigmoid = {
    .name = "sigmoid",
    .summary = "logistic sigmoid, 1 / (1 + exp(-x))",
    DL_ELTWISE_KIND_FIELDS(sigmoid),
};
