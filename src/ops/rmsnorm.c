/* rmsnorm.c: root-mean-square normalisation over the features of each
 * position (the LLaMA family's norm; Hugging Face LlamaRMSNorm, PyTorch
 * RMSNorm(C) on [T, C], or on a vector [F]):
 *   y = x / sqrt(mean(x^2) + eps) * weight,
 * no centring and no bias (ops/feature_norm.h: the computation, shared with
 * layernorm; the statistics in double whatever the precision).
 * Parameter: weight [C] (ones). */
#include "ops/feature_norm.h"

#include <stddef.h>

struct rmsnorm_attr {
    double eps;
};

static const struct dl_attr_desc rmsnorm_attrs[] = {
    {.key = "eps", .type = DL_ATTR_FLOAT, .offset = offsetof(struct rmsnorm_attr, eps), .def = 1e-6, .min = 0,
     .max = 1, .doc = "added to the mean of the squares before the square root (Hugging Face rms_norm_eps)"},
};

static int rmsnorm_params(const void *attr, const struct dl_shape *in, struct dl_shape out, struct dl_param_desc *p)
{
    if (p)
        p[0] = (struct dl_param_desc){.name = "weight", .count = in[0].c, .ndim = 1, .dims = {in[0].c},
                                      .init = DL_INIT_ONE, .trainable = 1};
    return 1;
}

static struct dl_feature_norm rmsnorm_form(const void *attr)
{
    const struct rmsnorm_attr *a = attr;
    return (struct dl_feature_norm){.eps = a->eps, .weight = 1};
}

static void rmsnorm_forward(const struct dl_op_call *c)
{
    dl_feature_norm_forward(c, rmsnorm_form(c->attr));
}

static void rmsnorm_backward(const struct dl_op_call *c)
{
    dl_feature_norm_backward(c, rmsnorm_form(c->attr));
}

const struct dl_op_kind dl_op_rmsnorm = {
    .name = "rmsnorm",
    .summary = "root-mean-square normalisation over the features of each position, times a weight (LLaMA's "
               "RMSNorm)",
    .attr_size = sizeof(struct rmsnorm_attr),
    .attrs = rmsnorm_attrs,
    .n_attrs = sizeof rmsnorm_attrs / sizeof rmsnorm_attrs[0],
    .params = rmsnorm_params,
    .forward = rmsnorm_forward,
    .backward = rmsnorm_backward,
    DL_FEATURE_NORM_KIND_FIELDS,
};
