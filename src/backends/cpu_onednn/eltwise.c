/* eltwise.c: oneDNN element-wise activations (relu, leaky_relu, sigmoid,
 * tanh, gelu), forward and backward from the saved input, in whatever
 * layout the input arrives; ReLU also in bf16 ("onednn-bf16").  One instance type; each kind's kernel table
 * names its oneDNN algorithm (gelu's follows its `approximate` key). */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_onednn/common.h"

struct elt_inst {
    struct dl_dnnl_prim fwd, bwd;
};

/* leaky_relu's alpha: the slope for negative inputs. */
static float leaky_slope(const struct dl_layer *l)
{
    return (float)dl_attr_float(l, "slope");
}

static void elt_destroy(void *p)
{
    struct elt_inst *q = p;
    if (!q)
        return;
    dl_dnnl_prim_free(&q->fwd);
    dl_dnnl_prim_free(&q->bwd);
    free(q);
}

/* alg and its alpha (alpha_of NULL: 0) are those of the kernel's op kind. */
static int elt_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                      struct dl_error *err, dnnl_alg_kind_t alg, float (*alpha_of)(const struct dl_layer *l))
{
    struct elt_inst *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    float alpha = alpha_of ? alpha_of(l) : 0;
    dnnl_memory_desc_t md;
    dl_dnnl_md(&md, cfg->mb, dl_dnnl_shape(l->in_shape[0], cfg), cfg->in[0]);
    dnnl_eltwise_desc_t fd, bd;
    int rc = dl_dnnl_check(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &md, alpha, 0),
                           "eltwise descriptor", err);
    if (!rc)
        rc = dl_dnnl_check(dnnl_eltwise_backward_desc_init(&bd, alg, &md, &md, alpha, 0),
                           "eltwise backward descriptor", err);
    static const int fa[] = {DNNL_ARG_SRC, DNNL_ARG_DST, 0};
    static const int ba[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, 0};
    if (!rc)
        rc = dl_dnnl_prim_init(&q->fwd, &fd, NULL, fa, err);
    if (!rc)
        rc = dl_dnnl_prim_init(&q->bwd, &bd, q->fwd.pd, ba, err);
    if (rc) {
        elt_destroy(q);
        return rc;
    }
    *inst = q;
    return DL_OK;
}

static size_t elt_ws(const void *inst, enum dl_dir dir)
{
    const struct elt_inst *q = inst;
    return dir == DL_DIR_FORWARD ? q->fwd.scratch : dir == DL_DIR_BACKWARD_DATA ? q->bwd.scratch : 0;
}

static void elt_forward(void *inst, const struct dl_kernel_args *a)
{
    struct elt_inst *q = inst;
    void *ptr[2] = {dl_tensor_any(&a->c.in[0]), dl_tensor_any(&a->c.out)};
    dl_dnnl_prim_run(&q->fwd, ptr, a->workspace);
}

static void elt_backward(void *inst, const struct dl_kernel_args *a)
{
    struct elt_inst *q = inst;
    if (!a->c.din[0].data)
        return;
    void *ptr[3] = {dl_tensor_any(&a->c.in[0]), dl_tensor_any(&a->c.dout), dl_tensor_any(&a->c.din[0])};
    dl_dnnl_prim_run(&q->bwd, ptr, a->workspace);
}

/* One kernel table per activation kind, creating oneDNN's algorithm ALG
 * with alpha ALPHA(l) (NULL: 0). */
#define ELT_KERNEL(SYM, OP, ALG, ALPHA)                                                          \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, \
                            struct dl_error *err)                                                \
    {                                                                                            \
        return elt_create(l, cfg, inst, err, ALG, ALPHA);                                        \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = "onednn", .backend = "cpu_onednn", .op = &OP, .layouts = dl_kernel_follow_layouts, \
        .create = SYM##_create, .destroy = elt_destroy, .workspace_bytes = elt_ws,               \
        .forward = elt_forward, .backward_data = elt_backward,                                   \
        .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, /* oneDNN's backward from src */   \
    };
ELT_KERNEL(dl_kernel_onednn_relu, dl_op_relu, dnnl_eltwise_relu, NULL)
ELT_KERNEL(dl_kernel_onednn_leaky_relu, dl_op_leaky_relu, dnnl_eltwise_relu, leaky_slope)
ELT_KERNEL(dl_kernel_onednn_sigmoid, dl_op_sigmoid, dnnl_eltwise_logistic, NULL)
ELT_KERNEL(dl_kernel_onednn_tanh, dl_op_tanh, dnnl_eltwise_tanh, NULL)

/* ReLU in bf16 (its create is relu's: the dtype comes with the config). */
const struct dl_kernel dl_kernel_onednn_relu_bf16 = {
    .name = "onednn-bf16", .backend = "cpu_onednn", .op = &dl_op_relu, .dtype = DL_BF16,
    .supports = dl_dnnl_bf16_supports, .layouts = dl_kernel_follow_layouts, .create = dl_kernel_onednn_relu_create,
    .destroy = elt_destroy, .workspace_bytes = elt_ws, .forward = elt_forward, .backward_data = elt_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};

static int gelu_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    dnnl_alg_kind_t alg = strcmp(dl_attr_choice(l, "approximate"), "tanh") == 0 ? dnnl_eltwise_gelu_tanh
                                                                                   : dnnl_eltwise_gelu_erf;
    return elt_create(l, cfg, inst, err, alg, NULL);
}

const struct dl_kernel dl_kernel_onednn_gelu = {
    .name = "onednn", .backend = "cpu_onednn", .op = &dl_op_gelu, .layouts = dl_kernel_follow_layouts,
    .create = gelu_create, .destroy = elt_destroy, .workspace_bytes = elt_ws,
    .forward = elt_forward, .backward_data = elt_backward, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};
