/* relu.c: rectified linear unit, out = max(x, 0).  No attributes, no
 * parameters; backward passes the gradient where the input was positive.
 * Element-wise over any shape; the loops come from eltwise.h. */
#include "ops/eltwise.h"

static inline dl_real relu_value(const void *attr, dl_real x)
{
    return x > 0 ? x : 0;
}

/* d/dx max(x, 0) = 1 for x > 0, else 0 (the subgradient 0 is taken at x = 0). */
static inline dl_real relu_grad(const void *attr, dl_real x, dl_real y, dl_real dy)
{
    return x > 0 ? dy : 0;
}

DL_ELTWISE_LOOPS(relu)

const struct dl_op_kind dl_op_relu = {
    .name = "relu",
    .summary = "rectified linear unit, max(x, 0)",
    .is_relu = 1,
    DL_ELTWISE_KIND_FIELDS(relu),
};
