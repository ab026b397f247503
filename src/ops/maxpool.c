/* maxpool.c: 2-D max pooling, y[n,c,oh,ow] = max over the window of
 * x[n,c,ih,iw] (padding counts as -inf; NaN propagates, as in PyTorch).
 * Input (C,H,W) -> output (C,OH,OW), geometry in pool_geometry.h.  Forward
 * saves, per output element, the winner's index ih*W+iw within its input plane
 * (stored as dl_real: exact because infer() limits a plane to 2^24 elements);
 * backward routes each output gradient to that element. */
#include "ops/op.h"

#include "ops/pool_geometry.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAXPOOL_MAX_PLANE (1L << 24) /* largest integer every float holds exactly */

static const struct dl_attr_desc maxpool_attrs[] = {
    {"kernel", DL_ATTR_INT2, offsetof(struct dl_pool_attr, kernel), 1, 0, 1, 65535, NULL,
     "window size"},
    DL_POOL_WINDOW_ATTRS(0),
};

static int maxpool_check(const void *attr, struct dl_error *err)
{
    return dl_pool_check(attr, err);
}

static int maxpool_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                         struct dl_error *err)
{
    if ((long)in[0].h * in[0].w > MAXPOOL_MAX_PLANE) {
        char buf[48];
        return dl_errorf(err, DL_ERR_SPEC, "input %s has %ld elements per channel, more than the "
                         "%ld that maxpool supports", dl_shape_str(in[0], buf, sizeof buf),
                         (long)in[0].h * in[0].w, MAXPOOL_MAX_PLANE);
    }
    return dl_pool_infer(attr, in[0], out, err);
}

static long maxpool_saved_size(const void *attr, int batch, const struct dl_shape *in,
                               struct dl_shape out)
{
    return (long)batch * dl_shape_count(out);
}

/* An integer that orders like the value (NaN above everything), so the
 * window scan below compiles to conditional moves: on real data "is this one
 * larger?" is a coin toss that a branch predictor loses half the time. */
#define NAN_KEY INT64_MAX

static int64_t order_key(dl_real v)
{
    if (isnan(v))
        return NAN_KEY;
    double d = (double)v + 0.0; /* exact for float and double; -0 becomes +0, equal as in "v > m" */
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    uint64_t negative = 0 - (bits >> 63); /* all ones for a negative value */
    return (int64_t)(bits ^ (negative >> 1)); /* negative: reverse the magnitude order */
}

static void maxpool_forward(const struct dl_op_call *c)
{
    const struct dl_pool_attr *a = c->attr;
    int H = c->in[0].shape.h, W = c->in[0].shape.w;
    int OH = c->out.shape.h, OW = c->out.shape.w;
    int sh = dl_pool_stride(a, 0), sw = dl_pool_stride(a, 1);
    long planes = (long)c->batch * c->out.shape.c;
    /* Each (n, c) plane is independent. */
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + p * H * W;
        dl_real *y = dl_tensor_f32(&c->out) + p * OH * OW;
        dl_real *arg = c->saved + p * OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            int h0, h1;
            dl_pool_window(oh, H, a->kernel[0], sh, a->pad[0], &h0, &h1);
            for (int ow = 0; ow < OW; ow++) {
                int w0, w1;
                dl_pool_window(ow, W, a->kernel[1], sw, a->pad[1], &w0, &w1);
                /* Every window holds at least one input element (pad <= kernel/2). */
                long best = (long)h0 * W + w0;
                int64_t top = order_key(x[best]);
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++) {
                        int64_t k = order_key(x[ih * W + iw]);
                        int64_t take = -(int64_t)((k > top) | (k == NAN_KEY)); /* all ones or 0 */
                        best ^= (best ^ ((long)ih * W + iw)) & take;
                        top ^= (top ^ k) & take;
                    }
                y[oh * OW + ow] = x[best];
                arg[oh * OW + ow] = (dl_real)best;
            }
        }
    }
}

static void maxpool_backward(const struct dl_op_call *c)
{
    if (!c->din[0].data)
        return;
    int HW = c->in[0].shape.h * c->in[0].shape.w;
    int OHW = c->out.shape.h * c->out.shape.w;
    long planes = (long)c->batch * c->out.shape.c;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        dl_real *dx = dl_tensor_f32(&c->din[0]) + p * HW;
        const dl_real *dy = dl_tensor_const_f32(&c->dout) + p * OHW;
        const dl_real *arg = c->saved + p * OHW;
        for (int i = 0; i < HW; i++)
            dx[i] = 0;
        /* Overlapping windows may pick the same element: their gradients add. */
        for (int o = 0; o < OHW; o++)
            dx[(long)arg[o]] += dy[o];
    }
}

/* One comparison per input element of every window. */
static double maxpool_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return (double)out.c * dl_pool_window_total(attr, 0, in[0].h, out.h) *
           dl_pool_window_total(attr, 1, in[0].w, out.w);
}

const struct dl_op_kind dl_op_maxpool = {
    .name = "maxpool",
    .summary = "2-D max pooling over kernel windows",
    .attr_size = sizeof(struct dl_pool_attr),
    .attrs = maxpool_attrs,
    .n_attrs = sizeof maxpool_attrs / sizeof maxpool_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .commutes_with_relu = 1,
    .check = maxpool_check,
    .infer = maxpool_infer,
    .saved_size = maxpool_saved_size,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .flops = maxpool_flops,
    .tp.channel_local = 1,
};
