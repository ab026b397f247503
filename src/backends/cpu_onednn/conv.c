/* conv.c: oneDNN convolution kernels, direct ("onednn") and Winograd F(4x4,
 * 3x3) ("onednn-wino"), forward, backward data and backward weights.
 * Activations stay in the layouts oneDNN prefers (nChw16c with AVX-512,
 * nChw8c with AVX2, nchw for a few-channel first layer); the weights live in PyTorch's [K, C/G, R, S]
 * layout in the executor's flat vector, so each call reorders them into the
 * primitive's blocked layout in the workspace, and the weight gradient is
 * reordered back with a sum post-op (accumulating across micro-batches). */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_onednn/common.h"

struct conv_inst {
    struct dl_conv_geom g;
    struct dl_dnnl_prim fwd, bwd_data, bwd_w;
    struct dl_dnnl_prim w_fwd, w_bd, dw_back; /* weight reorders (prim NULL: none needed) */
    float *dbias;                             /* K */
};

/* Descriptors of the three passes for mb samples; src/dst layouts < 0 mean "any". */
struct conv_descs {
    dnnl_convolution_desc_t fwd, bd, bw;
};

static void weights_md(const struct dl_conv_geom *g, dnnl_memory_desc_t *md, int any)
{
    dnnl_format_tag_t tag = any ? dnnl_format_tag_any : g->G > 1 ? dnnl_goihw : dnnl_oihw;
    if (g->G > 1) {
        dnnl_dims_t d = {g->G, g->Kg, g->Cg, g->R, g->S};
        dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32, tag);
    } else {
        dnnl_dims_t d = {g->K, g->C, g->R, g->S};
        dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, tag);
    }
}

static void act_md(dnnl_memory_desc_t *md, int mb, struct dl_shape s, int layout)
{
    if (layout >= 0) {
        dl_dnnl_md(md, mb, s, (enum dl_layout)layout);
    } else {
        dnnl_dims_t d = {mb, s.c, s.h, s.w};
        dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_format_tag_any);
    }
}

static int conv_init_descs(const struct dl_conv_geom *g, dnnl_alg_kind_t alg, int mb, int in_l, int out_l,
                           struct conv_descs *d)
{
    dnnl_memory_desc_t src, dst, w, b;
    act_md(&src, mb, (struct dl_shape){g->C, g->H, g->W}, in_l);
    act_md(&dst, mb, (struct dl_shape){g->K, g->P, g->Q}, out_l);
    weights_md(g, &w, 1);
    dnnl_dims_t bd = {g->K};
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x);
    dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw},
                pr = {g->pr_h, g->pr_w};
    const dnnl_memory_desc_t *bias = g->bias ? &b : NULL;
    dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(&d->fwd, dnnl_forward_training, alg, &src, &w,
                                                                  bias, &dst, strides, dil, pl, pr);
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_backward_data_desc_init(&d->bd, alg, &src, &w, &dst, strides, dil, pl, pr);
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_backward_weights_desc_init(&d->bw, alg, &src, &w, bias, &dst, strides,
                                                                 dil, pl, pr);
    return st;
}

/* The layouts oneDNN picks for this convolution (forward, 16 samples), or
 * -1 when it has no implementation. */
static int conv_pick(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_layout *in, enum dl_layout *out)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    if (g.pr_h < 0 || g.pr_w < 0)
        return -1;
    struct conv_descs d;
    dnnl_primitive_desc_t pd;
    if (conv_init_descs(&g, alg, 16, -1, -1, &d) != dnnl_success || dl_dnnl_pd(&pd, &d.fwd, NULL) != dnnl_success)
        return -1;
    int li = dl_dnnl_layout_of(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 16, l->in_shape[0]);
    int lo = dl_dnnl_layout_of(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), 16, l->out_shape);
    dnnl_primitive_desc_destroy(pd);
    *in = li >= 0 ? (enum dl_layout)li : DL_LAYOUT_PLAIN;
    *out = lo >= 0 ? (enum dl_layout)lo : DL_LAYOUT_PLAIN;
    return 0;
}

