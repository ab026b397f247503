/* conv.c: 2-D convolution (a cross-correlation, as PyTorch's Conv2d),
 *   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g*C/G + c, p*sh - ph + r*dh, q*sw - pw + s*dw]
 * where g = k / (K/G) is filter k's group, c runs over that group's C/G input
 * channels and x is 0 outside the input.  Input (C,H,W) -> output (K,P,Q) with
 * P = (H + 2ph - dh*(R-1) - 1)/sh + 1 (Q alike); weight [K, C/G, R, S], bias [K]. */
#include "ops/op.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "ops/vec.h"

/* Every pass is written with "tap planes": for one input plane and one kernel
 * tap (r,s), the P x Q input values that tap sees, x[p*sh-ph+r*dh, q*sw-pw+s*dw]
 * (one row of the im2col matrix).  Then
 *   forward        y[k]  += w[k,c,r,s] * plane(c,r,s)                for every k
 *   backward data  dx[c] += scatter of sum_k w[k,c,r,s] * dy[k]      (adjoint)
 *   weight grad    dw[k,c,r,s] += dot(dy[k], plane(c,r,s))
 * so the inner loops run over P*Q contiguous values, four taps or four filters
 * per pass.  The planes live in P*Q buffers in saved[] (scratch only: nothing
 * passes from forward to backward): four per sample for the forward, one per
 * sample for backward data, one per chunk for the weight gradient, which is
 * split into CONV_DW_CHUNKS fixed pieces of the C*R*S taps, each summing over
 * the batch in sample order: the split never depends on the number of threads. */
#define CONV_DW_CHUNKS 64

struct conv_attr {
    int filters;
    int kernel[2];   /* {R, S} */
    int stride[2];
    int pad[2];
    int dilation[2];
    int groups;
    int bias;
};

static const struct dl_attr_desc conv_attrs[] = {
    {.key = "filters", .type = DL_ATTR_INT, .offset = offsetof(struct conv_attr, filters),
     .required = 1, .min = 1, .max = 1 << 20,
     .doc = "number of output channels (filters); a multiple of groups"},
    {.key = "kernel", .type = DL_ATTR_INT2, .offset = offsetof(struct conv_attr, kernel),
     .required = 1, .min = 1, .max = 65535, .doc = "kernel size"},
    {.key = "stride", .type = DL_ATTR_INT2, .offset = offsetof(struct conv_attr, stride),
     .def = 1, .min = 1, .max = 65535, .doc = "step between output positions"},
    {.key = "pad", .type = DL_ATTR_INT2, .offset = offsetof(struct conv_attr, pad),
     .def = 0, .min = 0, .max = 65535, .doc = "zero padding added on each side"},
    {.key = "dilation", .type = DL_ATTR_INT2, .offset = offsetof(struct conv_attr, dilation),
     .def = 1, .min = 1, .max = 65535,
     .doc = "spacing between kernel taps (1: an ordinary convolution)"},
    {.key = "groups", .type = DL_ATTR_INT, .offset = offsetof(struct conv_attr, groups),
     .def = 1, .min = 1, .max = 1 << 20,
     .doc = "split channels into groups convolved separately; groups = input channels = "
            "filters is a depthwise convolution"},
    {.key = "bias", .type = DL_ATTR_BOOL, .offset = offsetof(struct conv_attr, bias),
     .def = 1, .min = 0, .max = 1, .doc = "learn a bias per filter"},
};

static int conv_check(const void *attr, struct dl_error *err)
{
    const struct conv_attr *a = attr;
    if (a->filters % a->groups != 0)
        return dl_errorf(err, DL_ERR_SPEC, "key 'filters': expected a multiple of groups %d, found %d",
                         a->groups, a->filters);
    return DL_OK;
}

/* Output length along one axis: padded input minus the dilated kernel's span,
 * in strides, plus one; <= 0 when the span does not fit. */
static long conv_out_len(int in, int k, int s, int p, int d)
{
    long span = (long)d * (k - 1) + 1;
    long padded = (long)in + 2L * p;
    return padded < span ? 0 : (padded - span) / s + 1;
}

