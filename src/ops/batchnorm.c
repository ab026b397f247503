/* batchnorm.c: batch normalisation per channel c (PyTorch BatchNorm1d/2d),
 * y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], over the
 * N*H*W values of channel c (vector inputs (C,1,1): over N).  Training mode
 * uses the batch statistics (biased variance) and updates the running ones,
 * running = (1-momentum)*running + momentum*batch with the unbiased variance;
 * inference mode uses the running statistics.  Parameters: weight, bias,
 * running_mean, running_var, all [C]. */
#include "ops/op.h"

#include <math.h>
#include <stdio.h>

struct batchnorm_attr {
    double eps;
    double momentum;
};

static const struct dl_attr_desc batchnorm_attrs[] = {
    {"eps", DL_ATTR_FLOAT, offsetof(struct batchnorm_attr, eps), 0, 1e-5, 0, 1, NULL,
     "added to the variance before the square root"},
    {"momentum", DL_ATTR_FLOAT, offsetof(struct batchnorm_attr, momentum), 0, 0.1, 0, 1, NULL,
     "weight of the batch statistics in the running statistics (PyTorch convention)"},
};

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR };

static int batchnorm_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                           struct dl_error *err)
{
    *out = in[0];
    return DL_OK;
}

static int batchnorm_params(const void *attr, const struct dl_shape *in, struct dl_shape out,
                            struct dl_param_desc *p)
{
    static const struct {
        const char *name;
        enum dl_init init;
        int trainable;
    } desc[4] = {{"weight", DL_INIT_ONE, 1}, {"bias", DL_INIT_ZERO, 1},
                 {"running_mean", DL_INIT_ZERO, 0}, {"running_var", DL_INIT_ONE, 0}};
    for (int j = 0; j < 4 && p; j++) {
        p[j] = (struct dl_param_desc){.count = in[0].c, .ndim = 1, .dims = {in[0].c},
                                      .init = desc[j].init, .trainable = desc[j].trainable};
        snprintf(p[j].name, sizeof p[j].name, "%s", desc[j].name);
    }
    /* PyTorch's count of training forwards, so that a checkpoint is a whole
     * BatchNorm2d state_dict (it weighs the running statistics only with
     * momentum None, which this op does not take) */
    if (p)
        p[4] = (struct dl_param_desc){.name = "num_batches_tracked", .count = 1, .ndim = 0, .init = DL_INIT_ZERO,
                                      .dtype = DL_I64, .counts_forwards = 1};
    return 5;
}

/* saved = mean[C], inv_std[C] and the number of values per channel over
 * every rank (M, for backward) of the last training-mode forward. */
static long batchnorm_saved_size(const void *attr, int batch, const struct dl_shape *in,
                                 struct dl_shape out)
{
    return 2L * in[0].c + 1;
}

/* Sums over channel ch of f(x) for every value of the batch, in a fixed order. */
static double channel_sum(const struct dl_op_call *c, int ch, double shift, int squared)
{
    int N = c->batch, C = c->in[0].shape.c;
    long HW = (long)c->in[0].shape.h * c->in[0].shape.w;
    double s = 0;
    for (int n = 0; n < N; n++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + ((long)n * C + ch) * HW;
        for (long i = 0; i < HW; i++)
            s += squared ? ((double)x[i] - shift) * ((double)x[i] - shift) : (double)x[i];
    }
    return s;
}

/* Batch statistics: mean, then squared deviations from it (two passes, to
 * avoid cancellation), each summed over the ranks when c->sync_sum is set. */
static void batch_statistics(const struct dl_op_call *c, double *mean, double *var, double *count)
{
    int C = c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++)
        mean[ch] = channel_sum(c, ch, 0, 0);
    mean[C] = (double)c->batch * c->in[0].shape.h * c->in[0].shape.w;
    if (c->sync_sum)
        c->sync_sum(c->sync_ctx, mean, C + 1);
    *count = mean[C];
    for (int ch = 0; ch < C; ch++)
        mean[ch] /= *count;
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++)
        var[ch] = channel_sum(c, ch, mean[ch], 1);
    if (c->sync_sum)
        c->sync_sum(c->sync_ctx, var, C);
}