/* Usable when every pass has a JIT (not "ref") implementation. */
static int conv_supports_alg(const struct dl_layer *l, dnnl_alg_kind_t alg)
{
    enum dl_layout in, out;
    if (conv_pick(l, alg, &in, &out))
        return 0;
    struct dl_conv_geom g = dl_conv_geom(l);
    struct conv_descs d;
    if (conv_init_descs(&g, alg, 16, in, out, &d) != dnnl_success)
        return 0;
    const void *descs[3] = {&d.fwd, &d.bd, &d.bw};
    dnnl_primitive_desc_t fwd = NULL;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        dnnl_primitive_desc_t pd;
        if (dl_dnnl_pd(&pd, descs[i], fwd) != dnnl_success) {
            ok = 0;
            break;
        }
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        ok = impl && strncmp(impl, "ref", 3) != 0;
        if (i == 0)
            fwd = pd;
        else
            dnnl_primitive_desc_destroy(pd);
    }
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
    return ok;
}

static int conv_supports_direct(const struct dl_layer *l)
{
    return conv_supports_alg(l, dnnl_convolution_direct);
}

static int conv_supports_wino(const struct dl_layer *l)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    if (g.G != 1 || g.R != 3 || g.S != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1)
        return 0;
    return conv_supports_alg(l, dnnl_convolution_winograd);
}

static void conv_layouts_alg(const struct dl_layer *l, dnnl_alg_kind_t alg, enum dl_layout *in, enum dl_layout *out)
{
    if (conv_pick(l, alg, in, out)) {
        in[0] = DL_LAYOUT_PLAIN;
        *out = DL_LAYOUT_PLAIN;
    }
}

static void conv_layouts_direct(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                                enum dl_layout *out)
{
    conv_layouts_alg(l, dnnl_convolution_direct, in, out);
}

static void conv_layouts_wino(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                              enum dl_layout *out)
{
    conv_layouts_alg(l, dnnl_convolution_winograd, in, out);
}

static void conv_destroy(void *p)
{
    struct conv_inst *c = p;
    if (!c)
        return;
    struct dl_dnnl_prim *all[] = {&c->fwd, &c->bwd_data, &c->bwd_w, &c->w_fwd, &c->w_bd, &c->dw_back};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dl_dnnl_prim_free(all[i]);
    free(c->dbias);
    free(c);
}

/* A reorder of the user weights into the layout arg of p wants (none when equal). */
static int weights_reorder(const struct conv_inst *c, const struct dl_dnnl_prim *p, int arg, int to_user,
                           struct dl_dnnl_prim *r, struct dl_error *err)
{
    dnnl_memory_desc_t user;
    weights_md(&c->g, &user, 0);
    const dnnl_memory_desc_t *md = dl_dnnl_prim_md(p, arg);
    if (!to_user && dnnl_memory_desc_equal(md, &user))
        return DL_OK;
    return to_user ? dl_dnnl_reorder_init(r, md, &user, 1, err) : dl_dnnl_reorder_init(r, &user, md, 0, err);
}

static int conv_create_alg(const struct dl_layer *l, const struct dl_kernel_config *cfg, dnnl_alg_kind_t alg,
                           void **inst, struct dl_error *err)
{
    struct conv_inst *c = dl_calloc(1, sizeof *c, err);
    if (!c)
        return DL_ERR_NOMEM;
    c->g = dl_conv_geom(l);
    c->dbias = dl_calloc((size_t)c->g.K, sizeof *c->dbias, err);
    struct conv_descs d;
    int rc = !c->dbias ? DL_ERR_NOMEM
                       : dl_dnnl_check(conv_init_descs(&c->g, alg, cfg->mb, cfg->in[0], cfg->out, &d),
                                       "convolution descriptor", err);
    static const int fa[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, 0};
    static const int da[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC, 0};
    static const int wa[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS, 0};
    int fb[5], wb[5];
    memcpy(fb, fa, sizeof fa);
    memcpy(wb, wa, sizeof wa);
    if (!c->g.bias)
        fb[3] = wb[3] = 0;
    if (!rc)
        rc = dl_dnnl_prim_init(&c->fwd, &d.fwd, NULL, fb, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&c->bwd_data, &d.bd, c->fwd.pd, da, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&c->bwd_w, &d.bw, c->fwd.pd, wb, err);
    if (!rc)
        rc = weights_reorder(c, &c->fwd, DNNL_ARG_WEIGHTS, 0, &c->w_fwd, err);
    if (!rc)
        rc = weights_reorder(c, &c->bwd_data, DNNL_ARG_WEIGHTS, 0, &c->w_bd, err);
    if (!rc)
        rc = weights_reorder(c, &c->bwd_w, DNNL_ARG_DIFF_WEIGHTS, 1, &c->dw_back, err);
    if (rc) {
        conv_destroy(c);
        return rc;
    }
    *inst = c;
    return DL_OK;
}

