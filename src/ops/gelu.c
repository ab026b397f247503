/* gelu.c: the Gaussian error linear unit, out = x * Phi(x) (PyTorch GELU).
 * approximate: tanh (the default, GPT-2's and PyTorch's
 * approximate='tanh'): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715
 * x^3); none: the exact 0.5 x (1 + erf(x / sqrt(2))).  Backward from the
 * input: tanh, 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx; exact,
 * Phi(x) + x phi(x).  Element-wise over any shape (eltwise.h's loops). */
#include "ops/eltwise.h"

#include <math.h>
#include <stddef.h>

struct gelu_attr {
    int approximate; /* GELU_TANH or GELU_NONE */
};

enum { GELU_TANH, GELU_NONE };

static const char *const gelu_choices[] = {"tanh", "none", NULL};

static const struct dl_attr_desc gelu_attrs[] = {
    {.key = "approximate", .type = DL_ATTR_ENUM, .offset = offsetof(struct gelu_attr, approximate),
     .def = GELU_TANH, .choices = gelu_choices,
     .doc = "tanh: GPT-2's tanh approximation (PyTorch approximate='tanh'); none: the exact x Phi(x) with erf"},
};

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715

static inline dl_real gelu_value(const void *attr, dl_real x)
{
    const struct gelu_attr *a = attr;
    double v = (double)x;
    if (a->approximate == GELU_NONE)
        return (dl_real)(0.5 * v * (1 + erf(v * 0.7071067811865476)));
    return (dl_real)(0.5 * v * (1 + tanh(GELU_K * (v + GELU_A * v * v * v))));
}

static inline dl_real gelu_grad(const void *attr, dl_real x, dl_real y, dl_real dy)
{
    const struct gelu_attr *a = attr;
    double v = (double)x, d;
    if (a->approximate == GELU_NONE) {
        d = 0.5 * (1 + erf(v * 0.7071067811865476)) + v * exp(-0.5 * v * v) * 0.3989422804014327;
    } else {
        double th = tanh(GELU_K * (v + GELU_A * v * v * v));
        d = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * GELU_K * (1 + 3 * GELU_A * v * v);
    }
    return (dl_real)((double)dy * d);
}

DL_ELTWISE_LOOPS(gelu)

const struct dl_op_kind dl_op_gelu = {
    .name = "gelu",
    .summary = "Gaussian error linear unit x Phi(x), tanh approximation by default (PyTorch GELU)",
    .attr_size = sizeof(struct gelu_attr),
    .attrs = gelu_attrs,
    .n_attrs = sizeof gelu_attrs / sizeof gelu_attrs[0],
    DL_ELTWISE_KIND_FIELDS(gelu),
};
