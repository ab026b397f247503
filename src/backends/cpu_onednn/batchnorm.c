/* batchnorm.c: oneDNN batch normalisation, forward (training: batch
 * statistics, then the running statistics updated here with PyTorch's
 * momentum and unbiased variance; inference: the running ones) and backward
 * (input, scale and shift gradients, the latter two added into dparam).  The
 * batch mean and variance go from forward to backward in saved.  Needs the
 * whole batch in one call (whole_batch).  oneDNN computes the statistics and
 * the backward's sums inside one primitive, with no hook to sum them over
 * ranks, so this kernel has no sync_stats: --sync-bn runs another.
 * Not the default: oneDNN 2.6 sums each channel's values in one float
 * register (AVX2), and where many of them are equal (raw images' zero
 * background) the rounding does not average out: the variance was 1-2e-4
 * off at batch 64, gradients 1e-3..1e-2 (issue 18; cpu_simd/batchnorm.c).
 * Both fuse the ReLU after them (kernel.h "Fused ReLU") with oneDNN's
 * fuse_norm_relu: forward clamps the output and keeps a mask in its
 * workspace, which goes to backward in saved after the statistics, and
 * backward masks dout by it: the ReLU layer's two passes over the tensor,
 * and its output, are gone. */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_onednn/common.h"

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR };

struct bn_inst {
    struct dl_dnnl_prim train, infer, bwd;
    int C;
    long M;          /* values per channel in a call */
    double momentum;
    float *dscale;   /* [2C]: scale then shift gradients of the last call */
    size_t mask;     /* with a fused ReLU: bytes of forward's mask for backward (saved, after 2C floats) */
    size_t sink;     /* oneDNN always computes diff_src: bytes of workspace for it when the
                      * input is the network's, which needs no gradient */
};

static void bn_destroy(void *p)
{
    struct bn_inst *b = p;
    if (!b)
        return;
    dl_dnnl_prim_free(&b->train);
    dl_dnnl_prim_free(&b->infer);
    dl_dnnl_prim_free(&b->bwd);
    free(b->dscale);
    free(b);
}

static int bn_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                     struct dl_error *err)
{
    struct bn_inst *b = dl_calloc(1, sizeof *b, err);
    if (!b)
        return DL_ERR_NOMEM;
    b->C = l->in_shape[0].c;
    b->M = (long)cfg->mb * l->in_shape[0].h * l->in_shape[0].w;
    b->momentum = dl_attr_float(l, "momentum");
    b->dscale = dl_calloc(2 * (size_t)b->C, sizeof *b->dscale, err);
    if (l->in[0] == DL_GRAPH_INPUT)
        b->sink = dl_dtype_size(cfg->dtype) * (size_t)cfg->mb * (size_t)dl_layout_count(cfg->in[0], l->in_shape[0]);
    float eps = (float)dl_attr_float(l, "eps");
    dnnl_memory_desc_t md;
    dl_dnnl_md(&md, cfg->mb, dl_dnnl_shape(l->in_shape[0], cfg), cfg->in[0]);
    unsigned ss = dnnl_use_scale | dnnl_use_shift | (cfg->relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t td, id, bd;
    int rc = b->dscale ? DL_OK : DL_ERR_NOMEM;
    if (!rc)
        rc = dl_dnnl_check(dnnl_batch_normalization_forward_desc_init(&td, dnnl_forward_training, &md, eps, ss),
                           "batch normalisation descriptor", err);
    if (!rc)
        rc = dl_dnnl_check(dnnl_batch_normalization_forward_desc_init(&id, dnnl_forward_inference, &md, eps,
                                                                      ss | dnnl_use_global_stats),
                           "batch normalisation descriptor", err);
    if (!rc)
        rc = dl_dnnl_check(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &md, &md, eps, ss),
                           "batch normalisation backward descriptor", err);
    static const int ta[] = {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST, DNNL_ARG_MEAN,
                             DNNL_ARG_VARIANCE, 0};
    static const int ba[] = {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE,
                             DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT, DNNL_ARG_SHIFT, 0};
    static const int tra[] = {DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DST, DNNL_ARG_MEAN,
                              DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE, 0};
    static const int bra[] = {DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST, DNNL_ARG_SCALE,
                              DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT, DNNL_ARG_SHIFT,
                              DNNL_ARG_WORKSPACE, 0};
    if (!rc)
        rc = dl_dnnl_prim_init(&b->train, &td, NULL, cfg->relu ? tra : ta, err);
    if (!rc && cfg->relu)
        b->mask = dl_dnnl_prim_bytes(&b->train, DNNL_ARG_WORKSPACE);
    if (!rc)
        rc = dl_dnnl_prim_init(&b->infer, &id, NULL, ta, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&b->bwd, &bd, b->train.pd, cfg->relu ? bra : ba, err);
    if (rc) {
        bn_destroy(b);
        return rc;
    }
    *inst = b;
    return DL_OK;
}

