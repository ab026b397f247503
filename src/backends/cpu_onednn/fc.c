/* fc.c: the fully connected layer on oneDNN's inner product ("onednn"),
 * forward, backward data and backward weights, each a primitive made once
 * per instance.  The input is taken in the layout it arrives in: plain NCHW,
 * or the nChw8c/nChw16c that oneDNN convolutions and pooling produce (the
 * inner product reads the blocked 4-D source directly, so an fc after them
 * needs no reorder step); a (C,1,1) vector whose blocked memory is the plain
 * one is taken as plain.  The output (N, units) is plain.  The weights stay
 * PyTorch's [units, C*H*W] (features in C,H,W order, i.e. oihw) in the
 * executor's flat vector; oneDNN picks its own weights layout per pass and
 * the shared weighted-primitive plumbing of common.h (struct dl_dnnl_wprim,
 * also the convolution's) reorders them into the workspace per call and
 * accumulates dW and db back into the flat gradient.  Layers for which
 * oneDNN has only its generic "ref" implementation are not supported (on
 * AVX2 oneDNN 2.6 picks "gemm:jit" for every pass and layout). */
#include "backends/cpu_onednn/onednn.h"

#include "backends/cpu_onednn/common.h"

struct fc_descs {
    dnnl_inner_product_desc_t fwd, bd, bw;
    dnnl_memory_desc_t user_w; /* [U, C, H, W] oihw: PyTorch's [U, F] */
};

static int fc_units(const struct dl_layer *l)
{
    return l->out_shape.c;
}

static int fc_bias(const struct dl_layer *l)
{
    return l->n_params > 1;
}

static dnnl_status_t fc_init_descs(const struct dl_layer *l, int mb, enum dl_layout in, struct fc_descs *d)
{
    struct dl_shape s = l->in_shape[0];
    int U = fc_units(l);
    dnnl_memory_desc_t src, w, b, dst;
    dl_dnnl_md(&src, mb, s, in);
    dnnl_dims_t wd = {U, s.c, s.h, s.w}, dd = {mb, U}, bd = {U};
    dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&d->user_w, 4, wd, dnnl_f32, dnnl_oihw);
    dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_nc);
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x);
    const dnnl_memory_desc_t *bias = fc_bias(l) ? &b : NULL;
    dnnl_status_t st = dnnl_inner_product_forward_desc_init(&d->fwd, dnnl_forward_training, &src, &w, bias, &dst);
    if (st == dnnl_success)
        st = dnnl_inner_product_backward_data_desc_init(&d->bd, &src, &w, &dst);
    if (st == dnnl_success)
        st = dnnl_inner_product_backward_weights_desc_init(&d->bw, &src, &w, bias, &dst);
    return st;
}

/* Every pass has an optimised implementation with the input in layout in. */
static int fc_usable(const struct dl_layer *l, enum dl_layout in)
{
    struct fc_descs d;
    if (fc_init_descs(l, 16, in, &d) != dnnl_success)
        return 0;
    const void *descs[3] = {&d.fwd, &d.bd, &d.bw};
    return dl_dnnl_all_jit(descs, 3);
}

static int fc_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) != 2 && fc_usable(l, DL_LAYOUT_PLAIN); /* not per position */
}

/* The input as offered when that is a blocked layout oneDNN handles, else
 * plain; the output plain. */
static void fc_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                       enum dl_layout *out)
{
    enum dl_layout o = offered[0];
    int keep = o != DL_LAYOUT_PLAIN && !dl_layout_same(o, DL_LAYOUT_PLAIN, l->in_shape[0]) && fc_usable(l, o);
    in[0] = keep ? o : DL_LAYOUT_PLAIN;
    *out = DL_LAYOUT_PLAIN;
}

static int fc_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct fc_descs d;
    int rc = dl_dnnl_check(fc_init_descs(l, cfg->mb, cfg->in[0], &d), "inner product descriptor", err);
    return rc ? rc : dl_dnnl_wprim_create(&d.fwd, &d.bd, &d.bw, &d.user_w, fc_bias(l) ? fc_units(l) : 0, inst, err);
}

const struct dl_kernel dl_kernel_onednn_fc = {
    .name = "onednn", .backend = "cpu_onednn", .op = &dl_op_fc,
    .supports = fc_supports, .layouts = fc_layouts,
    .create = fc_create, .destroy = dl_dnnl_wprim_destroy,
    .workspace_bytes = dl_dnnl_wprim_ws, .forward = dl_dnnl_wprim_forward,
    .backward_data = dl_dnnl_wprim_backward_data,
    .backward_weights = dl_dnnl_wprim_backward_weights, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};
