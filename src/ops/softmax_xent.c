/* softmax_xent.c: softmax cross-entropy loss on class scores x (C, 1, 1) and
 * integer labels y: out[n] = -sum_k q_k log softmax(x_n)_k, where the target
 * q = (1 - eps) onehot(y_n) + eps / C (label smoothing as in PyTorch's
 * CrossEntropyLoss; eps = 0 gives -log softmax(x_n)[y_n]).  Output: one loss
 * per sample (1, 1, 1).  Backward: din[n, k] = dout[n] * (p_nk - q_k).
 * Per position: on the scores of a sequence [T, C] (core/shape.h: stored
 * [C][T] per sample) with T labels per sample, the same at every position;
 * positions whose label is ignore_index add nothing, and a sample's sum is
 * divided by the mini-batch's labelled positions per sample
 * (dl_softmax_xent_norm, ops/softmax_xent.h), so that the mean of the
 * per-sample losses over the mini-batch is the mean over its labelled
 * positions, PyTorch's CrossEntropyLoss(ignore_index=..., reduction='mean')
 * over every token; backward divides by it too.  A vector of scores is the
 * case T = 1 (ignored samples then count as positions do).
 * With its classes split over the tensor group (c->sync_max set; op.h), each
 * rank holds the scores of classes [channel0, channel0 + Cl): the maximum is
 * reduced first, then the sums of exponentials, of the target score (0 on
 * the ranks that do not hold it) and of the scores, as Megatron-LM's
 * vocabulary-parallel cross entropy does, and each rank's gradient is its
 * block of p - q. */
#include "ops/softmax_xent.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

struct softmax_xent_attr {
    double label_smoothing;
    int ignore_index;
};

static const struct dl_attr_desc softmax_xent_attrs[] = {
    {.key = "label_smoothing", .type = DL_ATTR_FLOAT,
     .offset = offsetof(struct softmax_xent_attr, label_smoothing), .def = 0, .min = 0, .max = 1,
     .doc = "eps in [0, 1): the target puts 1 - eps on the label and eps evenly over all classes"},
    {.key = "ignore_index", .type = DL_ATTR_INT, .offset = offsetof(struct softmax_xent_attr, ignore_index),
     .def = -100, .min = -1000000, .max = 1000000,
     .doc = "a label with this value is no target: its position counts for nothing, and the loss is the mean over "
            "the mini-batch's other positions (PyTorch's -100; a class id such as a padding token works too)"},
};

/* Positions of the scores: T of a sequence [T, C], else 1. */
static int positions_of(struct dl_shape s)
{
    return dl_shape_rank(s) == 2 ? s.h : 1;
}

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
    if ((in[0].h != 1 || in[0].w != 1) && dl_shape_rank(in[0]) != 2)
        return dl_errorf(err, DL_ERR_SPEC, "softmax_cross_entropy takes a vector of class scores "
                         "(C, 1, 1) or a sequence of them [T, C], found %s: put a flatten or global_avgpool layer "
                         "before it", dl_shape_str(in[0], got, sizeof got));
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
    return (long)batch * in[0].c * positions_of(in[0]) + 1;
}

/* The loss at one position and its probabilities p = exp(x - lse) (stride
 * P apart), from its log-sum-exp, target score and sum of scores. */
static double softmax_xent_finish(const struct dl_op_call *c, const dl_real *x, dl_real *p, int P, double lse,
                                  double target, double xsum, double classes)
{
    const struct softmax_xent_attr *a = c->attr;
    int C = c->in[0].shape.c;
    double eps = a->label_smoothing;
    for (int k = 0; k < C; k++)
        p[(long)k * P] = (dl_real)exp((double)x[(long)k * P] - lse);
    /* With log p_k = x_k - lse and sum_k q_k = 1:
     * -sum_k q_k log p_k = lse - (1 - eps) x_y - eps/C sum_k x_k. */
    return lse - (1 - eps) * target - eps / classes * xsum;
}

double dl_softmax_xent_norm(const struct dl_op_call *c, int ignore_index)
{
    if (c->label_norm > 0)
        return c->label_norm;
    long P = positions_of(c->in[0].shape), labelled = 0;
    for (long i = 0; i < (long)c->batch * P; i++)
        labelled += c->labels[i] != ignore_index;
    return c->batch > 0 ? (double)labelled / c->batch : 0;
}

static int softmax_xent_ignored_label(const void *attr, int *label)
{
    *label = ((const struct softmax_xent_attr *)attr)->ignore_index;
    return 1;
}

static void softmax_xent_forward_whole(const struct dl_op_call *c)
{
    const struct softmax_xent_attr *a = c->attr;
    int C = c->in[0].shape.c, P = positions_of(c->in[0].shape);
    double norm = dl_softmax_xent_norm(c, a->ignore_index);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        double total = 0;
        for (int t = 0; t < P; t++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (long)n * C * P + t;
            dl_real *p = c->saved + (long)n * C * P + t;
            int y = c->labels[(long)n * P + t];
            if (y == a->ignore_index) {
                for (int k = 0; k < C; k++)
                    p[(long)k * P] = 0;
                continue;
            }
            assert(y >= 0 && y < C);
            /* log-sum-exp with the maximum subtracted, so no exp overflows. */
            double xmax = x[0], sum = 0, xsum = 0;
            for (int k = 1; k < C; k++)
                xmax = x[(long)k * P] > xmax ? x[(long)k * P] : xmax;
            for (int k = 0; k < C; k++) {
                sum += exp((double)x[(long)k * P] - xmax);
                xsum += x[(long)k * P];
            }
            total += softmax_xent_finish(c, x, p, P, xmax + log(sum), x[(long)y * P], xsum, C);
        }
        dl_tensor_f32(&c->out)[n] = (dl_real)(norm > 0 ? total / norm : 0);
    }
    c->saved[(long)c->batch * C * P] = (dl_real)C;
}

