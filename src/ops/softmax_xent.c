/* softmax_xent.c: softmax cross-entropy loss on class scores x (C, 1, 1) and
 * integer labels y: out[n] = -sum_k q_k log softmax(x_n)_k, where the target
 * q = (1 - eps) onehot(y_n) + eps / C (label smoothing as in PyTorch's
 * CrossEntropyLoss; eps = 0 gives -log softmax(x_n)[y_n]).  Output: one loss
 * per sample (1, 1, 1).  Backward: din[n, k] = dout[n] * (p_nk - q_k).
 * With its classes split over the tensor group (c->sync_max set; op.h), each
 * rank holds the scores of classes [channel0, channel0 + Cl): the maximum is
 * reduced first, then the sums of exponentials, of the target score (0 on
 * the ranks that do not hold it) and of the scores, as Megatron-LM's
 * vocabulary-parallel cross entropy does, and each rank's gradient is its
 * block of p - q. */
#include "ops/op.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

struct softmax_xent_attr {
    double label_smoothing;
};

static const struct dl_attr_desc softmax_xent_attrs[] = {
    {.key = "label_smoothing", .type = DL_ATTR_FLOAT,
     .offset = offsetof(struct softmax_xent_attr, label_smoothing), .def = 0, .min = 0, .max = 1,
     .doc = "eps in [0, 1): the target puts 1 - eps on the label and eps evenly over all classes"},
};

static int softmax_xent_check(const void *attr, struct dl_error *err)
{
    const struct softmax_xent_attr *a = attr;
    if (a->label_smoothing >= 1)
        return dl_errorf(err, DL_ERR_SPEC, "key 'label_smoothing': expected a number in [0, 1), "
                         "found %g (1 would ignore the labels)", a->label_smoothing);
    return DL_OK;
}

static int softmax_xent_infer(const void *attr, int n_in, const struct dl_shape *in,
                              struct dl_shape *out, struct dl_error *err)
{
    char got[48];
    if (in[0].h != 1 || in[0].w != 1)
        return dl_errorf(err, DL_ERR_SPEC, "softmax_cross_entropy takes a vector of class scores "
                         "(C, 1, 1), found %s: put a flatten or global_avgpool layer before it",
                         dl_shape_str(in[0], got, sizeof got));
    if (in[0].c < 2)
        return dl_errorf(err, DL_ERR_SPEC, "softmax_cross_entropy needs at least 2 classes, "
                         "found %d", in[0].c);
    *out = (struct dl_shape){1, 1, 1};
    return DL_OK;
}

/* The probabilities, for backward, then the number of classes of the whole
 * tensor (which a split call learns from its group). */
static long softmax_xent_saved_size(const void *attr, int batch, const struct dl_shape *in,
                                    struct dl_shape out)
{
    return (long)batch * in[0].c + 1;
}

/* Writes the loss and the probabilities p = exp(x - lse) of sample n from
 * its log-sum-exp, target score and sum of scores. */
static void softmax_xent_finish(const struct dl_op_call *c, int n, double lse, double target, double xsum,
                                double classes)
{
    const struct softmax_xent_attr *a = c->attr;
    int C = c->in_shape[0].c;
    const dl_real *x = c->in[0] + (long)n * C;
    dl_real *p = c->saved + (long)n * C;
    double eps = a->label_smoothing;
    for (int k = 0; k < C; k++)
        p[k] = (dl_real)exp((double)x[k] - lse);
    /* With log p_k = x_k - lse and sum_k q_k = 1:
     * -sum_k q_k log p_k = lse - (1 - eps) x_y - eps/C sum_k x_k. */
    c->out[n] = (dl_real)(lse - (1 - eps) * target - eps / classes * xsum);
}

