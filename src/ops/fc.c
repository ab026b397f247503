/* fc.c: fully connected layer (PyTorch Linear after flatten),
 *   y[n,u] = b[u] + sum_i W[u,i] * x[n,i]
 * where x[n,:] is sample n's (C,H,W) block read in (c,h,w) order, i over the
 * F = C*H*W in features.  Input (C,H,W) -> output (units,1,1); weight
 * [units, F], bias [units].  On a sequence [T, C] (core/shape.h: stored
 * [C][T] per sample) it applies at every position, as PyTorch's Linear on
 * the last dim: y[n,u,t] = b[u] + sum_c W[u,c] x[n,c,t], output [T, units],
 * weight [units, C]. */
#include "ops/op.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "ops/vec.h"

struct fc_attr {
    int units;
    int bias;
};

static const struct dl_attr_desc fc_attrs[] = {
    {.key = "units", .type = DL_ATTR_INT, .offset = offsetof(struct fc_attr, units), .required = 1,
     .min = 1, .max = 1 << 24, .doc = "number of outputs; the input is flattened per sample"},
    {.key = "bias", .type = DL_ATTR_BOOL, .offset = offsetof(struct fc_attr, bias), .def = 1,
     .min = 0, .max = 1, .doc = "learn a bias per output"},
};

/* Positions T and features C per position of an input: a sequence's, or
 * one position of the whole flattened sample. */
static void fc_dims(struct dl_shape in, long *T, long *C)
{
    int seq = dl_shape_rank(in) == 2;
    *T = seq ? in.h : 1;
    *C = seq ? in.c : dl_shape_count(in);
}

static int fc_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                    struct dl_error *err)
{
    const struct fc_attr *a = attr;
    if (dl_shape_rank(in[0]) == 2) {
        *out = dl_shape_seq(in[0].h, a->units, DL_F32);
        return DL_OK;
    }
    if (dl_shape_count(in[0]) > INT_MAX) {
        char buf[48];
        return dl_errorf(err, DL_ERR_SPEC, "input %s has %ld features, more than the %d fc supports",
                         dl_shape_str(in[0], buf, sizeof buf), dl_shape_count(in[0]), INT_MAX);
    }
    *out = (struct dl_shape){a->units, 1, 1};
    return DL_OK;
}

static int fc_params(const void *attr, const struct dl_shape *in, struct dl_shape out, struct dl_param_desc *p)
{
    const struct fc_attr *a = attr;
    if (!p)
        return a->bias ? 2 : 1;
    long T, C;
    fc_dims(in[0], &T, &C);
    int U = a->units, F = (int)C;
    p[0] = (struct dl_param_desc){.name = "weight", .count = (long)U * F, .ndim = 2, .dims = {U, F},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = F, .trainable = 1};
    if (!a->bias)
        return 1;
    p[1] = (struct dl_param_desc){.name = "bias", .count = U, .ndim = 1, .dims = {U},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = F, .trainable = 1};
    return 2;
}

static double fc_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    const struct fc_attr *a = attr;
    long T, C;
    fc_dims(in[0], &T, &C);
    return T * (2.0 * a->units * (double)C + (a->bias ? a->units : 0));
}

/* x[n, :, t] is at x + (n * C + k) * T + t: a vector's T = 1 is its flat sample. */
static void fc_forward(const struct dl_op_call *c)
{
    const struct fc_attr *a = c->attr;
    long T, F;
    fc_dims(c->in[0].shape, &T, &F);
    long U = a->units, N = c->batch;
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *w = c->param[0], *b = a->bias ? c->param[1] : NULL;
    if (T > 1) { /* per position: one column of the sample's [C][T] block at a time */
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < N * T; i++) {
            long n = i / T, t = i % T;
            for (long u = 0; u < U; u++) {
                double sum = b ? b[u] : 0;
                for (long k = 0; k < F; k++)
                    sum += (double)w[u * F + k] * x[(n * F + k) * T + t];
                dl_tensor_f32(&c->out)[(n * U + u) * T + t] = (dl_real)sum;
            }
        }
        return;
    }
    /* One dot product per (unit, sample); unit-major so that a weight row is
     * reused by every sample while it is in cache. */
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < U * N; i++) {
        long u = i / N, n = i % N;
        double sum = b ? b[u] : 0;
        dl_tensor_f32(&c->out)[n * U + u] = (dl_real)(sum + dl_vec_dot(w + u * F, x + n * F, F));
    }
}

