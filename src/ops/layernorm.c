/* layernorm.c: layer normalisation over the features of each position
 * (PyTorch LayerNorm(C) on [T, C], or on a vector [F]):
 *   y = (x - mean) / sqrt(var + eps) * weight + bias,
 * mean and the biased variance over the C features of one position of one
 * sample.  Features are stored first (core/shape.h: channel k at position
 * t is x[k T + t]), so a position's features are T apart.  Parameters:
 * weight [C] (ones) and bias [C] (zeros), or none with affine: false.
 * saved: each position's mean and 1/sqrt(var + eps) from forward.
 * Backward, with g = dy * weight and xhat the normalised input:
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)),
 *   dweight += sum dy xhat, dbias += sum dy (over samples and positions). */
#include "ops/op.h"

#include <math.h>
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

static int layernorm_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                           struct dl_error *err)
{
    char buf[48];
    if (dl_shape_rank(in[0]) == 3)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] or a vector [F] (normalised over its "
                         "features), found the image %s", dl_shape_str(in[0], buf, sizeof buf));
    *out = in[0];
    return DL_OK;
}

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

/* Positions of a sample: T of a sequence, 1 of a vector. */
static long positions(struct dl_shape s)
{
    return (long)s.h * s.w;
}

static long layernorm_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out)
{
    return 2L * batch * positions(in[0]);
}

static void layernorm_forward(const struct dl_op_call *c)
{
    const struct layernorm_attr *a = c->attr;
    long C = c->in[0].shape.c, T = positions(c->in[0].shape), rows = (long)c->batch * T;
    const dl_real *w = a->affine ? c->param[0] : NULL, *b = a->affine ? c->param[1] : NULL;
    dl_real *mean = c->saved, *rstd = c->saved + rows;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        long n = r / T, t = r % T;
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * C * T + t;
        dl_real *y = dl_tensor_f32(&c->out) + n * C * T + t;
        double s = 0, ss = 0;
        for (long k = 0; k < C; k++)
            s += (double)x[k * T];
        double mu = s / (double)C;
        for (long k = 0; k < C; k++)
            ss += ((double)x[k * T] - mu) * ((double)x[k * T] - mu);
        double inv = 1 / sqrt(ss / (double)C + a->eps);
        mean[r] = (dl_real)mu;
        rstd[r] = (dl_real)inv;
        for (long k = 0; k < C; k++) {
            double v = ((double)x[k * T] - mu) * inv;
            y[k * T] = (dl_real)(w ? v * (double)w[k] + (double)b[k] : v);
        }
    }
}

static void layernorm_backward(const struct dl_op_call *c)
{
    const struct layernorm_attr *a = c->attr;
    long C = c->in[0].shape.c, T = positions(c->in[0].shape), rows = (long)c->batch * T;
    const dl_real *w = a->affine ? c->param[0] : NULL, *mean = c->saved, *rstd = c->saved + rows;
    if (c->din[0].data) {
        #pragma omp parallel for schedule(static)
        for (long r = 0; r < rows; r++) {
            long n = r / T, t = r % T;
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * C * T + t;
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + n * C * T + t;
            dl_real *dx = dl_tensor_f32(&c->din[0]) + n * C * T + t;
            double mu = (double)mean[r], inv = (double)rstd[r], sg = 0, sgx = 0;
            for (long k = 0; k < C; k++) {
                double g = (double)dy[k * T] * (w ? (double)w[k] : 1), xhat = ((double)x[k * T] - mu) * inv;
                sg += g;
                sgx += g * xhat;
            }
            sg /= (double)C;
            sgx /= (double)C;
            for (long k = 0; k < C; k++) {
                double g = (double)dy[k * T] * (w ? (double)w[k] : 1), xhat = ((double)x[k * T] - mu) * inv;
                dx[k * T] = (dl_real)(inv * (g - sg - xhat * sgx));
            }
        }
    }
    if (!w)
        return;
    dl_real *dw = c->dparam[0], *db = c->dparam[1];
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *dy_all = dl_tensor_const_f32(&c->dout);
    /* per feature, over samples and positions in order: the same sums on any thread count */
    #pragma omp parallel for schedule(static)
    for (long k = 0; k < C; k++) {
        double sw = 0, sb = 0;
        for (long r = 0; r < rows; r++) {
            long n = r / T, t = r % T;
            double dy = (double)dy_all[(n * C + k) * T + t];
            sw += dy * ((double)x[(n * C + k) * T + t] - (double)mean[r]) * (double)rstd[r];
            sb += dy;
        }
        if (dw)
            dw[k] += (dl_real)sw;
        if (db)
            db[k] += (dl_real)sb;
    }
}

static double layernorm_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 8.0 * (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_layernorm = {
    .name = "layernorm",
    .summary = "layer normalisation over the features of each position (PyTorch LayerNorm on the last dim)",
    .attr_size = sizeof(struct layernorm_attr),
    .attrs = layernorm_attrs,
    .n_attrs = sizeof layernorm_attrs / sizeof layernorm_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .is_norm = 1,
    .micro_batch = 1,
    .tp.row_local = 1, /* positions are independent: a band of them (sequence parallelism) */
    .infer = layernorm_infer,
    .params = layernorm_params,
    .saved_size = layernorm_saved_size,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
    .flops = layernorm_flops,
};