static int conv_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                      struct dl_error *err)
{
    const struct conv_attr *a = attr;
    char buf[48];
    dl_shape_str(in[0], buf, sizeof buf);
    if (in[0].c % a->groups != 0)
        return dl_errorf(err, DL_ERR_SPEC, "input %s has %d channels, not divisible by groups %d",
                         buf, in[0].c, a->groups);
    /* Loop indices stay below the padded size, so it must fit an int. */
    long hp = (long)in[0].h + 2L * a->pad[0], wp = (long)in[0].w + 2L * a->pad[1];
    if (hp > INT_MAX || wp > INT_MAX)
        return dl_errorf(err, DL_ERR_SPEC, "input %s padded by [%d, %d] is too large", buf,
                         a->pad[0], a->pad[1]);
    long oh = conv_out_len(in[0].h, a->kernel[0], a->stride[0], a->pad[0], a->dilation[0]);
    long ow = conv_out_len(in[0].w, a->kernel[1], a->stride[1], a->pad[1], a->dilation[1]);
    if (oh < 1 || ow < 1)
        return dl_errorf(err, DL_ERR_SPEC,
                         "output would be %ldx%ld: input %s padded by [%d, %d] is %ldx%ld, smaller than "
                         "kernel [%d, %d] with dilation [%d, %d], which spans %ldx%ld",
                         oh, ow, buf, a->pad[0], a->pad[1], hp, wp, a->kernel[0], a->kernel[1],
                         a->dilation[0], a->dilation[1], (long)a->dilation[0] * (a->kernel[0] - 1) + 1,
                         (long)a->dilation[1] * (a->kernel[1] - 1) + 1);
    *out = (struct dl_shape){a->filters, (int)oh, (int)ow};
    return DL_OK;
}

static int conv_params(const void *attr, const struct dl_shape *in, struct dl_shape out, struct dl_param_desc *p)
{
    const struct conv_attr *a = attr;
    if (!p)
        return a->bias ? 2 : 1;
    int K = a->filters, Cg = in[0].c / a->groups, R = a->kernel[0], S = a->kernel[1];
    long fan_in = (long)Cg * R * S;
    p[0] = (struct dl_param_desc){.name = "weight", .count = K * fan_in, .ndim = 4, .dims = {K, Cg, R, S},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = fan_in, .trainable = 1};
    if (!a->bias)
        return 1;
    p[1] = (struct dl_param_desc){.name = "bias", .count = K, .ndim = 1, .dims = {K},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = fan_in, .trainable = 1};
    return 2;
}

static long conv_dw_chunks(long taps)
{
    return taps < CONV_DW_CHUNKS ? taps : CONV_DW_CHUNKS;
}

/* Four plane buffers per sample (forward) or one per weight-gradient chunk,
 * whichever is more. */
static long conv_saved_size(const void *attr, int batch, const struct dl_shape *in,
                            struct dl_shape out)
{
    const struct conv_attr *a = attr;
    long chunks = conv_dw_chunks((long)in[0].c * a->kernel[0] * a->kernel[1]);
    return (4L * batch > chunks ? 4L * batch : chunks) * ((long)out.h * out.w);
}

static double conv_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    const struct conv_attr *a = attr;
    double macs = (double)dl_shape_count(out) * (in[0].c / a->groups) * a->kernel[0] * a->kernel[1];
    return 2 * macs + (a->bias ? (double)dl_shape_count(out) : 0);
}

/* ---------------------------------------------------------------- geometry */
struct conv_geom {
    int C, H, W;    /* input */
    int K, P, Q;    /* output */
    int R, S;       /* kernel */
    int sh, sw, ph, pw, dh, dw;
    int Cg, Kg;     /* input channels and filters per group */
    long HW, PQ;
};

static struct conv_geom conv_geom(const struct dl_op_call *c)
{
    const struct conv_attr *a = c->attr;
    struct dl_shape i = c->in[0].shape, o = c->out.shape;
    return (struct conv_geom){
        .C = i.c, .H = i.h, .W = i.w, .K = o.c, .P = o.h, .Q = o.w,
        .R = a->kernel[0], .S = a->kernel[1], .sh = a->stride[0], .sw = a->stride[1],
        .ph = a->pad[0], .pw = a->pad[1], .dh = a->dilation[0], .dw = a->dilation[1],
        .Cg = i.c / a->groups, .Kg = o.c / a->groups,
        .HW = (long)i.h * i.w, .PQ = (long)o.h * o.w,
    };
}

