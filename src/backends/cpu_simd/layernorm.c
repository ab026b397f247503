/* layernorm.c: the "simd" layer norm and RMS norm kernels, the defaults for
 * them on a sequence [T, C] (ops/feature_norm.h's computation; stored [C][T]
 * per sample: core/shape.h).  RMS norm is layer norm without the mean
 * (taken as 0, its gradient term dropped) and without the bias.  The reference walks a position's C features T floats
 * apart; here a task is a run of up to RUN positions of one sample, read a
 * feature row at a time (contiguous), so every loop runs over positions and
 * vectorises: the sums of x and of (x - mean)^2 per position in double (as
 * the reference), then y = (x - mean) rstd w + b in float.  Backward: the
 * input gradient per run (sums of g = dy w and g xhat per position in
 * double), and the weight gradients per feature over samples and positions
 * in order, so results do not depend on the thread count.  saved: each
 * position's mean and rstd, the reference's layout. */
#include "backends/cpu_simd/simd.h"

#include <math.h>
#include <stdlib.h>

#include "ops/kinds.h"

enum { RUN = 64 };

/* the loops, for AVX2 and for the baseline (GCC picks at load time) */
#define CLONE __attribute__((target_clones("avx2", "default"))) static

struct ln_inst {
    long C, T;
    int mb, weight, bias, centred; /* layernorm: centred, weight and bias unless affine: false; rmsnorm: weight */
    double eps;
};

static int ln_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) == 2;
}

static int ln_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct ln_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->C = l->in_shape[0].c;
    m->T = l->in_shape[0].h;
    m->mb = cfg->mb;
    m->centred = l->kind == &dl_op_layernorm;
    m->weight = m->centred ? dl_attr_int(l, "affine", 0) : 1;
    m->bias = m->centred && m->weight;
    m->eps = dl_attr_float(l, "eps");
    *inst = m;
    return DL_OK;
}

static void ln_destroy(void *inst)
{
    free(inst);
}

static size_t ln_saved(const void *inst)
{
    const struct ln_inst *m = inst;
    return dl_dtype_size(DL_F32) * 2 * (size_t)m->mb * (size_t)m->T;
}

/* Positions [t0, t0 + len) of one sample (x, y: its [C][T] block). */
CLONE void ln_run_forward(const struct ln_inst *m, const float *x, const float *w, const float *b, long t0, int len,
                       float *y, float *mean, float *rstd)
{
    long C = m->C, T = m->T;
    double s[RUN] = {0}, ss[RUN] = {0};
    float mu[RUN], inv[RUN];
    for (long k = 0; m->centred && k < C; k++) {
        const float *xk = x + k * T + t0;
        for (int t = 0; t < len; t++)
            s[t] += (double)xk[t];
    }
    double mud[RUN];
    for (int t = 0; t < len; t++)
        mud[t] = s[t] / (double)C;
    for (long k = 0; k < C; k++) {
        const float *xk = x + k * T + t0;
        for (int t = 0; t < len; t++) {
            double d = (double)xk[t] - mud[t];
            ss[t] += d * d;
        }
    }
    for (int t = 0; t < len; t++) {
        double r = 1 / sqrt(ss[t] / (double)C + m->eps);
        mu[t] = (float)mud[t];
        inv[t] = (float)r;
        mean[t] = mu[t];
        rstd[t] = inv[t];
    }
    for (long k = 0; k < C; k++) {
        const float *xk = x + k * T + t0;
        float *yk = y + k * T + t0, wk = w ? w[k] : 1, bk = b ? b[k] : 0;
        for (int t = 0; t < len; t++)
            yk[t] = (xk[t] - mu[t]) * inv[t] * wk + bk;
    }
}

static void ln_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct ln_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    long C = m->C, T = m->T, runs = (T + RUN - 1) / RUN, rows = (long)c->batch * T;
    const float *w = m->weight ? c->param[0] : NULL, *b = m->bias ? c->param[1] : NULL;
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * runs; task++) {
        long n = task / runs, t0 = task % runs * RUN;
        int len = (int)(T - t0 < RUN ? T - t0 : RUN);
        ln_run_forward(m, dl_tensor_const_f32(&c->in[0]) + n * C * T, w, b, t0, len, dl_tensor_f32(&c->out) + n * C * T,
                       c->saved + n * T + t0, c->saved + rows + n * T + t0);
    }
}

