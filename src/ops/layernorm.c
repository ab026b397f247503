/* layernorm.c: layer normalisation over the features of each position
 * (PyTorch LayerNorm(C) on [T, C], or on a vector [F]):
 *   y = (x - mean) / sqrt(var + eps) * weight + bias,
 * mean and the biased variance over the C features of one position of one
 * sample (ops/feature_norm.h: the computation, shared with rmsnorm).
 * Parameters: weight [C] (ones) and bias [C] (zeros), or none with affine:
 * false. */
#include "ops/feature_norm.h"

#include <stddef.h>

struct layernorm_attr {
    double eps;
    int affine;
};

static const struct dl_attr_desc layernorm_attrs[] = {
    {.key = "eps", .type = DL_ATTR_FLOAT, .offset = offsetof(struct layernorm_attr, eps), .def = 1e-5, .min = 0,
     .max = 1, .doc = "added to the variance before the square root"},
    {.key = "affine", .type = DL_ATTR_BOOL, .offset = offsetof(struct layernorm_attr, affine), .def = 1,
     .doc = "learn a weight and a bias per feature (PyTorch elementwise_affine)"},
};

static int layernorm_params(const void *attr, const struct dl_shape *in, struct dl_shape out,
                            struct dl_param_desc *p)
{
    const struct layernorm_attr *a = attr;
    if (!a->affine || !p)
        return a->affine ? 2 : 0;
    p[0] = (struct dl_param_desc){.name = "weight", .count = in[0].c, .ndim = 1, .dims = {in[0].c},
                                  .init = DL_INIT_ONE, .trainable = 1};
    p[1] = (struct dl_param_desc){.name = "bias", .count = in[0].c, .ndim = 1, .dims = {in[0].c},
                                  .init = DL_INIT_ZERO, .trainable = 1};
    return 2;
}

static struct dl_feature_norm layernorm_form(const void *attr)
{
    const struct layernorm_attr *a = attr;
    return (struct dl_feature_norm){.eps = a->eps, .centred = 1, .weight = a->affine, .bias = a->affine};
}

static void layernorm_forward(const struct dl_op_call *c)
{
    dl_feature_norm_forward(c, layernorm_form(c->attr));
}

static void layernorm_backward(const struct dl_op_call *c)
{
    dl_feature_norm_backward(c, layernorm_form(c->attr));
}

const struct dl_op_kind dl_op_layernorm = {
    .name = "layernorm",
    .summary = "layer normalisation over the features of each position (PyTorch LayerNorm on the last dim)",
    .attr_size = sizeof(struct layernorm_attr),
    .attrs = layernorm_attrs,
    .n_attrs = sizeof layernorm_attrs / sizeof layernorm_attrs[0],
    .params = layernorm_params,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    DL_FEATURE_NORM_KIND_FIELDS,
};
