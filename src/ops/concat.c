/* concat.c: joins 2..16 inputs along the channel axis.  Inputs (C_i, H, W)
 * give out (C_0 + C_1 + ..., H, W); per sample, input i's C_i*H*W values are
 * one contiguous block of out starting at channel C_0 + ... + C_{i-1}.
 * Backward splits dout into the same blocks. */
#include "ops/op.h"

#include <string.h>

static int concat_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                        struct dl_error *err)
{
    char got[48];
    long channels = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i].h != in[0].h || in[i].w != in[0].w)
            return dl_errorf(err, DL_ERR_SPEC, "concat joins along channels, so every input needs "
                             "input 0's height x width %dx%d; input %d has %dx%d (shape %s)",
                             in[0].h, in[0].w, i, in[i].h, in[i].w,
                             dl_shape_str(in[i], got, sizeof got));
        channels += in[i].c;
    }
    if (channels > 0x7fffffff)
        return dl_errorf(err, DL_ERR_SPEC, "concat: %ld channels in total, more than 2147483647",
                         channels);
    *out = (struct dl_shape){(int)channels, in[0].h, in[0].w};
    return DL_OK;
}

static void concat_forward(const struct dl_op_call *c)
{
    long out_count = dl_shape_count(c->out.shape);
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < c->batch; b++) {
        dl_real *y = dl_tensor_f32(&c->out) + b * out_count;
        for (int i = 0; i < c->n_in; i++) {
            long block = dl_shape_count(c->in[i].shape);
            memcpy(y, dl_tensor_const_f32(&c->in[i]) + b * block, sizeof *y * (size_t)block);
            y += block;
        }
    }
}

static void concat_backward(const struct dl_op_call *c)
{
    long out_count = dl_shape_count(c->out.shape);
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < c->batch; b++) {
        const dl_real *dy = dl_tensor_const_f32(&c->dout) + b * out_count;
        for (int i = 0; i < c->n_in; i++) {
            long block = dl_shape_count(c->in[i].shape);
            if (c->din[i].data)
                memcpy(dl_tensor_f32(&c->din[i]) + b * block, dy, sizeof *dy * (size_t)block);
            dy += block;
        }
    }
}

const struct dl_op_kind dl_op_concat = {
    .name = "concat",
    .summary = "concatenate its inputs along the channel axis; heights and widths must match",
    .min_inputs = 2,
    .max_inputs = DL_MAX_INPUTS,
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
};