/* Index of w[k, cl, r, s] in the [K, C/G, R, S] weight (cl within the group). */
static inline long conv_widx(const struct conv_geom *g, int k, int cl, int r, int s)
{
    return (((long)k * g->Cg + cl) * g->R + r) * g->S + s;
}

/* Along one axis, the outputs o in [*lo, *hi) whose input coordinate
 * o*stride + off (off = tap*dilation - pad) lies inside [0, in). */
static void tap_range(int in, int out, int stride, int off, int *lo, int *hi)
{
    int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int h = in - 1 - off < 0 ? 0 : (in - 1 - off) / stride + 1;
    *lo = l < out ? l : out;
    *hi = h < out ? h : out;
    if (*hi < *lo)
        *hi = *lo;
}

/* Tap (r,s) sees the input plane unchanged: stride 1, no shift, same size
 * (every 1x1 stride-1 unpadded convolution; the centre tap of a "same" one). */
static int tap_is_identity(const struct conv_geom *g, int r, int s)
{
    return g->sh == 1 && g->sw == 1 && r * g->dh == g->ph && s * g->dw == g->pw && g->P == g->H &&
           g->Q == g->W;
}

/* The P x Q plane tap (r,s) sees in input plane x (H x W), zeros where it
 * looks into the padding.  Returns x itself when the tap is the identity,
 * otherwise fills buf (P*Q) and returns it. */
static const dl_real *tap_plane(const struct conv_geom *g, const dl_real *x, int r, int s, dl_real *buf)
{
    if (tap_is_identity(g, r, s))
        return x;
    int offh = r * g->dh - g->ph, offw = s * g->dw - g->pw;
    int p0, p1, q0, q1;
    tap_range(g->H, g->P, g->sh, offh, &p0, &p1);
    tap_range(g->W, g->Q, g->sw, offw, &q0, &q1);
    memset(buf, 0, sizeof *buf * (size_t)p0 * (size_t)g->Q);
    for (int p = p0; p < p1; p++) {
        const dl_real *xr = x + (long)(p * g->sh + offh) * g->W; /* input row */
        dl_real *row = buf + (long)p * g->Q;
        memset(row, 0, sizeof *row * (size_t)q0);
        if (g->sw == 1)
            memcpy(row + q0, xr + q0 + offw, sizeof *row * (size_t)(q1 - q0));
        else
            for (int q = q0; q < q1; q++)
                row[q] = xr[(long)q * g->sw + offw];
        memset(row + q1, 0, sizeof *row * (size_t)(g->Q - q1));
    }
    memset(buf + (long)p1 * g->Q, 0, sizeof *buf * (size_t)(g->P - p1) * (size_t)g->Q);
    return buf;
}

/* The adjoint of tap_plane: adds each plane value back onto the input
 * position it was read from (the padding's share is dropped). */
static void tap_plane_add(const struct conv_geom *g, dl_real *x, int r, int s, const dl_real *plane)
{
    int offh = r * g->dh - g->ph, offw = s * g->dw - g->pw;
    int p0, p1, q0, q1;
    tap_range(g->H, g->P, g->sh, offh, &p0, &p1);
    tap_range(g->W, g->Q, g->sw, offw, &q0, &q1);
    for (int p = p0; p < p1; p++) {
        dl_real *xr = x + (long)(p * g->sh + offh) * g->W;
        const dl_real *row = plane + (long)p * g->Q;
        for (int q = q0; q < q1; q++)
            xr[(long)q * g->sw + offw] += row[q];
    }
}

