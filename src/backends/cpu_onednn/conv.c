/* conv.c: oneDNN convolution kernels, direct ("onednn") and Winograd F(4x4,
 * 3x3) ("onednn-wino"), forward, backward data and backward weights, and the
 * direct one in bf16 ("onednn-bf16": bf16 activations and gradients, the
 * weights reordered to bf16 for each call, the weight gradient computed in
 * f32 and the bias in f32, where oneDNN has a JIT implementation: CPUs with
 * AVX-512).
 * Activations stay in the layouts oneDNN prefers (nChw16c with AVX-512,
 * nChw8c with AVX2, nchw for a few-channel first layer); the weights live in PyTorch's [K, C/G, R, S]
 * layout in the executor's flat vector, so each call reorders them into the
 * primitive's blocked layout in the workspace, and the weight gradient is
 * reordered back with a sum post-op (accumulating across micro-batches): the
 * instance is a struct dl_dnnl_wprim (common.h), shared with the inner
 * product (fc.c); this file only builds the convolution descriptors. */
#include "backends/cpu_onednn/onednn.h"

#include "backends/attr.h"
#include "backends/cpu_onednn/common.h"

/* Descriptors of the three passes for mb samples; src/dst layouts < 0 mean "any". */
struct conv_descs {
    dnnl_convolution_desc_t fwd, bd, bw;
};

static void weights_md(const struct dl_conv_geom *g, dnnl_memory_desc_t *md, int any, enum dl_dtype dt)
{
    dnnl_format_tag_t tag = any ? dnnl_format_tag_any : g->G > 1 ? dnnl_goihw : dnnl_oihw;
    if (g->G > 1) {
        dnnl_dims_t d = {g->G, g->Kg, g->Cg, g->R, g->S};
        dnnl_memory_desc_init_by_tag(md, 5, d, dl_dnnl_type(dt), tag);
    } else {
        dnnl_dims_t d = {g->K, g->C, g->R, g->S};
        dnnl_memory_desc_init_by_tag(md, 4, d, dl_dnnl_type(dt), tag);
    }
}

static void act_md(dnnl_memory_desc_t *md, int mb, struct dl_shape s, int layout)
{
    if (layout >= 0) {
        dl_dnnl_md(md, mb, s, (enum dl_layout)layout);
    } else {
        dnnl_dims_t d = {mb, s.c, s.h, s.w};
        dnnl_memory_desc_init_by_tag(md, 4, d, dl_dnnl_type(s.dtype), dnnl_format_tag_any);
    }
}

/* bwd_in_l: the backward passes' src layout (in_l, or -1 to let them pick).
 * dt: the activations' dtype (and of the weights forward and backward data
 * read); the weight gradient and the bias are f32. */
static int conv_init_descs(const struct dl_conv_geom *g, dnnl_alg_kind_t alg, enum dl_dtype dt, int mb, int in_l,
                           int out_l, int bwd_in_l, struct conv_descs *d)
{
    dnnl_memory_desc_t src, bsrc, dst, w, dw, b;
    act_md(&src, mb, (struct dl_shape){g->C, g->H, g->W, .dtype = dt}, in_l);
    act_md(&bsrc, mb, (struct dl_shape){g->C, g->H, g->W, .dtype = dt}, bwd_in_l);
    act_md(&dst, mb, (struct dl_shape){g->K, g->P, g->Q, .dtype = dt}, out_l);
    weights_md(g, &w, 1, dt);
    weights_md(g, &dw, 1, DL_F32);
    dnnl_dims_t bd = {g->K};
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x);
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw},
                pr = {g->pr_h, g->pr_w};
    const dnnl_memory_desc_t *bias = g->bias ? &b : NULL;
    dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(&d->fwd, dnnl_forward_training, alg, &src, &w,
                                                                  bias, &dst, strides, dil, pl, pr);
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_backward_data_desc_init(&d->bd, alg, &bsrc, &w, &dst, strides, dil, pl, pr);
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_backward_weights_desc_init(&d->bw, alg, &bsrc, &dw, bias, &dst, strides,
                                                                 dil, pl, pr);
    return st;
}

/* The layouts oneDNN picks for this convolution (forward, 16 samples), or
 * -1 when it has no implementation. */
static int conv_pick(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_dtype dt, enum dl_layout *in,
                     enum dl_layout *out)
{
    /* A negative right padding (stride larger than what the last window
     * needs, as in ResNet's 1x1 stride-2 shortcuts) is fine with oneDNN: it
     * drops the input's last rows. */
    struct dl_conv_geom g = dl_conv_geom(l);
    struct conv_descs d;
    dnnl_primitive_desc_t pd;
    if (conv_init_descs(&g, alg, dt, 16, -1, -1, -1, &d) != dnnl_success ||
        dl_dnnl_pd(&pd, &d.fwd, NULL) != dnnl_success)
        return -1;
    struct dl_shape in_s = l->in_shape[0], out_s = l->out_shape;
    in_s.dtype = out_s.dtype = dt;
    int li = dl_dnnl_layout_of(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 16, in_s);
    int lo = dl_dnnl_layout_of(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), 16, out_s);
    dnnl_primitive_desc_destroy(pd);
    *in = li >= 0 ? (enum dl_layout)li : DL_LAYOUT_PLAIN;
    *out = lo >= 0 ? (enum dl_layout)lo : DL_LAYOUT_PLAIN;
    return 0;
}