static size_t bn_ws(const void *inst, enum dl_dir dir)
{
    const struct bn_inst *b = inst;
    size_t f = b->train.scratch > b->infer.scratch ? b->train.scratch : b->infer.scratch;
    return dir == DL_DIR_FORWARD ? f : dir == DL_DIR_BACKWARD_DATA ? dl_dnnl_align(b->bwd.scratch) + b->sink : 0;
}

static size_t bn_saved(const void *inst)
{
    const struct bn_inst *b = inst;
    return 2 * dl_dtype_size(DL_F32) * (size_t)b->C + b->mask;
}

static void bn_forward(void *inst, const struct dl_kernel_args *a)
{
    struct bn_inst *b = inst;
    const struct dl_op_call *c = &a->c;
    float *mean = c->saved, *var = c->saved + b->C;
    float *rm = c->param[BN_RUNNING_MEAN], *rv = c->param[BN_RUNNING_VAR];
    if (!c->training) {
        void *ptr[6] = {dl_tensor_any(&c->in[0]), c->param[BN_WEIGHT], c->param[BN_BIAS], dl_tensor_any(&c->out),
                        rm, rv};
        dl_dnnl_prim_run(&b->infer, ptr, a->workspace);
        return;
    }
    void *ptr[7] = {dl_tensor_any(&c->in[0]), c->param[BN_WEIGHT], c->param[BN_BIAS], dl_tensor_any(&c->out),
                    mean, var, var + b->C};
    dl_dnnl_prim_run(&b->train, ptr, a->workspace);
    double m = b->momentum;
    for (int ch = 0; ch < b->C; ch++) {
        rm[ch] = (float)((1 - m) * rm[ch] + m * mean[ch]);
        if (b->M > 1) /* running variance: unbiased, as in PyTorch */
            rv[ch] = (float)((1 - m) * rv[ch] + m * var[ch] * (double)b->M / (double)(b->M - 1));
    }
}

static void bn_backward(void *inst, const struct dl_kernel_args *a)
{
    struct bn_inst *b = inst;
    const struct dl_op_call *c = &a->c;
    void *din = c->din[0].data ? dl_tensor_any(&c->din[0]) : (char *)a->workspace + dl_dnnl_align(b->bwd.scratch);
    void *ptr[10] = {dl_tensor_any(&c->in[0]), c->saved, c->saved + b->C, dl_tensor_any(&c->dout), c->param[BN_WEIGHT],
                     din, b->dscale, b->dscale + b->C, c->param[BN_BIAS], c->saved + 2 * b->C};
    dl_dnnl_prim_run(&b->bwd, ptr, a->workspace);
    for (int j = BN_WEIGHT; j <= BN_BIAS; j++)
        if (c->dparam[j])
            for (int ch = 0; ch < b->C; ch++)
                c->dparam[j][ch] += b->dscale[j * b->C + ch];
}

const struct dl_kernel dl_kernel_onednn_batchnorm = {
    .name = "onednn", .backend = "cpu_onednn", .op = &dl_op_batchnorm, .whole_batch = 1, .fuses_relu = 1,
    .layouts = dl_dnnl_blocked_layouts, .create = bn_create, .destroy = bn_destroy,
    .workspace_bytes = bn_ws, .saved_bytes = bn_saved, .forward = bn_forward, .backward_data = bn_backward,
};

/* In bf16: bf16 input, output and gradients; statistics, scale, shift and
 * their gradients f32 (oneDNN computes in f32 inside).  The f32 sums'
 * drift above is below bf16's rounding. */
const struct dl_kernel dl_kernel_onednn_batchnorm_bf16 = {
    .name = "onednn-bf16", .backend = "cpu_onednn", .op = &dl_op_batchnorm, .dtype = DL_BF16, .whole_batch = 1,
    .fuses_relu = 1,
    .supports = dl_dnnl_bf16_supports, .layouts = dl_dnnl_blocked_layouts, .create = bn_create,
    .destroy = bn_destroy, .workspace_bytes = bn_ws, .saved_bytes = bn_saved, .forward = bn_forward,
    .backward_data = bn_backward,
};