/* dx of positions [t0, t0 + len) of one sample. */
CLONE void ln_run_backward(const struct ln_inst *m, const float *x, const float *dy, const float *w, long t0, int len,
                        const float *mean, const float *rstd, float *dx)
{
    long C = m->C, T = m->T;
    double sg[RUN] = {0}, sgx[RUN] = {0};
    for (long k = 0; k < C; k++) {
        const float *xk = x + k * T + t0, *dk = dy + k * T + t0;
        float wk = w ? w[k] : 1;
        for (int t = 0; t < len; t++) {
            double g = (double)dk[t] * wk, xhat = ((double)xk[t] - mean[t]) * rstd[t];
            sg[t] += g;
            sgx[t] += g * xhat;
        }
    }
    float a1[RUN], a2[RUN];
    for (int t = 0; t < len; t++) {
        a1[t] = m->centred ? (float)(sg[t] / (double)C) : 0; /* the mean's own gradient, where it was subtracted */
        a2[t] = (float)(sgx[t] / (double)C);
    }
    for (long k = 0; k < C; k++) {
        const float *xk = x + k * T + t0, *dk = dy + k * T + t0;
        float *dxk = dx + k * T + t0, wk = w ? w[k] : 1;
        for (int t = 0; t < len; t++) {
            float xhat = (xk[t] - mean[t]) * rstd[t];
            dxk[t] = rstd[t] * (dk[t] * wk - a1[t] - xhat * a2[t]);
        }
    }
}

static void ln_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct ln_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    long C = m->C, T = m->T, runs = (T + RUN - 1) / RUN, rows = (long)c->batch * T;
    const float *w = m->weight ? c->param[0] : NULL;
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * runs; task++) {
        long n = task / runs, t0 = task % runs * RUN;
        int len = (int)(T - t0 < RUN ? T - t0 : RUN);
        ln_run_backward(m, dl_tensor_const_f32(&c->in[0]) + n * C * T, dl_tensor_const_f32(&c->dout) + n * C * T, w, t0,
                        len, c->saved + n * T + t0, c->saved + rows + n * T + t0,
                        dl_tensor_f32(&c->din[0]) + n * C * T);
    }
}

/* Feature k's sums of dy xhat and dy over samples and positions, in order. */
CLONE void ln_feature_sums(const struct ln_inst *m, const float *x, const float *dy, const float *mean,
                        const float *rstd, int batch, long k, double *sw, double *sb)
{
    long C = m->C, T = m->T;
    double w = 0, b = 0;
    for (int n = 0; n < batch; n++) {
        const float *xk = x + (n * C + k) * T, *dk = dy + (n * C + k) * T, *mu = mean + n * T, *r = rstd + n * T;
        for (long t = 0; t < T; t++) {
            w += (double)dk[t] * ((double)xk[t] - mu[t]) * r[t];
            b += (double)dk[t];
        }
    }
    *sw = w;
    *sb = b;
}

static void ln_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct ln_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    float *dw = m->weight ? c->dparam[0] : NULL, *db = m->bias ? c->dparam[1] : NULL;
    if (!dw && !db)
        return;
    long rows = (long)c->batch * m->T;
    #pragma omp parallel for schedule(static)
    for (long k = 0; k < m->C; k++) {
        double sw, sb;
        ln_feature_sums(m, dl_tensor_const_f32(&c->in[0]), dl_tensor_const_f32(&c->dout), c->saved, c->saved + rows,
                        c->batch, k, &sw, &sb);
        if (dw)
            dw[k] += (float)sw;
        if (db)
            db[k] += (float)sb;
    }
}

const struct dl_kernel dl_kernel_simd_layernorm = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_layernorm, .supports = ln_supports, .create = ln_create,
    .destroy = ln_destroy, .saved_bytes = ln_saved, .forward = ln_forward, .backward_data = ln_backward_data,
    .backward_weights = ln_backward_weights, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};

const struct dl_kernel dl_kernel_simd_rmsnorm = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_rmsnorm, .supports = ln_supports, .create = ln_create,
    .destroy = ln_destroy, .saved_bytes = ln_saved, .forward = ln_forward, .backward_data = ln_backward_data,
    .backward_weights = ln_backward_weights, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};
