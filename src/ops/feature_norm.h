/* feature_norm.h: what layernorm and rmsnorm share: a normalisation over
 * the C features of each position of each sample (a sequence [T, C], stored
 * [C][T] per sample: core/shape.h, or a vector [F]).  layernorm centres
 * (subtracts the mean) and may add a bias; rmsnorm does neither.  Both
 * scale by rstd = 1/sqrt(mean of squares about the centre + eps) (the
 * statistics in double), then by a weight per feature when there is one:
 *   y = (x - mu) rstd w + b      (mu = 0 and no b for rmsnorm)
 * Backward, with g = dy w and xhat = (x - mu) rstd:
 *   dx = rstd (g - [centred] mean(g) - xhat mean(g xhat)),
 *   dweight += sum dy xhat, dbias += sum dy (over samples and positions).
 * saved: each position's mu (0 for rmsnorm) and rstd, [rows] each. */
#ifndef DL_OPS_FEATURE_NORM_H
#define DL_OPS_FEATURE_NORM_H

#include "ops/op.h"

struct dl_feature_norm {
    double eps;
    int centred, weight, bias; /* weight: param[0]; bias: param[1] */
};

/* Output = input, which is a sequence or a vector (an image is refused). */
int dl_feature_norm_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                          struct dl_error *err);
long dl_feature_norm_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out);
double dl_feature_norm_flops(const void *attr, const struct dl_shape *in, struct dl_shape out);
void dl_feature_norm_forward(const struct dl_op_call *c, struct dl_feature_norm f);
void dl_feature_norm_backward(const struct dl_op_call *c, struct dl_feature_norm f);

/* The fields of struct dl_op_kind that layernorm and rmsnorm share: one
 * input, a normalisation's parameters (no weight decay under no_decay:
 * norm), positions independent (micro-batches; a band of them under
 * sequence parallelism). */
#define DL_FEATURE_NORM_KIND_FIELDS \
    .min_inputs = 1, .max_inputs = 1, .is_norm = 1, .micro_batch = 1, .tp.row_local = 1, \
    .infer = dl_feature_norm_infer, .saved_size = dl_feature_norm_saved_size, \
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, .flops = dl_feature_norm_flops

#endif
