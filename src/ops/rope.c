/* rope.c: rotary position embeddings (RoPE, Su et al. 2021; the LLaMA
 * family's positions) on the queries or the keys of a sequence [T, C]: C is
 * heads of head_dim features, and each head's feature i is turned with its
 * feature i + head_dim/2 by the angle p f_i, p the absolute position,
 * f_i = theta^(-2i / head_dim) (Hugging Face's rotate_half convention):
 *   y_i       = x_i cos(p f_i) - x_{i+D/2} sin(p f_i)
 *   y_{i+D/2} = x_{i+D/2} cos(p f_i) + x_i sin(p f_i)
 * With Llama 3's rope_scaling (scaling_factor > 1): frequencies whose wave
 * is longer than original_context / low_freq_factor are divided by the
 * factor, those shorter than original_context / high_freq_factor kept, and
 * those between blended (Hugging Face's _compute_llama3_parameters).
 * Positions are t + the call's position0 (an incremental decoding call's,
 * op.h; 0 otherwise); with document masking (the call's doc_start) t
 * counts from the start of its document (Megatron-LM's reset position
 * ids), the table's columns serving every sample.  Backward turns the gradient back (the transpose):
 *   dx_i = dy_i cos + dy_{i+D/2} sin,  dx_{i+D/2} = dy_{i+D/2} cos - dy_i sin.
 * Whole heads are independent: a tensor rank's block of them (q or k split
 * by heads) turns on its own.  No parameters.  saved: the call's table, cos then sin [D/2][T] (angles in
 * double), written by forward and read by backward.  Features are stored
 * first (core/shape.h): feature k of position t is x[k T + t]. */
#include "ops/op.h"

#include <math.h>
#include <stddef.h>

struct rope_attr {
    int head_dim;
    double theta, scaling_factor, low_freq_factor, high_freq_factor;
    int original_context;
};

static const struct dl_attr_desc rope_attrs[] = {
    {.key = "head_dim", .type = DL_ATTR_INT, .offset = offsetof(struct rope_attr, head_dim), .required = 1,
     .min = 2, .max = 1 << 16, .doc = "features of one head (even): the input's channels are heads of this many"},
    {.key = "theta", .type = DL_ATTR_FLOAT, .offset = offsetof(struct rope_attr, theta), .def = 10000, .min = 1,
     .max = 1e12, .doc = "base of the frequencies theta^(-2i/head_dim) (Hugging Face rope_theta)"},
    {.key = "scaling_factor", .type = DL_ATTR_FLOAT, .offset = offsetof(struct rope_attr, scaling_factor),
     .def = 1, .min = 1, .max = 1e6,
     .doc = "Llama 3's rope_scaling factor: low frequencies divided by it, high ones kept, the band between "
            "blended (1: no scaling)"},
    {.key = "low_freq_factor", .type = DL_ATTR_FLOAT, .offset = offsetof(struct rope_attr, low_freq_factor),
     .def = 1, .min = 1e-6, .max = 1e6,
     .doc = "Llama 3 scaling: waves longer than original_context / this are low frequencies"},
    {.key = "high_freq_factor", .type = DL_ATTR_FLOAT, .offset = offsetof(struct rope_attr, high_freq_factor),
     .def = 4, .min = 1e-6, .max = 1e6,
     .doc = "Llama 3 scaling: waves shorter than original_context / this are high frequencies"},
    {.key = "original_context", .type = DL_ATTR_INT, .offset = offsetof(struct rope_attr, original_context),
     .def = 8192, .min = 1, .max = 1 << 30,
     .doc = "Llama 3 scaling: the context the model was pre-trained at (original_max_position_embeddings)"},
};

static int rope_check(const void *attr, struct dl_error *err)
{
    const struct rope_attr *a = attr;
    if (a->head_dim % 2)
        return dl_errorf(err, DL_ERR_SPEC, "head_dim: expected an even number (features turn in pairs), found %d",
                         a->head_dim);
    if (a->scaling_factor != 1 && !(a->high_freq_factor > a->low_freq_factor))
        return dl_errorf(err, DL_ERR_SPEC, "high_freq_factor: expected more than low_freq_factor (%g), found %g",
                         a->low_freq_factor, a->high_freq_factor);
    return DL_OK;
}

