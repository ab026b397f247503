/* pool.c: oneDNN pooling kernels for maxpool, avgpool (fixed or uniform
 * adaptive windows) and global_avgpool, forward and backward, in whatever
 * layout the input arrives (nChw8c/nChw16c after a oneDNN convolution).  Max
 * pooling keeps oneDNN's workspace (the winners) from forward to backward in
 * saved.  On NCHW input oneDNN 2.6 only has a generic implementation, about
 * 3x slower than the reference loops (LeNet-5 maxpool1, bench/README.md), so
 * there the instance runs the op's reference forward and backward.  For
 * maxpool the "simd" kernel (cpu_simd) comes first: it is faster in every
 * layout. */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cpu_onednn/common.h"

struct pool_inst {
    struct dl_dnnl_prim fwd, bwd;
    int max;
    const struct dl_layer *plain; /* NCHW: the reference op of this layer */
    size_t plain_saved;
};

static dnnl_alg_kind_t pool_alg(const struct dl_pool_geom *pg)
{
    if (pg->max)
        return dnnl_pooling_max;
    return pg->exclude_pad ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_avg_include_padding;
}

/* PyTorch clips an include-padding divisor at the right padding; oneDNN
 * does not, so avgpool needs the right padding to equal the left.  geom:
 * the geometry of the kernel's op kind (attr.h). */
static int pool_supports(const struct dl_layer *l, dl_pool_geom_fn *geom)
{
    struct dl_pool_geom pg;
    if (!geom(l, &pg) || pg.pr_h < 0 || pg.pr_w < 0)
        return 0;
    if (pool_alg(&pg) == dnnl_pooling_avg_include_padding && (pg.pr_h > pg.ph || pg.pr_w > pg.pw))
        return 0;
    return 1;
}

static void pool_destroy(void *p)
{
    struct pool_inst *q = p;
    if (!q)
        return;
    dl_dnnl_prim_free(&q->fwd);
    dl_dnnl_prim_free(&q->bwd);
    free(q);
}

static int pool_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err, dl_pool_geom_fn *geom)
{
    struct dl_pool_geom pg;
    geom(l, &pg);
    struct pool_inst *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    if (cfg->in[0] == DL_LAYOUT_PLAIN && cfg->dtype == DL_F32) {
        q->plain = l;
        long n = l->kind->saved_size ? l->kind->saved_size(l->attr, cfg->mb, l->in_shape, l->out_shape) : 0;
        q->plain_saved = dl_dtype_size(cfg->dtype) * (size_t)n;
        *inst = q;
        return DL_OK;
    }
    dnnl_alg_kind_t alg = pool_alg(&pg);
    q->max = alg == dnnl_pooling_max;
    dnnl_memory_desc_t src, dst;
    dl_dnnl_md(&src, cfg->mb, dl_dnnl_shape(l->in_shape[0], cfg), cfg->in[0]);
    dl_dnnl_md(&dst, cfg->mb, dl_dnnl_shape(l->out_shape, cfg), cfg->out);
    dnnl_dims_t k = {pg.kh, pg.kw}, s = {pg.sh, pg.sw}, pl = {pg.ph, pg.pw}, pr = {pg.pr_h, pg.pr_w};
    dnnl_pooling_desc_t fd, bd;
    int rc = dl_dnnl_check(dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, alg, &src, &dst, s, k, pl, pr),
                           "pooling descriptor", err);
    if (!rc)
        rc = dl_dnnl_check(dnnl_pooling_backward_desc_init(&bd, alg, &src, &dst, s, k, pl, pr),
                           "pooling backward descriptor", err);
    int fa[] = {DNNL_ARG_SRC, DNNL_ARG_DST, q->max ? DNNL_ARG_WORKSPACE : 0, 0};
    int ba[] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, q->max ? DNNL_ARG_WORKSPACE : 0, 0};
    if (!rc)
        rc = dl_dnnl_prim_init(&q->fwd, &fd, NULL, fa, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&q->bwd, &bd, q->fwd.pd, ba, err);
    if (rc) {
        pool_destroy(q);
        return rc;
    }
    *inst = q;
    return DL_OK;
}