/* Classes [channel0, channel0 + Cl) here: for each row (sample, position)
 * the maximum over every rank's classes first, then the sums [exp(x - max),
 * x_y, x] and the class count, summed over the ranks; a sample's loss is
 * the mean over its positions with a label, as softmax_xent_forward_whole. */
static void softmax_xent_forward_split(const struct dl_op_call *c)
{
    const struct softmax_xent_attr *a = c->attr;
    int N = c->batch, Cl = c->in[0].shape.c, P = positions_of(c->in[0].shape);
    long rows = (long)N * P;
    double total[N > 0 ? N : 1], classes = Cl, norm = dl_softmax_xent_norm(c, a->ignore_index);
    for (int n = 0; n < N; n++)
        total[n] = 0;
    for (long r0 = 0; r0 < rows; r0 += DL_SPLIT_CLASSES_ROWS) {
        int R = (int)(rows - r0 < DL_SPLIT_CLASSES_ROWS ? rows - r0 : DL_SPLIT_CLASSES_ROWS);
        double xmax[R], sums[3 * R + 1];
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < R; r++) {
            long n = (r0 + r) / P, t = (r0 + r) % P;
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * Cl * P + t;
            double m = x[0];
            for (int k = 1; k < Cl; k++)
                m = x[(long)k * P] > m ? x[(long)k * P] : m;
            xmax[r] = m;
        }
        c->sync_max(c->sync_ctx, xmax, R);
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < R; r++) {
            long n = (r0 + r) / P, t = (r0 + r) % P;
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * Cl * P + t;
            int y = c->labels[r0 + r] - c->channel0;
            double sum = 0, xsum = 0;
            for (int k = 0; k < Cl; k++) {
                sum += exp((double)x[(long)k * P] - xmax[r]);
                xsum += x[(long)k * P];
            }
            sums[r] = sum;
            sums[R + r] = y >= 0 && y < Cl ? x[(long)y * P] : 0;
            sums[2 * R + r] = xsum;
        }
        sums[3 * R] = Cl;
        c->sync_sum(c->sync_ctx, sums, 3 * R + 1);
        classes = sums[3 * R];
        for (int r = 0; r < R; r++) { /* in order: a sample's positions add up as in the whole call */
            long n = (r0 + r) / P, t = (r0 + r) % P;
            dl_real *p = c->saved + n * Cl * P + t;
            int y = c->labels[r0 + r];
            if (y == a->ignore_index) {
                for (int k = 0; k < Cl; k++)
                    p[(long)k * P] = 0;
                continue;
            }
            assert(y >= 0 && y < classes);
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + n * Cl * P + t;
            total[n] += softmax_xent_finish(c, x, p, P, xmax[r] + log(sums[r]), sums[R + r], sums[2 * R + r], classes);
        }
    }
    for (int n = 0; n < N; n++)
        dl_tensor_f32(&c->out)[n] = (dl_real)(norm > 0 ? total[n] / norm : 0);
    c->saved[(long)N * Cl * P] = (dl_real)classes;
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
    if (!c->din[0].data)
        return;
    int C = c->in[0].shape.c, P = positions_of(c->in[0].shape), k0 = c->sync_max ? c->channel0 : 0;
    double classes = c->saved[(long)c->batch * C * P];
    dl_real smooth = (dl_real)(a->label_smoothing / classes);
    dl_real on_label = (dl_real)(1 - a->label_smoothing);
    double norm = dl_softmax_xent_norm(c, a->ignore_index);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const int *labels = c->labels + (long)n * P;
        dl_real g = norm > 0 ? dl_tensor_const_f32(&c->dout)[n] / (dl_real)norm : 0;
        for (int t = 0; t < P; t++) {
            const dl_real *p = c->saved + (long)n * C * P + t;
            dl_real *dx = dl_tensor_f32(&c->din[0]) + (long)n * C * P + t;
            if (labels[t] == a->ignore_index) {
                for (int k = 0; k < C; k++)
                    dx[(long)k * P] = 0;
                continue;
            }
            int y = labels[t] - k0;
            for (int k = 0; k < C; k++)
                dx[(long)k * P] = g * (p[(long)k * P] - smooth);
            if (y >= 0 && y < C)
                dx[(long)y * P] -= g * on_label;
        }
    }
}

/* Per class: subtract the maximum, exp, add to the sum, the probability. */
static double softmax_xent_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 4.0 * in[0].c * positions_of(in[0]);
}

const struct dl_op_kind dl_op_softmax_xent = {
    .name = "softmax_cross_entropy",
    .summary = "softmax cross-entropy loss of class scores against integer labels, per sample (or per position "
               "of a sequence [T, classes], averaged)",
    .attr_size = sizeof(struct softmax_xent_attr),
    .attrs = softmax_xent_attrs,
    .n_attrs = (int)(sizeof softmax_xent_attrs / sizeof softmax_xent_attrs[0]),
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = 1,
    .ignored_label = softmax_xent_ignored_label,
    .check = softmax_xent_check,
    .infer = softmax_xent_infer,
    .saved_size = softmax_xent_saved_size,
    .forward = softmax_xent_forward,
    .backward = softmax_xent_backward,
    .backward_reads = DL_READS_DECLARED /* its saved probabilities and the labels */,
    .flops = softmax_xent_flops,
    .tp.split_classes = 1,
};