static int rope_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                      struct dl_error *err)
{
    const struct rope_attr *a = attr;
    char buf[48];
    if (dl_shape_rank(in[0]) != 2 || in[0].dtype != DL_F32)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] of features, found %s",
                         dl_shape_str(in[0], buf, sizeof buf));
    if (in[0].c % a->head_dim)
        return dl_errorf(err, DL_ERR_SPEC, "expected features a multiple of head_dim %d (whole heads), found %d",
                         a->head_dim, in[0].c);
    *out = in[0];
    return DL_OK;
}

/* Frequency i of a head (i < head_dim / 2), Llama 3's scaling applied. */
static double rope_frequency(const struct rope_attr *a, int i)
{
    double f = pow(a->theta, -2.0 * i / a->head_dim);
    if (a->scaling_factor == 1)
        return f;
    double wave = 2 * M_PI / f, ctx = a->original_context;
    if (wave < ctx / a->high_freq_factor)
        return f;
    if (wave > ctx / a->low_freq_factor)
        return f / a->scaling_factor;
    double s = (ctx / wave - a->low_freq_factor) / (a->high_freq_factor - a->low_freq_factor);
    return (1 - s) * f / a->scaling_factor + s * f;
}

static long rope_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out)
{
    const struct rope_attr *a = attr;
    return (long)a->head_dim * in[0].h;
}

/* The table of this call's positions: cos [D/2][T], then sin [D/2][T]. */
static void rope_table(const struct rope_attr *a, long T, long position0, dl_real *table)
{
    int half = a->head_dim / 2;
    for (int i = 0; i < half; i++) {
        double f = rope_frequency(a, i);
        for (long t = 0; t < T; t++) {
            double angle = (double)(t + position0) * f;
            table[i * T + t] = (dl_real)cos(angle);
            table[(half + i) * T + t] = (dl_real)sin(angle);
        }
    }
}

/* y = the rotation of x by the table (sign 1), or by its inverse (-1);
 * position t of sample n takes the table's column t - doc[n T + t], its
 * place in its document (doc NULL: t). */
static void rope_turn(const struct rope_attr *a, int batch, long C, long T, const dl_real *table, const int *doc,
                      int sign, const dl_real *x, dl_real *y)
{
    long D = a->head_dim, half = D / 2, heads = C / D;
    #pragma omp parallel for collapse(2) schedule(static)
    for (long n = 0; n < batch; n++)
        for (long h = 0; h < heads; h++)
            for (long i = 0; i < half; i++) {
                long k = (n * C + h * D + i) * T, k2 = k + half * T;
                const dl_real *cs = table + i * T, *sn = table + (half + i) * T;
                for (long t = 0; t < T; t++) {
                    long p = doc ? t - doc[n * T + t] : t;
                    dl_real x1 = x[k + t], x2 = x[k2 + t], s = sign * sn[p];
                    y[k + t] = x1 * cs[p] - x2 * s;
                    y[k2 + t] = x2 * cs[p] + x1 * s;
                }
            }
}

static void rope_forward(const struct dl_op_call *c)
{
    const struct rope_attr *a = c->attr;
    long C = c->in[0].shape.c, T = c->in[0].shape.h;
    rope_table(a, T, c->position0, c->saved);
    rope_turn(a, c->batch, C, T, c->saved, c->doc_start, 1, dl_tensor_const_f32(&c->in[0]), dl_tensor_f32(&c->out));
}

static void rope_backward(const struct dl_op_call *c)
{
    const struct rope_attr *a = c->attr;
    if (c->din[0].data)
        rope_turn(a, c->batch, c->in[0].shape.c, c->in[0].shape.h, c->saved, c->doc_start, -1,
                  dl_tensor_const_f32(&c->dout), dl_tensor_f32(&c->din[0]));
}

/* A tensor rank's block of whole heads turns as the whole does. */
static int rope_channel_group(const void *attr)
{
    return ((const struct rope_attr *)attr)->head_dim;
}

static double rope_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 3.0 * (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_rope = {
    .name = "rope",
    .summary = "rotary position embeddings on the heads of queries or keys (LLaMA's RoPE, Hugging Face's "
               "rotate_half convention, Llama 3 scaling)",
    .attr_size = sizeof(struct rope_attr),
    .attrs = rope_attrs,
    .n_attrs = sizeof rope_attrs / sizeof rope_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .doc_mask = 1,
    .check = rope_check,
    .infer = rope_infer,
    .saved_size = rope_saved_size,
    .forward = rope_forward,
    .backward = rope_backward,
    .backward_reads = DL_READS_DECLARED,
    .flops = rope_flops,
    .tp.channel_group = rope_channel_group,
};
