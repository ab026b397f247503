/* add.c: element-wise sum of several tensors (the residual connections of
 * ResNets) with oneDNN's sum primitive, in the layout of the first input
 * (the others are reordered to it by the executor); backward copies the
 * output gradient to every input (padding included, which stays zero).
 * Folds the ReLU after it (kernel.h "Fused ReLU", a ResNet block's last):
 * forward clamps the sum (two inputs, a ResNet's: summed and clamped in one
 * pass of our own; more: in place after oneDNN's sum), backward copies the
 * output gradient masked by out > 0 to the first two inputs in one pass,
 * where the ReLU layer took two and a copy for each. */
#include "backends/cpu_onednn/onednn.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu_onednn/common.h"
#include "backends/cpu_simd/simd.h"

struct add_inst {
    struct dl_dnnl_prim sum;
    int n;
    size_t bytes;      /* one tensor of mb samples */
    long count;        /* its values */
    int relu;          /* a ReLU folded in */
    enum dl_dtype dt;  /* f32 or bf16 */
};

static void add_destroy(void *p)
{
    struct add_inst *q = p;
    if (!q)
        return;
    dl_dnnl_prim_free(&q->sum);
    free(q);
}

static int add_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                      struct dl_error *err)
{
    struct add_inst *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    q->n = l->n_in;
    q->count = (long)cfg->mb * dl_layout_count(cfg->out, l->out_shape);
    q->bytes = dl_dtype_size(cfg->dtype) * (size_t)q->count;
    q->relu = cfg->relu;
    q->dt = cfg->dtype;
    dnnl_memory_desc_t md[DL_MAX_INPUTS];
    float scales[DL_MAX_INPUTS];
    int args[DL_MAX_INPUTS + 2];
    for (int i = 0; i < l->n_in; i++) {
        dl_dnnl_md(&md[i], cfg->mb, dl_dnnl_shape(l->in_shape[i], cfg), cfg->in[i]);
        scales[i] = 1;
        args[i] = DNNL_ARG_MULTIPLE_SRC + i;
    }
    args[l->n_in] = DNNL_ARG_DST;
    args[l->n_in + 1] = 0;
    dnnl_primitive_attr_t attr;
    int rc = dl_dnnl_check(dnnl_primitive_attr_create(&attr), "attributes", err);
    if (!rc) {
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
        memset(&q->sum, 0, sizeof q->sum);
        rc = dl_dnnl_check(dnnl_sum_primitive_desc_create(&q->sum.pd, &md[0], l->n_in, scales, md,
                                                          attr, dl_dnnl_engine()), "sum", err);
        dnnl_primitive_attr_destroy(attr);
    }
    if (!rc)
        rc = dl_dnnl_prim_adopt(&q->sum, args, err);
    if (rc) {
        add_destroy(q);
        return rc;
    }
    *inst = q;
    return DL_OK;
}

static void relu_in_place(void *y, long n, enum dl_dtype dt)
{
    if (dt == DL_BF16)
        dl_simd_relu_inplace_bf16(y, n);
    else
        dl_simd_relu_inplace(y, n);
}

/* dst (and dst2 unless NULL) = dy where y > 0, else 0. */
static void relu_mask(const void *y, const void *dy, void *dst, void *dst2, long n, enum dl_dtype dt)
{
    if (dt == DL_BF16 && dst2)
        dl_simd_relu_mask2_bf16(dst, dst2, dy, y, n);
    else if (dt == DL_BF16)
        dl_simd_relu_mask_bf16(dst, dy, y, n);
    else if (dst2)
        dl_simd_relu_mask2(dst, dst2, dy, y, n);
    else
        dl_simd_relu_mask(dst, dy, y, n);
}

static size_t add_ws(const void *inst, enum dl_dir dir)
{
    const struct add_inst *q = inst;
    return dir == DL_DIR_FORWARD ? q->sum.scratch : 0;
}

static void add_forward(void *inst, const struct dl_kernel_args *a)
{
    struct add_inst *q = inst;
    if (q->relu && q->n == 2) {
        if (q->dt == DL_BF16)
            dl_simd_add_relu_bf16(dl_tensor_bf16(&a->c.out), dl_tensor_const_bf16(&a->c.in[0]),
                                  dl_tensor_const_bf16(&a->c.in[1]), q->count);
        else
            dl_simd_add_relu(dl_tensor_f32(&a->c.out), dl_tensor_const_f32(&a->c.in[0]),
                             dl_tensor_const_f32(&a->c.in[1]), q->count);
        return;
    }
    void *ptr[DL_MAX_INPUTS + 1];
    for (int i = 0; i < q->n; i++)
        ptr[i] = dl_tensor_any(&a->c.in[i]);
    ptr[q->n] = dl_tensor_any(&a->c.out);
    dl_dnnl_prim_run(&q->sum, ptr, a->workspace);
    if (q->relu)
        relu_in_place(dl_tensor_any(&a->c.out), q->count, q->dt);
}

/* Each input's gradient is the output's: copied (in the kernel's dtype),
 * masked by out > 0 under a fused ReLU (the first two wanted in one pass). */
static void add_backward(void *inst, const struct dl_kernel_args *a)
{
    struct add_inst *q = inst;
    void *first = NULL;
    for (int i = 0; i < q->n; i++) {
        if (!a->c.din[i].data)
            continue;
        if (first) {
            memcpy(dl_tensor_any(&a->c.din[i]), first, q->bytes);
        } else if (q->relu) {
            int j = i + 1;
            while (j < q->n && !a->c.din[j].data)
                j++;
            relu_mask(dl_tensor_any(&a->c.out), dl_tensor_const_any(&a->c.dout), dl_tensor_any(&a->c.din[i]),
                      j < q->n ? dl_tensor_any(&a->c.din[j]) : NULL, q->count, q->dt);
            if (j < q->n)
                i = j; /* written too */
        } else {
            memcpy(dl_tensor_any(&a->c.din[i]), dl_tensor_const_any(&a->c.dout), q->bytes);
        }
        first = dl_tensor_any(&a->c.din[i]);
    }
}

const struct dl_kernel dl_kernel_onednn_add = {
    .name = "onednn", .backend = "cpu_onednn", .op = &dl_op_add, .layouts = dl_kernel_follow_layouts, .fuses_relu = 1,
    .create = add_create, .destroy = add_destroy, .workspace_bytes = add_ws, .forward = add_forward,
    .backward_data = add_backward, .backward_reads = DL_READS_DECLARED, /* the output gradient alone */
};

/* In bf16: the sum in f32 inside oneDNN, rounded once. */
const struct dl_kernel dl_kernel_onednn_add_bf16 = {
    .name = "onednn-bf16", .backend = "cpu_onednn", .op = &dl_op_add, .dtype = DL_BF16, .fuses_relu = 1,
    .supports = dl_dnnl_bf16_supports, .layouts = dl_kernel_follow_layouts, .create = add_create,
    .destroy = add_destroy, .workspace_bytes = add_ws, .forward = add_forward, .backward_data = add_backward,
    .backward_reads = DL_READS_DECLARED,
};
