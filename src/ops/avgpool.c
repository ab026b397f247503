/* avgpool.c: 2-D average pooling, y[n,c,oh,ow] = sum over the window of
 * x[n,c,ih,iw] / divisor.  With `kernel`, windows follow pool_geometry.h and
 * the divisor is the window size counted with padding (count_include_pad, but
 * never past the right padding) or without it, as in PyTorch's AvgPool2d.
 * With `output` it is PyTorch's AdaptiveAvgPool2d: output o of O along an axis
 * of length L averages [floor(o*L/O), ceil((o+1)*L/O)).  Layout NCHW. */
#include "ops/op.h"

#include "ops/pool_geometry.h"

struct avgpool_attr {
    struct dl_pool_attr win;
    int count_include_pad;
    int output[2]; /* adaptive output size, 0 = off */
};

static const struct dl_attr_desc avgpool_attrs[] = {
    {"kernel", DL_ATTR_INT2, offsetof(struct avgpool_attr, win.kernel), 0, 0, 1, 65535, NULL,
     "window size; give exactly one of kernel and output"},
    DL_POOL_WINDOW_ATTRS(offsetof(struct avgpool_attr, win)),
    {"count_include_pad", DL_ATTR_BOOL, offsetof(struct avgpool_attr, count_include_pad), 0, 1, 0, 1,
     NULL, "count padded positions in the divisor"},
    {"output", DL_ATTR_INT2, offsetof(struct avgpool_attr, output), 0, 0, 1, 65535, NULL,
     "adaptive pooling (PyTorch AdaptiveAvgPool2d) to this output size; 0 = off"},
};

static int avgpool_check(const void *attr, struct dl_error *err)
{
    const struct avgpool_attr *a = attr;
    int has_kernel = a->win.kernel[0] > 0, has_output = a->output[0] > 0;
    if (has_kernel == has_output)
        return dl_errorf(err, DL_ERR_SPEC, "give exactly one of kernel (fixed windows) and output "
                         "(adaptive pooling), found %s", has_kernel ? "both" : "neither");
    if (has_output && (a->win.stride[0] || a->win.stride[1] || a->win.pad[0] || a->win.pad[1] ||
                       a->win.ceil_mode))
        return dl_errorf(err, DL_ERR_SPEC, "stride, pad and ceil_mode apply to kernel windows, not to "
                         "adaptive pooling with output [%d, %d]", a->output[0], a->output[1]);
    return dl_pool_check(&a->win, err);
}

static int avgpool_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                         struct dl_error *err)
{
    const struct avgpool_attr *a = attr;
    if (a->output[0] > 0) {
        *out = (struct dl_shape){in[0].c, a->output[0], a->output[1]};
        return DL_OK;
    }
    return dl_pool_infer(&a->win, in[0], out, err);
}

/* Window of output o along axis (0 = h, 1 = w) of an input of length L and
 * output of length O: [*lo, *hi) and the divisor's factor for this axis. */
static int avgpool_window(const struct avgpool_attr *a, int axis, int o, int L, int O, int *lo, int *hi)
{
    if (a->output[0] > 0) {
        dl_pool_adaptive_window(o, L, O, lo, hi);
        return *hi - *lo;
    }
    int padded = dl_pool_window(o, L, a->win.kernel[axis], dl_pool_stride(&a->win, axis),
                                a->win.pad[axis], lo, hi);
    return a->count_include_pad ? padded : *hi - *lo;
}

static void avgpool_forward(const struct dl_op_call *c)
{
    const struct avgpool_attr *a = c->attr;
    int H = c->in[0].shape.h, W = c->in[0].shape.w;
    int OH = c->out.shape.h, OW = c->out.shape.w;
    long planes = (long)c->batch * c->out.shape.c;
    /* Each (n, c) plane is independent. */
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + p * H * W;
        dl_real *y = dl_tensor_f32(&c->out) + p * OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            int h0, h1;
            int dh = avgpool_window(a, 0, oh, H, OH, &h0, &h1);
            for (int ow = 0; ow < OW; ow++) {
                int w0, w1;
                int dw = avgpool_window(a, 1, ow, W, OW, &w0, &w1);
                double sum = 0;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        sum += x[ih * W + iw];
                y[oh * OW + ow] = (dl_real)(sum / ((double)dh * dw));
            }
        }
    }
}

/* dx[i] = sum over the windows containing i of dy[o] / divisor[o]. */
static void avgpool_backward(const struct dl_op_call *c)
{
    if (!c->din[0].data)
        return;
    const struct avgpool_attr *a = c->attr;
    int H = c->in[0].shape.h, W = c->in[0].shape.w;
    int OH = c->out.shape.h, OW = c->out.shape.w;
    long planes = (long)c->batch * c->out.shape.c;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        dl_real *dx = dl_tensor_f32(&c->din[0]) + p * H * W;
        const dl_real *dy = dl_tensor_const_f32(&c->dout) + p * OH * OW;
        for (int i = 0; i < H * W; i++)
            dx[i] = 0;
        for (int oh = 0; oh < OH; oh++) {
            int h0, h1;
            int dh = avgpool_window(a, 0, oh, H, OH, &h0, &h1);
            for (int ow = 0; ow < OW; ow++) {
                int w0, w1;
                int dw = avgpool_window(a, 1, ow, W, OW, &w0, &w1);
                dl_real g = (dl_real)(dy[oh * OW + ow] / ((double)dh * dw));
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        dx[ih * W + iw] += g;
            }
        }
    }
}

/* One add per input element of every window, one divide per output. */
static double avgpool_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    const struct avgpool_attr *a = attr;
    double per_channel[2];
    for (int axis = 0; axis < 2; axis++) {
        int L = axis ? in[0].w : in[0].h, O = axis ? out.w : out.h;
        long total = 0;
        for (int o = 0; o < O; o++) {
            int lo, hi;
            avgpool_window(a, axis, o, L, O, &lo, &hi);
            total += hi - lo;
        }
        per_channel[axis] = (double)total;
    }
    return (double)out.c * per_channel[0] * per_channel[1] + (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_avgpool = {
    .name = "avgpool",
    .summary = "2-D average pooling over kernel windows, or adaptive to a fixed output size",
    .attr_size = sizeof(struct avgpool_attr),
    .attrs = avgpool_attrs,
    .n_attrs = sizeof avgpool_attrs / sizeof avgpool_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .check = avgpool_check,
    .infer = avgpool_infer,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .flops = avgpool_flops,
    .tp.channel_local = 1,
};