static void batchnorm_forward(const struct dl_op_call *c)
{
    const struct batchnorm_attr *a = c->attr;
    int N = c->batch, C = c->in[0].shape.c;
    long HW = (long)c->in[0].shape.h * c->in[0].shape.w;
    double mean[C + 1], sq[C], M = 0;
    if (c->training)
        batch_statistics(c, mean, sq, &M);
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double mu, var;
        if (c->training) {
            mu = mean[ch];
            var = sq[ch] / M;
            dl_real *rm = c->param[BN_RUNNING_MEAN], *rv = c->param[BN_RUNNING_VAR];
            rm[ch] = (dl_real)((1 - a->momentum) * rm[ch] + a->momentum * mu);
            /* The unbiased variance is undefined for one value per channel:
             * the running variance is then left as it is. */
            if (M > 1)
                rv[ch] = (dl_real)((1 - a->momentum) * rv[ch] + a->momentum * sq[ch] / (M - 1));
        } else {
            mu = c->param[BN_RUNNING_MEAN][ch];
            var = c->param[BN_RUNNING_VAR][ch];
        }
        double inv_std = 1 / sqrt(var + a->eps);
        if (c->training) {
            c->saved[ch] = (dl_real)mu;
            c->saved[C + ch] = (dl_real)inv_std;
        }
        dl_real m = (dl_real)mu;
        dl_real scale = (dl_real)(c->param[BN_WEIGHT][ch] * inv_std);
        dl_real shift = c->param[BN_BIAS][ch];
        for (int n = 0; n < N; n++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + ((long)n * C + ch) * HW;
            dl_real *y = dl_tensor_f32(&c->out) + ((long)n * C + ch) * HW;
            for (long i = 0; i < HW; i++)
                y[i] = (x[i] - m) * scale + shift;
        }
    }
    if (c->training)
        c->saved[2 * C] = (dl_real)M;
}

/* With xhat = (x - mean) * inv_std: dbias = sum dy, dweight = sum dy*xhat.
 * Inference mode (constant statistics): dx = dy * weight * inv_std.
 * Training mode (mean and inv_std depend on every x of the channel):
 * dx = weight * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), the
 * means taken over every rank's values with --sync-bn. */
/* The mean and 1/std that forward normalised channel ch with. */
static void used_statistics(const struct dl_op_call *c, int ch, double *mean, double *inv_std)
{
    const struct batchnorm_attr *a = c->attr;
    int C = c->in[0].shape.c;
    if (c->training) {
        *mean = c->saved[ch];
        *inv_std = c->saved[C + ch];
    } else {
        *mean = c->param[BN_RUNNING_MEAN][ch];
        *inv_std = 1 / sqrt((double)c->param[BN_RUNNING_VAR][ch] + a->eps);
    }
}

static void batchnorm_backward(const struct dl_op_call *c)
{
    int N = c->batch, C = c->in[0].shape.c;
    long HW = (long)c->in[0].shape.h * c->in[0].shape.w;
    double sums[2 * C]; /* sum dy[C], then sum dy*xhat[C] */
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double mean, inv_std;
        used_statistics(c, ch, &mean, &inv_std);
        double sum_dy = 0, sum_dy_xhat = 0;
        for (int n = 0; n < N; n++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + ((long)n * C + ch) * HW;
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + ((long)n * C + ch) * HW;
            for (long i = 0; i < HW; i++) {
                sum_dy += dy[i];
                sum_dy_xhat += dy[i] * ((x[i] - mean) * inv_std);
            }
        }
        /* This rank's share: the gradient allreduce adds the others'. */
        if (c->dparam[BN_WEIGHT])
            c->dparam[BN_WEIGHT][ch] += (dl_real)sum_dy_xhat;
        if (c->dparam[BN_BIAS])
            c->dparam[BN_BIAS][ch] += (dl_real)sum_dy;
        sums[ch] = sum_dy;
        sums[C + ch] = sum_dy_xhat;
    }
    if (!c->din[0].data)
        return;
    double M = (double)N * HW;
    if (c->training && c->sync_sum) {
        c->sync_sum(c->sync_ctx, sums, 2 * C);
        M = c->saved[2 * C];
    }
    #pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C; ch++) {
        double mean, inv_std;
        used_statistics(c, ch, &mean, &inv_std);
        dl_real m = (dl_real)mean, is = (dl_real)inv_std;
        dl_real k = (dl_real)(c->param[BN_WEIGHT][ch] * inv_std);
        dl_real mean_dy = c->training ? (dl_real)(sums[ch] / M) : 0;
        dl_real mean_dy_xhat = c->training ? (dl_real)(sums[C + ch] / M) : 0;
        for (int n = 0; n < N; n++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + ((long)n * C + ch) * HW;
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + ((long)n * C + ch) * HW;
            dl_real *dx = dl_tensor_f32(&c->din[0]) + ((long)n * C + ch) * HW;
            for (long i = 0; i < HW; i++)
                dx[i] = k * (dy[i] - mean_dy - (x[i] - m) * is * mean_dy_xhat);
        }
    }
}

/* Normalise and scale: a subtract and a multiply-add per element.  The batch
 * statistics of training mode (about 4 more per element) are not counted. */
static double batchnorm_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 3.0 * (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_batchnorm = {
    .name = "batchnorm",
    .summary = "batch normalisation per channel with learned scale and shift",
    .attr_size = sizeof(struct batchnorm_attr),
    .attrs = batchnorm_attrs,
    .n_attrs = sizeof batchnorm_attrs / sizeof batchnorm_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .is_norm = 1,
    .infer = batchnorm_infer,
    .params = batchnorm_params,
    .saved_size = batchnorm_saved_size,
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .flops = batchnorm_flops,
    .tp.channel_local = 1,
    .tp.row_local = 1,
};
