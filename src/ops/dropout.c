/* dropout.c: inverted dropout.  Training: out = x * m with m = 1/(1-rate)
 * with probability 1-rate and 0 otherwise, so E[out] = x and inference is
 * the identity.  The mask m (N x C x H x W, the input's layout) is kept in
 * saved[] for backward: din = dout * m (training) or dout (inference).
 * Each mask element is a hash of the call's key and the element's place in
 * the whole mini-batch (sample, then channel, row, column), so any split of
 * the batch or of the channels, and any thread count, draws the same mask
 * as one process. */
#include "ops/eltwise.h"

#include <stddef.h>
#include <string.h>

#include "core/rng.h"

struct dropout_attr {
    double rate;
};

static const struct dl_attr_desc dropout_attrs[] = {
    {.key = "rate", .type = DL_ATTR_FLOAT, .offset = offsetof(struct dropout_attr, rate),
     .def = 0.5, .min = 0, .max = 1,
     .doc = "probability of zeroing an element during training, in [0, 1)"},
};

static int dropout_check(const void *attr, struct dl_error *err)
{
    const struct dropout_attr *a = attr;
    if (a->rate >= 1)
        return dl_errorf(err, DL_ERR_SPEC, "key 'rate': expected a number in [0, 1), found %g "
                         "(rate 1 would drop every element)", a->rate);
    return DL_OK;
}

static long dropout_saved_size(const void *attr, int batch, const struct dl_shape *in,
                               struct dl_shape out)
{
    return (long)batch * dl_shape_count(out);
}

static void dropout_forward(const struct dl_op_call *c)
{
    const struct dropout_attr *a = c->attr;
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    const dl_real *x = dl_tensor_const_f32(&c->in[0]);
    dl_real *y = dl_tensor_f32(&c->out);
    if (!c->training || a->rate == 0) {
        memcpy(y, x, sizeof *y * (size_t)n);
        return;
    }
    /* Keeping an element when u >= rate has probability 1 - rate for u
     * uniform in [0, 1). */
    dl_real *m = c->saved;
    dl_real keep = (dl_real)(1 / (1 - a->rate));
    long per = dl_shape_count(c->out.shape), first = (long)c->channel0 * c->out.shape.h * c->out.shape.w;
    #pragma omp parallel for schedule(static)
    for (int s = 0; s < c->batch; s++) {
        uint64_t sample = dl_rng_hash(c->key, (uint64_t)(c->sample0 + s));
        for (long i = 0; i < per; i++)
            m[s * per + i] = dl_rng_hash_uniform(sample, (uint64_t)(first + i)) >= a->rate ? keep : 0;
    }
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        y[i] = x[i] * m[i];
}

static void dropout_backward(const struct dl_op_call *c)
{
    const struct dropout_attr *a = c->attr;
    if (!c->din[0].data)
        return;
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    const dl_real *dy = dl_tensor_const_f32(&c->dout);
    dl_real *dx = dl_tensor_f32(&c->din[0]);
    if (!c->training || a->rate == 0) {
        memcpy(dx, dy, sizeof *dx * (size_t)n);
        return;
    }
    const dl_real *m = c->saved;
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        dx[i] = dy[i] * m[i];
}

const struct dl_op_kind dl_op_dropout = {
    .name = "dropout",
    .summary = "inverted dropout: in training zero each element with probability rate and "
               "scale the rest by 1/(1-rate); identity in inference",
    .attr_size = sizeof(struct dropout_attr),
    .attrs = dropout_attrs,
    .n_attrs = (int)(sizeof dropout_attrs / sizeof dropout_attrs[0]),
    .min_inputs = 1,
    .max_inputs = 1,
    .check = dropout_check,
    .infer = dl_eltwise_infer,
    .saved_size = dropout_saved_size,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .backward_reads = DL_READS_DECLARED /* its saved mask */,
    .flops = dl_eltwise_flops,
    .micro_batch = 1, /* each sample's mask is its own */
    .tp.channel_local = 1,
};
