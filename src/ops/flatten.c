/* flatten.c: reshapes each sample from (C, H, W) to a feature vector
 * (C*H*W, 1, 1).  NCHW is already contiguous per sample, so forward and
 * backward are plain copies; the feature order is c-major, then h, then w
 * (PyTorch's torch.flatten(x, 1)). */
#include "ops/op.h"

#include <string.h>

static int flatten_infer(const void *attr, int n_in, const struct dl_shape *in,
                         struct dl_shape *out, struct dl_error *err)
{
    long n = dl_shape_count(in[0]);
    if (n > 0x7fffffff)
        return dl_errorf(err, DL_ERR_SPEC, "flatten: input %dx%dx%d has %ld elements per sample, "
                         "more than the 2147483647 a feature vector can hold", in[0].c, in[0].h,
                         in[0].w, n);
    *out = (struct dl_shape){(int)n, 1, 1};
    return DL_OK;
}

static void flatten_forward(const struct dl_op_call *c)
{
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    dl_real *y = dl_tensor_f32(&c->out);
    memcpy(y, dl_tensor_const_f32(&c->in[0]), sizeof *y * (size_t)n);
}

static void flatten_backward(const struct dl_op_call *c)
{
    if (!c->din[0].data)
        return;
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    dl_real *dx = dl_tensor_f32(&c->din[0]);
    memcpy(dx, dl_tensor_const_f32(&c->dout), sizeof *dx * (size_t)n);
}

const struct dl_op_kind dl_op_flatten = {
    .name = "flatten",
    .summary = "reshape each sample (C, H, W) into a feature vector of C*H*W values",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = flatten_infer,
    .forward = flatten_forward,
    .backward = flatten_backward,
    .tp.channel_local = 1,
};
