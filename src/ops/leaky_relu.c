/* leaky_relu.c: leaky rectified linear unit, out = x for x > 0, slope * x
 * otherwise (PyTorch's LeakyReLU, negative_slope = slope).  No parameters;
 * element-wise over any shape; the loops come from eltwise.h. */
#include "ops/eltwise.h"

#include <stddef.h>

struct leaky_relu_attr {
    double slope;
};

static const struct dl_attr_desc leaky_relu_attrs[] = {
    {.key = "slope", .type = DL_ATTR_FLOAT, .offset = offsetof(struct leaky_relu_attr, slope),
     .def = 0.01, .min = 0, .max = 1,
     .doc = "gradient for negative inputs: out = slope * x when x <= 0"},
};

/* max(x, 0) + slope * min(x, 0): both terms computed without a branch, so
 * the loop vectorises; one of them is always exactly 0. */
static inline dl_real leaky_relu_value(const void *attr, dl_real x)
{
    const struct leaky_relu_attr *a = attr;
    dl_real slope = (dl_real)a->slope;
    return (x > 0 ? x : 0) + slope * (x > 0 ? 0 : x);
}

/* d/dx = 1 for x > 0, slope otherwise. */
static inline dl_real leaky_relu_grad(const void *attr, dl_real x, dl_real y, dl_real dy)
{
    const struct leaky_relu_attr *a = attr;
    dl_real slope = (dl_real)a->slope;
    return (x > 0 ? dy : 0) + slope * (x > 0 ? 0 : dy);
}

DL_ELTWISE_LOOPS(leaky_relu)

const struct dl_op_kind dl_op_leaky_relu = {
    .name = "leaky_relu",
    .summary = "leaky rectified linear unit, x if x > 0 else slope * x",
    .attr_size = sizeof(struct leaky_relu_attr),
    .attrs = leaky_relu_attrs,
    .n_attrs = (int)(sizeof leaky_relu_attrs / sizeof leaky_relu_attrs[0]),
    DL_ELTWISE_KIND_FIELDS(leaky_relu),
};
