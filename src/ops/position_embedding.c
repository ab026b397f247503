/* position_embedding.c: learned position embeddings added to a sequence
 * (GPT-2's wpe): for an input [T, C], y[t, :] = x[t, :] + W[t, :] with the
 * table W [context, C] (rows past T unused), drawn from N(0, 1) as
 * nn.Embedding's.  T may be any length up to `context`; an incremental
 * decoding call's positions start at its position0 (op.h); with document
 * masking (the call's doc_start) position t takes the row of its place in
 * its document.  Backward: the
 * input's gradient is the output's; row t of the table adds up the output
 * gradient of position t over the samples.  Features are stored first
 * (core/shape.h): feature k of position t is x[k T + t]. */
#include "ops/op.h"

#include <stddef.h>

struct position_embedding_attr {
    int context;
};

static const struct dl_attr_desc position_embedding_attrs[] = {
    {.key = "context", .type = DL_ATTR_INT, .offset = offsetof(struct position_embedding_attr, context),
     .required = 1, .min = 1, .max = 1 << 24,
     .doc = "rows of the table: the longest sequence the layer takes (GPT-2: 1024)"},
};

static int position_embedding_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                                    struct dl_error *err)
{
    const struct position_embedding_attr *a = attr;
    char buf[48];
    if (dl_shape_rank(in[0]) != 2 || in[0].dtype != DL_F32)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] of features, found %s",
                         dl_shape_str(in[0], buf, sizeof buf));
    if (in[0].h > a->context)
        return dl_errorf(err, DL_ERR_SPEC, "the input has %d positions but the table has context %d rows",
                         in[0].h, a->context);
    *out = in[0];
    return DL_OK;
}

static int position_embedding_params(const void *attr, const struct dl_shape *in, struct dl_shape out,
                                     struct dl_param_desc *p)
{
    const struct position_embedding_attr *a = attr;
    if (!p)
        return 1;
    p[0] = (struct dl_param_desc){.name = "weight", .count = (long)a->context * in[0].c, .ndim = 2,
                                  .dims = {a->context, in[0].c}, .init = DL_INIT_NORMAL, .fan_in = in[0].c,
                                  .trainable = 1};
    return 1;
}

/* The place of position t of sample n in its window's positions: t, or
 * with document masking its place in its document (op.h's doc_start). */
static long place(const struct dl_op_call *c, long n, long t)
{
    return c->doc_start ? t - c->doc_start[n * c->in[0].shape.h + t] : t;
}

static void position_embedding_forward(const struct dl_op_call *c)
{
    long T = c->in[0].shape.h, C = c->in[0].shape.c;
    const dl_real *w = c->param[0];
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < c->batch; n++)
        for (long k = 0; k < C; k++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (n * C + k) * T;
            dl_real *y = dl_tensor_f32(&c->out) + (n * C + k) * T;
            for (long t = 0; t < T; t++)
                y[t] = x[t] + w[(c->position0 + place(c, n, t)) * C + k];
        }
}

/* Table rows by document place: row p adds up the output gradient of the
 * positions p into their documents, a channel per task, over the samples
 * and positions in order (the same sums on any thread count; summed in
 * dl_real, the rows' sums interleaved). */
static void position_embedding_backward_docs(const struct dl_op_call *c, dl_real *dw)
{
    long T = c->in[0].shape.h, C = c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (long k = 0; k < C; k++)
        for (long n = 0; n < c->batch; n++)
            for (long t = 0; t < T; t++)
                dw[(c->position0 + place(c, n, t)) * C + k] += dl_tensor_const_f32(&c->dout)[(n * C + k) * T + t];
}

static void position_embedding_backward(const struct dl_op_call *c)
{
    long T = c->in[0].shape.h, C = c->in[0].shape.c, count = (long)c->batch * C * T;
    if (c->din[0].data)
        for (long i = 0; i < count; i++)
            dl_tensor_f32(&c->din[0])[i] = dl_tensor_const_f32(&c->dout)[i];
    dl_real *dw = c->dparam[0];
    if (!dw)
        return;
    if (c->doc_start) {
        position_embedding_backward_docs(c, dw);
        return;
    }
    /* per table row, over the samples in order: the same sums on any thread count */
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < T; t++)
        for (long k = 0; k < C; k++) {
            double s = 0;
            for (long n = 0; n < c->batch; n++)
                s += (double)dl_tensor_const_f32(&c->dout)[(n * C + k) * T + t];
            dw[(c->position0 + t) * C + k] += (dl_real)s;
        }
}

static double position_embedding_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_position_embedding = {
    .name = "position_embedding",
    .summary = "a learned vector per position added to a sequence [T, C] (GPT-2's wpe)",
    .attr_size = sizeof(struct position_embedding_attr),
    .attrs = position_embedding_attrs,
    .n_attrs = sizeof position_embedding_attrs / sizeof position_embedding_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .is_embedding = 1,
    .micro_batch = 1,
    .doc_mask = 1,
    .infer = position_embedding_infer,
    .params = position_embedding_params,
    .forward = position_embedding_forward,
    .backward = position_embedding_backward,
    .flops = position_embedding_flops,
};