static void softmax_xent_forward_whole(const struct dl_op_call *c)
{
    int C = c->in_shape[0].c;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *x = c->in[0] + (long)n * C;
        int y = c->labels[n];
        assert(y >= 0 && y < C);
        /* log-sum-exp with the maximum subtracted, so no exp overflows. */
        double xmax = x[0], sum = 0, xsum = 0;
        for (int k = 1; k < C; k++)
            xmax = x[k] > xmax ? x[k] : xmax;
        for (int k = 0; k < C; k++) {
            sum += exp((double)x[k] - xmax);
            xsum += x[k];
        }
        softmax_xent_finish(c, n, xmax + log(sum), x[y], xsum, C);
    }
    c->saved[(long)c->batch * C] = (dl_real)C;
}

/* Classes [channel0, channel0 + Cl) here: the maximum over every rank's
 * classes first, then per sample the sums [exp(x - max), x_y, x] and the
 * class count, summed over the ranks. */
static void softmax_xent_forward_split(const struct dl_op_call *c)
{
    int N = c->batch, Cl = c->in_shape[0].c;
    double xmax[N > 0 ? N : 1], sums[3 * N + 1];
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const dl_real *x = c->in[0] + (long)n * Cl;
        double m = x[0];
        for (int k = 1; k < Cl; k++)
            m = x[k] > m ? x[k] : m;
        xmax[n] = m;
    }
    c->sync_max(c->sync_ctx, xmax, N);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const dl_real *x = c->in[0] + (long)n * Cl;
        int y = c->labels[n] - c->channel0;
        double sum = 0, xsum = 0;
        for (int k = 0; k < Cl; k++) {
            sum += exp((double)x[k] - xmax[n]);
            xsum += x[k];
        }
        sums[n] = sum;
        sums[N + n] = y >= 0 && y < Cl ? x[y] : 0;
        sums[2 * N + n] = xsum;
    }
    sums[3 * N] = Cl;
    c->sync_sum(c->sync_ctx, sums, 3 * N + 1);
    double classes = sums[3 * N];
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        assert(c->labels[n] >= 0 && c->labels[n] < classes);
        softmax_xent_finish(c, n, xmax[n] + log(sums[n]), sums[N + n], sums[2 * N + n], classes);
    }
    c->saved[(long)N * Cl] = (dl_real)classes;
}

static void softmax_xent_forward(const struct dl_op_call *c)
{
    if (c->sync_max)
        softmax_xent_forward_split(c);
    else
        softmax_xent_forward_whole(c);
}

/* dx = dout (p - q) on this call's classes: the label's entry only where it
 * lies among them. */
static void softmax_xent_backward(const struct dl_op_call *c)
{
    const struct softmax_xent_attr *a = c->attr;
    if (!c->din[0])
        return;
    int C = c->in_shape[0].c, k0 = c->sync_max ? c->channel0 : 0;
    double classes = c->saved[(long)c->batch * C];
    dl_real smooth = (dl_real)(a->label_smoothing / classes);
    dl_real on_label = (dl_real)(1 - a->label_smoothing);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *p = c->saved + (long)n * C;
        dl_real *dx = c->din[0] + (long)n * C;
        dl_real g = c->dout[n];
        int y = c->labels[n] - k0;
        for (int k = 0; k < C; k++)
            dx[k] = g * (p[k] - smooth);
        if (y >= 0 && y < C)
            dx[y] -= g * on_label;
    }
}

/* Per class: subtract the maximum, exp, add to the sum, the probability. */
static double softmax_xent_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 4.0 * in[0].c;
}

const struct dl_op_kind dl_op_softmax_xent = {
    .name = "softmax_cross_entropy",
    .summary = "softmax cross-entropy loss of class scores against integer labels, per sample",
    .attr_size = sizeof(struct softmax_xent_attr),
    .attrs = softmax_xent_attrs,
    .n_attrs = (int)(sizeof softmax_xent_attrs / sizeof softmax_xent_attrs[0]),
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = 1,
    .check = softmax_xent_check,
    .infer = softmax_xent_infer,
    .saved_size = softmax_xent_saved_size,
    .forward = softmax_xent_forward,
    .backward = softmax_xent_backward,
    .flops = softmax_xent_flops,
    .split_classes = 1,
};
