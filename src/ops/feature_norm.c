/* feature_norm.c: the reference forward and backward of layernorm and
 * rmsnorm (feature_norm.h says what they compute). */
#include "ops/feature_norm.h"

#include <math.h>
#include <stddef.h>

int dl_feature_norm_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                          struct dl_error *err)
{
    char buf[48];
    if (dl_shape_rank(in[0]) == 3)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] or a vector [F] (normalised over its "
                         "features), found the image %s", dl_shape_str(in[0], buf, sizeof buf));
    *out = in[0];
    return DL_OK;
}

/* Positions of a sample: T of a sequence, 1 of a vector. */
static long positions(struct dl_shape s)
{
    return (long)s.h * s.w;
}

long dl_feature_norm_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out)
{
    return 2L * batch * positions(in[0]);
}

void dl_feature_norm_forward(const struct dl_op_call *c, struct dl_feature_norm f)
{
    long C = c->in[0].shape.c, T = positions(c->in[0].shape), rows = (long)c->batch * T;
    const dl_real *w = f.weight ? c->param[0] : NULL, *b = f.bias ? c->param[1] : NULL;
    dl_real *mean = c->saved, *rstd = c->saved + rows;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        long n = r / T, t = r % T;
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * C * T + t;
        dl_real *y = dl_tensor_f32(&c->out) + n * C * T + t;
        double s = 0, ss = 0;
        for (long k = 0; f.centred && k < C; k++)
            s += (double)x[k * T];
        double mu = s / (double)C;
        for (long k = 0; k < C; k++)
            ss += ((double)x[k * T] - mu) * ((double)x[k * T] - mu);
        double inv = 1 / sqrt(ss / (double)C + f.eps);
        mean[r] = (dl_real)mu;
        rstd[r] = (dl_real)inv;
        for (long k = 0; k < C; k++) {
            double v = ((double)x[k * T] - mu) * inv;
            y[k * T] = (dl_real)((w ? v * (double)w[k] : v) + (b ? (double)b[k] : 0));
        }
    }
}

void dl_feature_norm_backward(const struct dl_op_call *c, struct dl_feature_norm f)
{
    long C = c->in[0].shape.c, T = positions(c->in[0].shape), rows = (long)c->batch * T;
    const dl_real *w = f.weight ? c->param[0] : NULL, *mean = c->saved, *rstd = c->saved + rows;
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
            sg = f.centred ? sg / (double)C : 0; /* the mean's own gradient, where it was subtracted */
            sgx /= (double)C;
            for (long k = 0; k < C; k++) {
                double g = (double)dy[k * T] * (w ? (double)w[k] : 1), xhat = ((double)x[k * T] - mu) * inv;
                dx[k * T] = (dl_real)(inv * (g - sg - xhat * sgx));
            }
        }
    }
    if (!w)
        return;
    dl_real *dw = c->dparam[0], *db = f.bias ? c->dparam[1] : NULL;
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

double dl_feature_norm_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 8.0 * (double)dl_shape_count(out);
}