/* ---------------------------------------------------------------- passes */
static void conv_forward(const struct dl_op_call *c)
{
    const struct conv_attr *a = c->attr;
    const struct conv_geom g = conv_geom(c);
    const int RS = g.R * g.S;
    const dl_real *w = c->param[0], *b = a->bias ? c->param[1] : NULL;
    /* Samples are independent; sample n uses plane buffers 4n..4n+3.  Each
     * output starts at the bias and adds the taps in (c, r, s) order, four
     * taps per pass over the output plane. */
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (long)n * g.C * g.HW;
        dl_real *y = dl_tensor_f32(&c->out) + (long)n * g.K * g.PQ;
        dl_real *buf = c->saved + 4L * n * g.PQ;
        for (int k = 0; k < g.K; k++)
            for (long i = 0; i < g.PQ; i++)
                y[k * g.PQ + i] = b ? b[k] : 0;
        for (int ci = 0; ci < g.C; ci++) {
            int k0 = ci / g.Cg * g.Kg, cl = ci % g.Cg;
            for (int t0 = 0; t0 < RS; t0 += 4) {
                int nt = RS - t0 < 4 ? RS - t0 : 4;
                const dl_real *t[4];
                for (int j = 0; j < nt; j++)
                    t[j] = tap_plane(&g, x + ci * g.HW, (t0 + j) / g.S, (t0 + j) % g.S, buf + j * g.PQ);
                for (int k = k0; k < k0 + g.Kg; k++) {
                    const dl_real *wk = w + conv_widx(&g, k, cl, 0, 0) + t0; /* taps t0.. of w[k,cl] */
                    if (nt == 4)
                        dl_vec_axpy4(y + k * g.PQ, wk, t, g.PQ);
                    else
                        for (int j = 0; j < nt; j++)
                            dl_vec_axpy(y + k * g.PQ, wk[j], t[j], g.PQ);
                }
            }
        }
    }
}

/* dx[c] = sum over taps of the scattered plane sum_k w[k,c,r,s] * dy[k]: the
 * transpose of the forward, one sample per iteration, four filters per pass
 * over the plane. */
static void conv_backward_data(const struct dl_op_call *c, const struct conv_geom *g)
{
    const dl_real *w = c->param[0];
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *dy = dl_tensor_const_f32(&c->dout) + (long)n * g->K * g->PQ;
        dl_real *dx = dl_tensor_f32(&c->din[0]) + (long)n * g->C * g->HW;
        dl_real *buf = c->saved + (long)n * g->PQ;
        memset(dx, 0, sizeof *dx * (size_t)g->C * (size_t)g->HW);
        for (int ci = 0; ci < g->C; ci++) {
            int k0 = ci / g->Cg * g->Kg, cl = ci % g->Cg, k;
            for (int r = 0; r < g->R; r++)
                for (int s = 0; s < g->S; s++) {
                    /* An identity tap's plane is dx[c] itself. */
                    int direct = tap_is_identity(g, r, s);
                    dl_real *acc = direct ? dx + ci * g->HW : buf;
                    if (!direct)
                        memset(buf, 0, sizeof *buf * (size_t)g->PQ);
                    for (k = k0; k + 4 <= k0 + g->Kg; k += 4) {
                        dl_real wk[4];
                        const dl_real *dyk[4];
                        for (int j = 0; j < 4; j++) {
                            wk[j] = w[conv_widx(g, k + j, cl, r, s)];
                            dyk[j] = dy + (k + j) * g->PQ;
                        }
                        dl_vec_axpy4(acc, wk, dyk, g->PQ);
                    }
                    for (; k < k0 + g->Kg; k++)
                        dl_vec_axpy(acc, w[conv_widx(g, k, cl, r, s)], dy + k * g->PQ, g->PQ);
                    if (!direct)
                        tap_plane_add(g, dx + ci * g->HW, r, s, buf);
                }
        }
    }
}

/* dw[k,c,r,s] += sum_n dot(dy[n,k], plane(n,c,r,s)); db[k] += sum_n,p,q dy[n,k,p,q].
 * Each weight element belongs to one chunk of taps, which sums the samples in
 * order. */
