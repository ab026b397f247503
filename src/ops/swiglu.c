/* swiglu.c: the gated linear unit of the LLaMA family's MLP (Shazeer 2020,
 * "GLU Variants Improve Transformer"; Hugging Face's LlamaMLP between its
 * projections): out = silu(gate) * up, element-wise over two inputs of one
 * shape (gate, up), silu(g) = g sigmoid(g).  Backward, with s = sigmoid(g):
 *   dgate = dout up s (1 + g (1 - s)),  dup = dout silu(g).
 * Per element in double.  Channels and positions are independent, so a
 * tensor rank's blocks of gate and up (their linears split by outputs) go
 * through it as they are. */
#include "ops/op.h"

#include <math.h>

#include "core/long_loop.h"

static int swiglu_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                        struct dl_error *err)
{
    char a[48], b[48];
    if (!dl_shape_eq(in[0], in[1]))
        return dl_errorf(err, DL_ERR_SPEC, "expected gate and up of one shape, found gate %s and up %s",
                         dl_shape_str(in[0], a, sizeof a), dl_shape_str(in[1], b, sizeof b));
    if (in[0].dtype != DL_F32)
        return dl_errorf(err, DL_ERR_SPEC, "expected features, found %s", dl_shape_str(in[0], a, sizeof a));
    *out = in[0];
    return DL_OK;
}

static inline double sigmoid(double g)
{
    return 1 / (1 + exp(-g));
}

static void swiglu_forward(const struct dl_op_call *c)
{
    const dl_real *g = dl_tensor_const_f32(&c->in[0]), *u = dl_tensor_const_f32(&c->in[1]);
    dl_real *y = dl_tensor_f32(&c->out);
    DL_EACH((long)c->batch * dl_shape_count(c->out.shape),
            y[i] = (dl_real)((double)g[i] * sigmoid((double)g[i]) * (double)u[i]));
}

static void swiglu_backward(const struct dl_op_call *c)
{
    const dl_real *g = dl_tensor_const_f32(&c->in[0]), *u = dl_tensor_const_f32(&c->in[1]);
    const dl_real *dy = dl_tensor_const_f32(&c->dout);
    dl_real *dg = c->din[0].data ? dl_tensor_f32(&c->din[0]) : NULL, *du = c->din[1].data ? dl_tensor_f32(&c->din[1]) : NULL;
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    if (dg)
        DL_EACH(n, double s = sigmoid((double)g[i]);
                dg[i] = (dl_real)((double)dy[i] * (double)u[i] * s * (1 + (double)g[i] * (1 - s))));
    if (du)
        DL_EACH(n, du[i] = (dl_real)((double)dy[i] * (double)g[i] * sigmoid((double)g[i])));
}

/* sigmoid (counted as one), two products */
static double swiglu_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return 3.0 * (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_swiglu = {
    .name = "swiglu",
    .summary = "silu(gate) x up, element-wise over inputs gate and up of one shape (the LLaMA family's MLP)",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = swiglu_infer,
    .forward = swiglu_forward,
    .backward = swiglu_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
    .flops = swiglu_flops,
    .tp.channel_local = 1,
    .tp.row_local = 1,
};