/* Whether every pass that runs has a JIT (not "ref") implementation with the
 * backward passes on the input layout of forward's (0), only with one of
 * their own (1; they then reorder the input in their workspace: a
 * few-channel layer such as LeNet's 6 -> 16, whose forward is JIT only on
 * NCHW input and whose backward only on blocked), or not at all (-1).
 * Backward data never runs on a layer that reads the network's input (no
 * gradient flows there), which lets the first convolution of an image
 * network (3 channels, NCHW in, blocked out) run on oneDNN.  Their own
 * layout pads the channels to a block: not used below 4 channels (LeNet's
 * 1-channel first layer would do 8x the work; the im2col kernel serves it). */
static int conv_bwd_src(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_dtype dt)
{
    enum dl_layout in, out;
    if (conv_pick(l, alg, dt, &in, &out))
        return -1;
    struct dl_conv_geom g = dl_conv_geom(l);
    int n = l->in[0] == DL_GRAPH_INPUT ? 2 : 3;
    for (int own = 0; own < 2; own++) {
        struct conv_descs d;
        if (own && (in != DL_LAYOUT_PLAIN || g.C < 4))
            break;
        if (conv_init_descs(&g, alg, dt, 16, in, out, own ? -1 : (int)in, &d) != dnnl_success)
            return -1;
        const void *descs[3] = {&d.fwd, &d.bw, &d.bd};
        if (dl_dnnl_all_jit(descs, n))
            return own;
    }
    return -1;
}

static int conv_supports_alg(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_dtype dt)
{
    return conv_bwd_src(l, alg, dt) >= 0;
}

static int conv_supports_direct(const struct dl_layer *l)
{
    return conv_supports_alg(l, dnnl_convolution_direct, DL_F32);
}

static int conv_supports_bf16(const struct dl_layer *l)
{
    return conv_supports_alg(l, dnnl_convolution_direct, DL_BF16);
}

static int conv_supports_wino(const struct dl_layer *l)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    if (g.G != 1 || g.R != 3 || g.S != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1)
        return 0;
    return conv_supports_alg(l, dnnl_convolution_winograd, DL_F32);
}

static void conv_layouts_alg(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_dtype dt, enum dl_layout *in,
                             enum dl_layout *out)
{
    if (conv_pick(l, alg, dt, in, out)) {
        in[0] = DL_LAYOUT_PLAIN;
        *out = DL_LAYOUT_PLAIN;
    }
}

static void conv_layouts_direct(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                                enum dl_layout *out)
{
    conv_layouts_alg(l, dnnl_convolution_direct, DL_F32, in, out);
}

static void conv_layouts_bf16(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                              enum dl_layout *out)
{
    conv_layouts_alg(l, dnnl_convolution_direct, DL_BF16, in, out);
}

static void conv_layouts_wino(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                              enum dl_layout *out)
{
    conv_layouts_alg(l, dnnl_convolution_winograd, DL_F32, in, out);
}

static int conv_create_alg(const struct dl_layer *l, const struct dl_kernel_config *cfg, dnnl_alg_kind_t alg,
                           enum dl_dtype dt, void **inst, struct dl_error *err)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    struct conv_descs d;
    dnnl_memory_desc_t user;
    weights_md(&g, &user, 0, DL_F32);
    int own = conv_bwd_src(l, alg, dt) == 1 && cfg->in[0] == DL_LAYOUT_PLAIN;
    int rc = dl_dnnl_check(conv_init_descs(&g, alg, dt, cfg->mb, cfg->in[0], cfg->out, own ? -1 : (int)cfg->in[0], &d),
                           "convolution descriptor", err);
    return rc ? rc : dl_dnnl_wprim_create(&d.fwd, &d.bd, &d.bw, &user, g.bias ? g.K : 0, inst, err);
}

static int conv_create_direct(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                              struct dl_error *err)
{
    return conv_create_alg(l, cfg, dnnl_convolution_direct, DL_F32, inst, err);
}

static int conv_create_bf16(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    return conv_create_alg(l, cfg, dnnl_convolution_direct, DL_BF16, inst, err);
}

static int conv_create_wino(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    return conv_create_alg(l, cfg, dnnl_convolution_winograd, DL_F32, inst, err);
}

#define CONV_KERNEL(SYM, NAME, VARIANT, DTYPE)                                                  \
    const struct dl_kernel SYM = {                                                              \
        .name = NAME, .backend = "cpu_onednn", .op = &dl_op_conv, .dtype = DTYPE,               \
        .supports = conv_supports_##VARIANT, .layouts = conv_layouts_##VARIANT,                 \
        .create = conv_create_##VARIANT, .destroy = dl_dnnl_wprim_destroy,                      \
        .workspace_bytes = dl_dnnl_wprim_ws, .forward = dl_dnnl_wprim_forward,                  \
        .backward_data = dl_dnnl_wprim_backward_data,                                           \
        .backward_weights = dl_dnnl_wprim_backward_weights,                                     \
    };
CONV_KERNEL(dl_kernel_onednn_conv, "onednn", direct, DL_F32)
CONV_KERNEL(dl_kernel_onednn_conv_wino, "onednn-wino", wino, DL_F32)
CONV_KERNEL(dl_kernel_onednn_conv_bf16, "onednn-bf16", bf16, DL_BF16)