static void conv_backward_params(const struct dl_op_call *c, const struct conv_geom *g)
{
    const struct conv_attr *a = c->attr;
    dl_real *dw = c->dparam[0];
    long taps = (long)g->C * g->R * g->S, chunks = conv_dw_chunks(taps);
    #pragma omp parallel for schedule(static)
    for (long j = 0; j < chunks; j++) {
        dl_real *buf = c->saved + j * g->PQ;
        for (int n = 0; n < c->batch; n++) {
            const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (long)n * g->C * g->HW;
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + (long)n * g->K * g->PQ;
            for (long tap = taps * j / chunks; tap < taps * (j + 1) / chunks; tap++) {
                int ci = (int)(tap / (g->R * g->S)), r = (int)(tap / g->S % g->R), s = (int)(tap % g->S);
                int k0 = ci / g->Cg * g->Kg, cl = ci % g->Cg, k;
                const dl_real *t = tap_plane(g, x + ci * g->HW, r, s, buf);
                for (k = k0; k + 4 <= k0 + g->Kg; k += 4) {
                    const dl_real *dyk[4] = {dy + k * g->PQ, dy + (k + 1) * g->PQ, dy + (k + 2) * g->PQ,
                                             dy + (k + 3) * g->PQ};
                    double sum[4];
                    dl_vec_dot4(sum, dyk, t, g->PQ);
                    for (int i = 0; i < 4; i++)
                        dw[conv_widx(g, k + i, cl, r, s)] += (dl_real)sum[i];
                }
                for (; k < k0 + g->Kg; k++)
                    dw[conv_widx(g, k, cl, r, s)] += (dl_real)dl_vec_dot(dy + k * g->PQ, t, g->PQ);
            }
        }
    }
    if (!a->bias)
        return;
    dl_real *db = c->dparam[1];
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < g->K; k++) {
        double sum = 0;
        for (int n = 0; n < c->batch; n++) {
            const dl_real *dy = dl_tensor_const_f32(&c->dout) + ((long)n * g->K + k) * g->PQ;
            for (long i = 0; i < g->PQ; i++)
                sum += dy[i];
        }
        db[k] += (dl_real)sum;
    }
}

static void conv_backward(const struct dl_op_call *c)
{
    const struct conv_geom g = conv_geom(c);
    if (c->din[0].data)
        conv_backward_data(c, &g);
    conv_backward_params(c, &g);
}

static int conv_tp_split(const void *attr, int by_output, int T, int keep_bias, void *local)
{
    const struct conv_attr *a = attr;
    struct conv_attr *l = local;
    if (a->groups != 1 || (by_output && a->filters % T))
        return -1;
    *l = *a;
    if (by_output)
        l->filters = a->filters / T;
    else
        l->bias = a->bias && keep_bias;
    return 0;
}

/* A band of rows of a stride-1 'same' convolution (output height = input
 * height: 2 pad = dilation (kernel - 1)) needs pad rows of its neighbours
 * on each side, after which it is a convolution without padding in height
 * (width as it was). */
static const char *conv_height_split(const void *attr, struct dl_shape in, void *local, int *halo)
{
    const struct conv_attr *a = attr;
    struct conv_attr *l = local;
    if (a->stride[0] != 1 || 2 * a->pad[0] != a->dilation[0] * (a->kernel[0] - 1))
        return "only stride-1 'same' convolutions are split by height (stride 1 and 2 x pad = dilation x "
               "(kernel - 1) along the height)";
    *l = *a;
    l->pad[0] = 0;
    *halo = a->pad[0];
    return NULL;
}

const struct dl_op_kind dl_op_conv = {
    .name = "conv",
    .summary = "2-D convolution with optional groups, dilation and bias (PyTorch Conv2d)",
    .attr_size = sizeof(struct conv_attr),
    .attrs = conv_attrs,
    .n_attrs = sizeof conv_attrs / sizeof conv_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .micro_batch = 1,
    .autocast_bf16 = 1,
    .check = conv_check,
    .infer = conv_infer,
    .params = conv_params,
    .saved_size = conv_saved_size,
    .forward = conv_forward,
    .backward = conv_backward,
    .flops = conv_flops,
    .tp.tp_split = conv_tp_split,
    .tp.tp_by_samples = 1,
    .tp.height_split = conv_height_split,
};
