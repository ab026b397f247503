/* embedding.c: a lookup table of vectors (PyTorch nn.Embedding),
 *   y[n, t, :] = W[x[n, t], :]
 * for token ids x (i32, [T]: core/shape.h) below `vocab`; output [T, dim]
 * (stored dim-major per sample: channel c at position t is y[n][c][t]);
 * weight [vocab, dim] drawn from N(0, 1) as PyTorch does.  Backward adds
 * each position's output gradient into its id's row; the ids take no
 * gradient.  An id outside [0, vocab) never reaches it: the data loader
 * checks every id against the graph's limit (graph.h's id_limit).
 * A tensor rank's part (tp_vocab, Megatron-LM's vocabulary-parallel
 * embedding) holds rows [vocab0, vocab0 + vocab) of the whole table: an id
 * among them gives its row, any other zeros, and the parts' outputs are
 * summed over the tensor group; backward adds into its rows only. */
#include "ops/embedding.h"
#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct embedding_attr {
    int vocab;
    int dim;
    int vocab0; /* the whole table's index of row 0 (a tensor rank's part: tp_vocab), not a key */
};

static const struct dl_attr_desc embedding_attrs[] = {
    {.key = "vocab", .type = DL_ATTR_INT, .offset = offsetof(struct embedding_attr, vocab), .required = 1, .min = 1,
     .max = 1 << 24, .doc = "number of token ids (the table's rows); every id of the input is below it"},
    {.key = "dim", .type = DL_ATTR_INT, .offset = offsetof(struct embedding_attr, dim), .required = 1, .min = 1,
     .max = 1 << 20, .doc = "length of each id's vector (the output's features per position)"},
};

long dl_embedding_first_row(const void *attr)
{
    return ((const struct embedding_attr *)attr)->vocab0;
}

static int embedding_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                           struct dl_error *err)
{
    const struct embedding_attr *a = attr;
    char buf[48];
    if (in[0].dtype != DL_I32 || dl_shape_rank(in[0]) != 2 || in[0].c != 1 || in[0].w != 1)
        return dl_errorf(err, DL_ERR_SPEC, "expected token ids [T] (i32), found %s",
                         dl_shape_str(in[0], buf, sizeof buf));
    *out = dl_shape_seq(in[0].h, a->dim, DL_F32);
    return DL_OK;
}

static int embedding_params(const void *attr, const struct dl_shape *in, struct dl_shape out,
                            struct dl_param_desc *p)
{
    const struct embedding_attr *a = attr;
    if (!p)
        return 1;
    p[0] = (struct dl_param_desc){.name = "weight", .count = (long)a->vocab * a->dim, .ndim = 2,
                                  .dims = {a->vocab, a->dim}, .init = DL_INIT_NORMAL, .fan_in = a->dim,
                                  .trainable = 1};
    return 1;
}

static int embedding_id_limit(const void *attr)
{
    return ((const struct embedding_attr *)attr)->vocab;
}

/* Token id of sample n, position t (the input holds i32 ids: shape.h). */
static int32_t id_at(const struct dl_op_call *c, long n, long t)
{
    return dl_tensor_const_i32(&c->in[0])[n * c->in[0].shape.h + t];
}

/* The row of the id at sample n, position t in this table, or -1 (another
 * rank's part holds it). */
static long row_at(const struct dl_op_call *c, long n, long t)
{
    const struct embedding_attr *a = c->attr;
    long r = (long)id_at(c, n, t) - a->vocab0;
    return r >= 0 && r < a->vocab ? r : -1;
}

static void embedding_forward(const struct dl_op_call *c)
{
    const struct embedding_attr *a = c->attr;
    long T = c->in[0].shape.h, C = a->dim;
    const dl_real *w = c->param[0];
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < c->batch; n++)
        for (long t = 0; t < T; t++) {
            long r = row_at(c, n, t);
            dl_real *y = dl_tensor_f32(&c->out) + n * C * T + t;
            for (long k = 0; k < C; k++)
                y[k * T] = r >= 0 ? w[r * C + k] : 0;
        }
}

static void embedding_backward(const struct dl_op_call *c)
{
    const struct embedding_attr *a = c->attr;
    long T = c->in[0].shape.h, C = a->dim;
    dl_real *dw = c->dparam[0];
    if (!dw)
        return;
    /* In sample and position order, so the sums are the same on any thread count. */
    for (long n = 0; n < c->batch; n++)
        for (long t = 0; t < T; t++) {
            long r = row_at(c, n, t);
            if (r < 0)
                continue;
            dl_real *row = dw + r * C;
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + n * C * T + t;
            for (long k = 0; k < C; k++)
                row[k] += dy[k * T];
        }
}

static int embedding_tp_vocab(const void *attr, int T, int t, void *local)
{
    const struct embedding_attr *a = attr;
    struct embedding_attr *l = local;
    if (a->vocab < T)
        return -1;
    *l = *a;
    l->vocab0 = a->vocab0 + (int)((long)t * a->vocab / T);
    l->vocab = (int)((long)(t + 1) * a->vocab / T - (long)t * a->vocab / T);
    return 0;
}

const struct dl_op_kind dl_op_embedding = {
    .name = "embedding",
    .summary = "a vector per token id (PyTorch nn.Embedding): token ids [T] (i32) to [T, dim]",
    .attr_size = sizeof(struct embedding_attr),
    .attrs = embedding_attrs,
    .n_attrs = sizeof embedding_attrs / sizeof embedding_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .is_embedding = 1,
    .micro_batch = 1,
    .id_limit = embedding_id_limit,
    .infer = embedding_infer,
    .params = embedding_params,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS /* the ids */,
    .tp.tp_vocab = embedding_tp_vocab,
};
