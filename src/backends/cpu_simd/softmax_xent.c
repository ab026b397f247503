/* softmax_xent.c: the "simd" softmax cross-entropy kernel, the default for
 * a loss at every position of a sequence (ops/softmax_xent.c's op on [T, C]
 * scores, stored [C][T] per sample: core/shape.h).  The reference walks a
 * position's C scores T floats apart and takes exp in double; here a task
 * is a run of up to RUN positions of one sample, whose scores are read a
 * class at a time, 8 positions to a vector (contiguous), in three passes:
 * the maximum, e = exp(x - max) into the probabilities with their sum (in
 * double), and p = e / sum.  exp is a float polynomial (Cephes' expf:
 * range reduction by ln 2 in two parts, degree-5 minimax polynomial, within
 * 2 ulp).  A position's loss is lse - (1 - eps) x_y - eps/C sum_k x_k with
 * lse = max + log(sum) in double, summed per sample in position order, so
 * results do not depend on the thread count.  Backward: dx = g (p - eps/C),
 * minus g (1 - eps) at the label, g = dout / (the mini-batch's labelled
 * positions per sample, ops/softmax_xent.h), by class rows.  A split vocabulary (the tensor group's sync_max) runs the
 * reference. */
#include "backends/cpu_simd/simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_simd/vec8.h"
#include "ops/kinds.h"
#include "ops/softmax_xent.h"

enum { RUN = 64, V = 8 };

struct xent_inst {
    int C, P, mb, ignore;
    double eps;
};

INLINE float exp1(float x)
{
    v8 v;
    EXP8(v, (v8){0} + x);
    return v[0];
}

static int xent_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) == 2 && l->in_shape[0].h >= V;
}

static int xent_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err)
{
    struct xent_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->C = l->in_shape[0].c;
    m->P = l->in_shape[0].h;
    m->mb = cfg->mb;
    m->eps = dl_attr_float(l, "label_smoothing");
    m->ignore = dl_attr_int(l, "ignore_index", 0);
    *inst = m;
    return DL_OK;
}

static void xent_destroy(void *inst)
{
    free(inst);
}

/* The probabilities and the class count, as the reference op saves them. */
static size_t xent_saved(const void *inst)
{
    const struct xent_inst *m = inst;
    return dl_dtype_size(DL_F32) * ((size_t)m->mb * (size_t)m->C * (size_t)m->P + 1);
}

/* The loss of every position (double), summed per sample afterwards. */
static size_t xent_ws(const void *inst, enum dl_dir dir)
{
    const struct xent_inst *m = inst;
    return dir == DL_DIR_FORWARD ? sizeof(double) * (size_t)m->mb * (size_t)m->P : 0;
}

/* Positions t0..t0+len of sample n: probabilities into p, losses into loss. */
CLONE void run_forward(const struct xent_inst *m, const float *x, float *p, const int *y, int t0, int len,
                        double *loss)
{
    long C = m->C, P = m->P;
    float mx[RUN];
    double sum[RUN], xs[RUN];
    for (int t = 0; t < len; t++)
        mx[t] = x[t0 + t], sum[t] = 0, xs[t] = 0;
    int vl = len / V * V;
    for (long k = 1; k < C; k++) {
        const float *xk = x + k * P + t0;
        for (int t = 0; t < vl; t += V) {
            v8 a = LD8(mx + t), b = LD8(xk + t);
            ST8(mx + t, SEL(b > a, b, a));
        }
        for (int t = vl; t < len; t++)
            mx[t] = xk[t] > mx[t] ? xk[t] : mx[t];
    }
    for (long k = 0; k < C; k++) {
        const float *xk = x + k * P + t0;
        float *pk = p + k * P + t0;
        for (int t = 0; t < vl; t += V) {
            v8 e;
            EXP8(e, LD8(xk + t) - LD8(mx + t));
            ST8(pk + t, e);
            v8d w = __builtin_convertvector(e, v8d);
            for (int j = 0; j < V; j++)
                sum[t + j] += w[j];
        }
        for (int t = vl; t < len; t++) {
            pk[t] = exp1(xk[t] - mx[t]);
            sum[t] += pk[t];
        }
        if (m->eps > 0)
            for (int t = 0; t < len; t++)
                xs[t] += xk[t];
    }
    float inv[RUN];
    for (int t = 0; t < len; t++)
        inv[t] = (float)(1 / sum[t]);
    for (long k = 0; k < C; k++) {
        float *pk = p + k * P + t0;
        for (int t = 0; t < vl; t += V)
            ST8(pk + t, LD8(pk + t) * LD8(inv + t));
        for (int t = vl; t < len; t++)
            pk[t] *= inv[t];
    }
    for (int t = 0; t < len; t++) {
        int label = y[t0 + t];
        if (label == m->ignore) {
            for (long k = 0; k < C; k++)
                p[k * P + t0 + t] = 0;
            loss[t] = 0;
            continue;
        }
        double lse = mx[t] + log(sum[t]);
        loss[t] = lse - (1 - m->eps) * x[(long)label * P + t0 + t] - m->eps / (double)C * xs[t];
    }
}