static int conv_create_direct(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                              struct dl_error *err)
{
    return conv_create_alg(l, cfg, dnnl_convolution_direct, inst, err);
}

static int conv_create_wino(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    return conv_create_alg(l, cfg, dnnl_convolution_winograd, inst, err);
}

/* Workspace of a pass: max(primitive, reorder scratchpads), then the
 * reordered weights. */
static size_t pass_ws(const struct dl_dnnl_prim *p, const struct dl_dnnl_prim *r, int arg)
{
    size_t s = p->scratch > r->scratch ? p->scratch : r->scratch;
    return dl_dnnl_align(s) + dl_dnnl_align(dl_dnnl_prim_bytes(p, arg));
}

static size_t conv_ws(const void *inst, enum dl_dir dir)
{
    const struct conv_inst *c = inst;
    switch (dir) {
    case DL_DIR_FORWARD: return pass_ws(&c->fwd, &c->w_fwd, DNNL_ARG_WEIGHTS);
    case DL_DIR_BACKWARD_DATA: return pass_ws(&c->bwd_data, &c->w_bd, DNNL_ARG_WEIGHTS);
    default: return pass_ws(&c->bwd_w, &c->dw_back, DNNL_ARG_DIFF_WEIGHTS);
    }
}

/* Weights for a pass: the user's, or reordered into the workspace. */
static void *pass_weights(const struct dl_dnnl_prim *p, const struct dl_dnnl_prim *r, const float *user, void *ws)
{
    if (!r->prim)
        return (void *)user;
    size_t s = p->scratch > r->scratch ? p->scratch : r->scratch;
    void *w = (char *)ws + dl_dnnl_align(s);
    void *ptr[2] = {(void *)user, w};
    dl_dnnl_prim_run(r, ptr, ws);
    return w;
}

static void conv_forward(void *inst, const struct dl_kernel_args *a)
{
    struct conv_inst *c = inst;
    void *w = pass_weights(&c->fwd, &c->w_fwd, a->c.param[0], a->workspace);
    void *ptr[4] = {(void *)a->c.in[0], w, a->c.out, c->g.bias ? a->c.param[1] : NULL};
    dl_dnnl_prim_run(&c->fwd, ptr, a->workspace);
}

static void conv_backward_data(void *inst, const struct dl_kernel_args *a)
{
    struct conv_inst *c = inst;
    if (!a->c.din[0])
        return;
    void *w = pass_weights(&c->bwd_data, &c->w_bd, a->c.param[0], a->workspace);
    void *ptr[3] = {(void *)a->c.dout, w, a->c.din[0]};
    dl_dnnl_prim_run(&c->bwd_data, ptr, a->workspace);
}

static void conv_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    struct conv_inst *c = inst;
    size_t s = c->bwd_w.scratch > c->dw_back.scratch ? c->bwd_w.scratch : c->dw_back.scratch;
    void *dw = (char *)a->workspace + dl_dnnl_align(s);
    void *ptr[4] = {(void *)a->c.in[0], (void *)a->c.dout, dw, c->dbias};
    dl_dnnl_prim_run(&c->bwd_w, ptr, a->workspace);
    if (a->c.dparam[0]) {
        void *rp[2] = {dw, a->c.dparam[0]};
        dl_dnnl_prim_run(&c->dw_back, rp, a->workspace);
    }
    if (c->g.bias && a->c.dparam[1])
        for (int k = 0; k < c->g.K; k++)
            a->c.dparam[1][k] += c->dbias[k];
}

#define CONV_KERNEL(SYM, NAME, VARIANT)                                                         \
    const struct dl_kernel SYM = {                                                              \
        .name = NAME, .backend = "cpu_onednn", .op = &dl_op_conv,                               \
        .supports = conv_supports_##VARIANT, .layouts = conv_layouts_##VARIANT,                 \
        .create = conv_create_##VARIANT, .destroy = conv_destroy, .workspace_bytes = conv_ws,   \
        .forward = conv_forward, .backward_data = conv_backward_data,                           \
        .backward_weights = conv_backward_weights,                                              \
    };
CONV_KERNEL(dl_kernel_onednn_conv, "onednn", direct)
CONV_KERNEL(dl_kernel_onednn_conv_wino, "onednn-wino", wino)
