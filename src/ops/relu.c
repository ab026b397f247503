/* relu.c: rectified linear unit, out = max(x, 0).  No attributes, no
 * parameters; backward passes the gradient where the input was positive. */
#include "ops/op.h"

static int relu_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                      struct dl_error *err)
{
    *out = in[0];
    return DL_OK;
}

static void relu_forward(const struct dl_op_call *c)
{
    long n = (long)c->batch * dl_shape_count(c->out_shape);
    const dl_real *x = c->in[0];
    dl_real *y = c->out;
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}

static void relu_backward(const struct dl_op_call *c)
{
    if (!c->din[0])
        return;
    long n = (long)c->batch * dl_shape_count(c->out_shape);
    const dl_real *x = c->in[0], *dy = c->dout;
    dl_real *dx = c->din[0];
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        dx[i] = x[i] > 0 ? dy[i] : 0;
}

static double relu_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_relu = {
    .name = "relu",
    .summary = "rectified linear unit, max(x, 0)",
    .attr_size = 0,
    .attrs = NULL,
    .n_attrs = 0,
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = relu_infer,
    .forward = relu_forward,
    .backward = relu_backward,
    .flops = relu_flops,
};
