/* global_avgpool.c: global average pooling, y[n,c] = (1/(H*W)) sum_{h,w}
 * x[n,c,h,w].  Input (C,H,W) -> output (C,1,1); backward spreads dy[n,c]
 * evenly over the plane. */
#include "ops/op.h"

static int global_avgpool_infer(const void *attr, int n_in, const struct dl_shape *in,
                                struct dl_shape *out, struct dl_error *err)
{
    *out = (struct dl_shape){in[0].c, 1, 1};
    return DL_OK;
}

static void global_avgpool_forward(const struct dl_op_call *c)
{
    long HW = (long)c->in[0].shape.h * c->in[0].shape.w;
    long planes = (long)c->batch * c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + p * HW;
        double sum = 0;
        for (long i = 0; i < HW; i++)
            sum += x[i];
        dl_tensor_f32(&c->out)[p] = (dl_real)(sum / (double)HW);
    }
}

static void global_avgpool_backward(const struct dl_op_call *c)
{
    if (!c->din[0].data)
        return;
    long HW = (long)c->in[0].shape.h * c->in[0].shape.w;
    long planes = (long)c->batch * c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        dl_real *dx = dl_tensor_f32(&c->din[0]) + p * HW;
        dl_real g = (dl_real)(dl_tensor_const_f32(&c->dout)[p] / (double)HW);
        for (long i = 0; i < HW; i++)
            dx[i] = g;
    }
}

/* One add per input element, one divide per output. */
static double global_avgpool_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return (double)dl_shape_count(in[0]) + out.c;
}

const struct dl_op_kind dl_op_global_avgpool = {
    .name = "global_avgpool",
    .summary = "average of each channel over all positions, (C,H,W) -> (C,1,1)",
    .attr_size = 0,
    .attrs = NULL,
    .n_attrs = 0,
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .infer = global_avgpool_infer,
    .forward = global_avgpool_forward,
    .backward = global_avgpool_backward,
    .flops = global_avgpool_flops,
    .tp.channel_local = 1,
};
