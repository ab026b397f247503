/* reference_bf16.c: the plain bf16 kernel, "reference-bf16": a layer whose
 * kind is on PyTorch autocast's lower-precision list (op.h's autocast_bf16:
 * fc, conv) computed at bf16's rounding points through the op's f32
 * reference code.  Its inputs, output and their gradients are bf16
 * (kernel.h "Dtypes"); each call widens them (exactly) into f32 in the
 * workspace, rounds the f32 master weights (the first parameter) to bf16
 * there, keeps the bias f32 (as oneDNN's bf16 primitives add it), runs the
 * op's reference (every product of two bf16 values is exact in f32; the
 * sums are the reference's, in double) and rounds the output, or the input
 * gradients, to bf16 to nearest even.  Weight gradients are accumulated in
 * f32 into the master weights' gradients.  It is the ground truth for fast
 * bf16 kernels, the path on a CPU without native bf16, and what exercises
 * the executor's casts. */
#include "backends/reference/reference.h"

#include <stdlib.h>
#include <string.h>

struct bf16_inst {
    const struct dl_layer *l;
    int mb;
    long in_count[DL_MAX_INPUTS], out_count, param_count; /* values for mb samples; every parameter */
};

static int bf16_supports(const struct dl_layer *l)
{
    return l->kind->autocast_bf16;
}

static int bf16_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct bf16_inst *r = dl_calloc(1, sizeof *r, err);
    if (!r)
        return DL_ERR_NOMEM;
    r->l = l;
    r->mb = cfg->mb;
    for (int k = 0; k < l->n_in; k++)
        r->in_count[k] = (long)cfg->mb * dl_shape_count(l->in_shape[k]);
    r->out_count = (long)cfg->mb * dl_shape_count(l->out_shape);
    for (int j = 0; j < l->n_params; j++)
        r->param_count += l->param[j].count;
    *inst = r;
    return DL_OK;
}

static void bf16_destroy(void *inst)
{
    free(inst);
}

static long inputs_count(const struct bf16_inst *r)
{
    long n = 0;
    for (int k = 0; k < r->l->n_in; k++)
        n += r->in_count[k];
    return n;
}

/* The widened call's array of parameter pointers, first in the workspace
 * (64-byte multiples, so the floats after it stay aligned). */
static size_t pointers_bytes(const struct bf16_inst *r)
{
    return ((size_t)r->l->n_params * sizeof(dl_real *) + 63) / 64 * 64;
}

/* Forward: the parameter pointers, then inputs, output, parameters in f32.
 * Backward adds the output's gradient and the inputs' gradients. */
static size_t bf16_workspace(const void *inst, enum dl_dir dir)
{
    const struct bf16_inst *r = inst;
    long n = inputs_count(r) + r->out_count + r->param_count;
    if (dir != DL_DIR_FORWARD)
        n += r->out_count + inputs_count(r);
    return pointers_bytes(r) + dl_dtype_value_size(DL_F32) * (size_t)n;
}

static size_t bf16_saved_bytes(const void *inst)
{
    const struct bf16_inst *r = inst;
    const struct dl_layer *l = r->l;
    long n = l->kind->saved_size ? l->kind->saved_size(l->attr, r->mb, l->in_shape, l->out_shape) : 0;
    return (size_t)n * dl_dtype_value_size(DL_F32);
}

/* bf16 tensor t's f32 copy at ws. */
static struct dl_tensor widened(struct dl_tensor t, float *ws)
{
    t.data = ws;
    t.shape.dtype = DL_F32;
    return t;
}

/* The f32 call of a's bf16 one on the workspace: inputs and output
 * widened, the weights rounded to bf16 (other parameters as they are);
 * returns the workspace past them. */
static float *widened_call(const struct bf16_inst *r, const struct dl_kernel_args *a, struct dl_op_call *c)
{
    const struct dl_layer *l = r->l;
    long N = a->c.batch;
    float *ws = (float *)((unsigned char *)a->workspace + pointers_bytes(r));
    *c = a->c;
    c->param = a->workspace; /* its own array: the caller's pointers stay as they are */
    for (int k = 0; k < l->n_in; k++) {
        long n = N * dl_shape_count(l->in_shape[k]);
        dl_cast(dl_tensor_const_bf16(&a->c.in[k]), DL_BF16, ws, DL_F32, n, NULL);
        c->in[k] = widened(a->c.in[k], ws);
        ws += n;
    }
    long n_out = N * dl_shape_count(l->out_shape);
    if (a->c.out.data)
        dl_cast(dl_tensor_const_bf16(&a->c.out), DL_BF16, ws, DL_F32, n_out, NULL);
    c->out = widened(a->c.out, ws);
    ws += n_out;
    for (int j = 0; j < l->n_params; j++) {
        for (long i = 0; i < l->param[j].count; i++)
            ws[i] = j == 0 ? dl_bf16_to_f32(dl_f32_to_bf16(a->c.param[j][i])) : a->c.param[j][i];
        c->param[j] = ws;
        ws += l->param[j].count;
    }
    return ws;
}

static void bf16_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct bf16_inst *r = inst;
    struct dl_op_call c;
    widened_call(r, a, &c);
    r->l->kind->forward(&c);
    dl_cast(dl_tensor_const_f32(&c.out), DL_F32, dl_tensor_bf16(&a->c.out), DL_BF16,
            (long)a->c.batch * dl_shape_count(r->l->out_shape), NULL);
}

static void bf16_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct bf16_inst *r = inst;
    const struct dl_layer *l = r->l;
    long N = a->c.batch, n_out = N * dl_shape_count(l->out_shape);
    struct dl_op_call c;
    float *ws = widened_call(r, a, &c);
    dl_cast(dl_tensor_const_bf16(&a->c.dout), DL_BF16, ws, DL_F32, n_out, NULL);
    c.dout = widened(a->c.dout, ws);
    ws += n_out;
    for (int k = 0; k < l->n_in; k++) {
        if (!a->c.din[k].data)
            continue;
        c.din[k] = widened(a->c.din[k], ws);
        ws += N * dl_shape_count(l->in_shape[k]);
    }
    l->kind->backward(&c);
    for (int k = 0; k < l->n_in; k++)
        if (a->c.din[k].data)
            dl_cast(dl_tensor_const_f32(&c.din[k]), DL_F32, dl_tensor_bf16(&a->c.din[k]), DL_BF16,
                    N * dl_shape_count(l->in_shape[k]), NULL);
}

const struct dl_kernel dl_kernel_reference_bf16 = {
    .backward_reads = DL_READS_AS_OP, /* the op's reference (an unread output widened is not used) */
    .name = "reference-bf16",
    .backend = "reference",
    .op = NULL,
    .dtype = DL_BF16,
    .supports = bf16_supports,
    .create = bf16_create,
    .destroy = bf16_destroy,
    .workspace_bytes = bf16_workspace,
    .saved_bytes = bf16_saved_bytes,
    .forward = bf16_forward,
    .backward_data = bf16_backward,
};