static void xent_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct xent_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    if (c->sync_max) {
        dl_op_softmax_xent.forward(c);
        return;
    }
    long C = m->C, P = m->P, runs = (P + RUN - 1) / RUN;
    double *loss = a->workspace;
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * runs; task++) {
        long n = task / runs;
        int t0 = (int)(task % runs) * RUN, len = P - t0 < RUN ? (int)(P - t0) : RUN;
        run_forward(m, dl_tensor_const_f32(&c->in[0]) + n * C * P, c->saved + n * C * P, c->labels + n * P, t0, len,
                    loss + n * P + t0);
    }
    double norm = dl_softmax_xent_norm(c, m->ignore);
    for (int n = 0; n < c->batch; n++) {
        double total = 0;
        for (long t = 0; t < P; t++)
            if (c->labels[n * P + t] != m->ignore)
                total += loss[n * P + t];
        dl_tensor_f32(&c->out)[n] = (float)(norm > 0 ? total / norm : 0);
    }
    c->saved[(long)c->batch * C * P] = (float)C;
}

/* dx = g p - gs, row by row (g, gs per position). */
CLONE void scale_rows(const float *p, const float *g, const float *gs, long C, long P, float *dx)
{
    long vl = P / V * V;
    for (long k = 0; k < C; k++) {
        const float *pk = p + k * P;
        float *dk = dx + k * P;
        for (long t = 0; t < vl; t += V)
            ST8(dk + t, LD8(g + t) * LD8(pk + t) - LD8(gs + t));
        for (long t = vl; t < P; t++)
            dk[t] = g[t] * pk[t] - gs[t];
    }
}

static void xent_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct xent_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    if (c->sync_max) {
        dl_op_softmax_xent.backward(c);
        return;
    }
    if (!c->din[0].data)
        return;
    long C = m->C, P = m->P;
    float smooth = (float)(m->eps / (double)C), on_label = (float)(1 - m->eps);
    double norm = dl_softmax_xent_norm(c, m->ignore);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const int *y = c->labels + (long)n * P;
        float g0 = norm > 0 ? dl_tensor_const_f32(&c->dout)[n] / (float)norm : 0;
        float g[P], gs[P];
        for (long t = 0; t < P; t++) {
            g[t] = y[t] == m->ignore ? 0 : g0;
            gs[t] = g[t] * smooth;
        }
        float *dx = dl_tensor_f32(&c->din[0]) + (long)n * C * P;
        scale_rows(c->saved + (long)n * C * P, g, gs, C, P, dx);
        for (long t = 0; t < P; t++)
            if (y[t] != m->ignore)
                dx[(long)y[t] * P + t] -= g[t] * on_label;
    }
}

const struct dl_kernel dl_kernel_simd_softmax_xent = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_softmax_xent, .supports = xent_supports,
    .create = xent_create, .destroy = xent_destroy, .workspace_bytes = xent_ws, .saved_bytes = xent_saved,
    .forward = xent_forward, .backward_data = xent_backward,
    .backward_reads = DL_READS_DECLARED, /* its probabilities and the labels */
};