static size_t pool_ws(const void *inst, enum dl_dir dir)
{
    const struct pool_inst *q = inst;
    return dir == DL_DIR_FORWARD ? q->fwd.scratch : dir == DL_DIR_BACKWARD_DATA ? q->bwd.scratch : 0;
}

static size_t pool_saved(const void *inst)
{
    const struct pool_inst *q = inst;
    if (q->plain)
        return q->plain_saved;
    return q->max ? dl_dnnl_prim_bytes(&q->fwd, DNNL_ARG_WORKSPACE) : 0;
}

static void pool_forward(void *inst, const struct dl_kernel_args *a)
{
    struct pool_inst *q = inst;
    if (q->plain) {
        q->plain->kind->forward(&a->c);
        return;
    }
    void *ptr[3] = {dl_tensor_any(&a->c.in[0]), dl_tensor_any(&a->c.out), a->c.saved};
    dl_dnnl_prim_run(&q->fwd, ptr, a->workspace);
}

static void pool_backward(void *inst, const struct dl_kernel_args *a)
{
    struct pool_inst *q = inst;
    if (!a->c.din[0].data)
        return;
    if (q->plain) {
        q->plain->kind->backward(&a->c);
        return;
    }
    void *ptr[3] = {dl_tensor_any(&a->c.dout), dl_tensor_any(&a->c.din[0]), a->c.saved};
    dl_dnnl_prim_run(&q->bwd, ptr, a->workspace);
}

/* One kernel table per pooling kind, with supports and create reading that
 * kind's geometry (GEOM, attr.h). */
#define POOL_KERNEL(SYM, OP, GEOM)                                                               \
    static int SYM##_supports(const struct dl_layer *l)                                          \
    {                                                                                            \
        return pool_supports(l, GEOM);                                                           \
    }                                                                                            \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, \
                            struct dl_error *err)                                                \
    {                                                                                            \
        return pool_create(l, cfg, inst, err, GEOM);                                             \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = "onednn", .backend = "cpu_onednn", .op = &OP, .supports = SYM##_supports,        \
        .layouts = dl_kernel_follow_layouts, .create = SYM##_create, .destroy = pool_destroy,    \
        .workspace_bytes = pool_ws, .saved_bytes = pool_saved, .forward = pool_forward,          \
        .backward_data = pool_backward,                                                          \
    };
POOL_KERNEL(dl_kernel_onednn_maxpool, dl_op_maxpool, dl_maxpool_geom)
POOL_KERNEL(dl_kernel_onednn_avgpool, dl_op_avgpool, dl_avgpool_geom)
POOL_KERNEL(dl_kernel_onednn_global_avgpool, dl_op_global_avgpool, dl_global_avgpool_geom)

/* In bf16, in any layout (a plain input too: oneDNN's pooling, never the
 * f32 reference above). */
#define POOL_KERNEL_BF16(SYM, F32, OP)                                                           \
    static int SYM##_supports(const struct dl_layer *l)                                          \
    {                                                                                            \
        return dl_dnnl_bf16_supports(l) && F32##_supports(l);                                    \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = "onednn-bf16", .backend = "cpu_onednn", .op = &OP, .dtype = DL_BF16,             \
        .supports = SYM##_supports, .layouts = dl_kernel_follow_layouts, .create = F32##_create, \
        .destroy = pool_destroy, .workspace_bytes = pool_ws, .saved_bytes = pool_saved,          \
        .forward = pool_forward, .backward_data = pool_backward,                                 \
    };
POOL_KERNEL_BF16(dl_kernel_onednn_maxpool_bf16, dl_kernel_onednn_maxpool, dl_op_maxpool)
POOL_KERNEL_BF16(dl_kernel_onednn_avgpool_bf16, dl_kernel_onednn_avgpool, dl_op_avgpool)
POOL_KERNEL_BF16(dl_kernel_onednn_global_avgpool_bf16, dl_kernel_onednn_global_avgpool, dl_op_global_avgpool)