/* Per position of a sequence: dx[n,:,t] = W^T dy[n,:,t]; dW[u,k] += sum over
 * samples and positions in order of dy[n,u,t] x[n,k,t]; db[u] += sum of dy. */
static void fc_backward_positions(const struct dl_op_call *c, long T, long F)
{
    const struct fc_attr *a = c->attr;
    long U = a->units, N = c->batch;
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *w = c->param[0], *dy = dl_tensor_const_f32(&c->dout);
    if (c->din[0].data) {
        dl_real *dx = dl_tensor_f32(&c->din[0]);
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < N * T; i++) {
            long n = i / T, t = i % T;
            for (long k = 0; k < F; k++) {
                double sum = 0;
                for (long u = 0; u < U; u++)
                    sum += (double)w[u * F + k] * dy[(n * U + u) * T + t];
                dx[(n * F + k) * T + t] = (dl_real)sum;
            }
        }
    }
    dl_real *dw = c->dparam[0], *db = a->bias ? c->dparam[1] : NULL;
    #pragma omp parallel for schedule(static)
    for (long u = 0; u < U; u++) {
        for (long k = 0; dw && k < F; k++) {
            double sum = 0;
            for (long n = 0; n < N; n++)
                for (long t = 0; t < T; t++)
                    sum += (double)dy[(n * U + u) * T + t] * x[(n * F + k) * T + t];
            dw[u * F + k] += (dl_real)sum;
        }
        if (db) {
            double sum = 0;
            for (long n = 0; n < N; n++)
                for (long t = 0; t < T; t++)
                    sum += dy[(n * U + u) * T + t];
            db[u] += (dl_real)sum;
        }
    }
}

static void fc_backward(const struct dl_op_call *c)
{
    const struct fc_attr *a = c->attr;
    long T, F;
    fc_dims(c->in[0].shape, &T, &F);
    if (T > 1) {
        fc_backward_positions(c, T, F);
        return;
    }
    long U = a->units, N = c->batch;
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *w = c->param[0], *dy = dl_tensor_const_f32(&c->dout);
    /* dx[n,:] = sum_u dy[n,u] * W[u,:], one sample per iteration. */
    if (c->din[0].data) {
        dl_real *dx = dl_tensor_f32(&c->din[0]);
        #pragma omp parallel for schedule(static)
        for (long n = 0; n < N; n++) {
            memset(dx + n * F, 0, sizeof *dx * (size_t)F);
            for (long u = 0; u < U; u++)
                dl_vec_axpy(dx + n * F, dy[n * U + u], w + u * F, F);
        }
    }
    /* dW[u,:] += sum_n dy[n,u] * x[n,:] and db[u] += sum_n dy[n,u]: one unit
     * per iteration, samples added in order. */
    dl_real *dw = c->dparam[0], *db = a->bias ? c->dparam[1] : NULL;
    #pragma omp parallel for schedule(static)
    for (long u = 0; u < U; u++) {
        double sum = 0;
        for (long n = 0; n < N; n++) {
            dl_vec_axpy(dw + u * F, dy[n * U + u], x + n * F, F);
            sum += dy[n * U + u];
        }
        if (db)
            db[u] += (dl_real)sum;
    }
}

static int fc_tp_split(const void *attr, int by_output, int T, int keep_bias, void *local)
{
    const struct fc_attr *a = attr;
    struct fc_attr *l = local;
    if (by_output && a->units % T)
        return -1;
    *l = *a;
    if (by_output)
        l->units = a->units / T;
    else
        l->bias = a->bias && keep_bias;
    return 0;
}

static void fc_tp_outputs(const void *attr, long lo, long hi, void *local)
{
    const struct fc_attr *a = attr;
    struct fc_attr *l = local;
    *l = *a;
    l->units = (int)(hi - lo);
}

const struct dl_op_kind dl_op_fc = {
    .name = "fc",
    .summary = "fully connected layer on the flattened sample, or at every position of a sequence [T, C] "
               "(PyTorch Linear)",
    .attr_size = sizeof(struct fc_attr),
    .attrs = fc_attrs,
    .n_attrs = sizeof fc_attrs / sizeof fc_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .autocast_bf16 = 1,
    .infer = fc_infer,
    .params = fc_params,
    .forward = fc_forward,
    .backward = fc_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
    .flops = fc_flops,
    .tp.tp_split = fc_tp_split,
    .tp.tp_outputs = fc_tp_outputs,
    .tp.tp_pairs = 1,
};
