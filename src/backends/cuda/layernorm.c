/* cuda/layernorm.c: layer normalisation over the features of each position
 * on a GPU ("cuda"; built --with-cuda, never run on a GPU so far): a
 * sequence [T, C] or a vector [F] (T = 1), float in device memory, through
 * the CUDA kernels of layernorm_kernels.cu.  Each position's mean and
 * 1/sqrt(var + eps) stay in the layer's saved memory from forward to
 * backward (2 floats per sample and position, the reference's layout);
 * backward weights accumulates into the weight and bias gradients. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/layernorm_kernels.h"
#include "ops/kinds.h"

struct cuda_layernorm {
    long C, T; /* features per position, positions per sample */
    size_t mb;
    int affine;
    double eps;
};

static int ln_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct cuda_layernorm *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    struct dl_shape s = l->in_shape[0];
    *q = (struct cuda_layernorm){s.c, (long)s.h * s.w, (size_t)cfg->mb, dl_attr_int(l, "affine", 0),
                                 dl_attr_float(l, "eps")};
    *inst = q;
    return DL_OK;
}

static void ln_destroy(void *inst)
{
    free(inst);
}

static size_t ln_saved_bytes(const void *inst)
{
    const struct cuda_layernorm *q = inst;
    return dl_dtype_size(DL_F32) * 2 * q->mb * (size_t)q->T;
}

/* The call's means and reciprocal standard deviations in its saved memory. */
static float *means(const struct dl_op_call *c)
{
    return (float *)c->saved;
}

static float *rstds(const struct cuda_layernorm *q, const struct dl_op_call *c)
{
    return (float *)c->saved + (long)c->batch * q->T;
}

static void ln_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_layernorm *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda",
               (cudaError_t)dl_cuda_layernorm_forward(dl_tensor_const_f32(&c->in[0]), c->batch, q->T, q->C, q->eps,
                                                      q->affine ? c->param[0] : NULL, q->affine ? c->param[1] : NULL,
                                                      dl_tensor_f32(&c->out), means(c), rstds(q, c)),
               "layernorm forward launch");
}

static void ln_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_layernorm *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0].data)
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_layernorm_backward_data(dl_tensor_const_f32(&c->in[0]), dl_tensor_const_f32(&c->dout), c->batch, q->T, q->C,
                                                                q->affine ? c->param[0] : NULL, means(c),
                                                                rstds(q, c), c->din[0].data),
                   "layernorm backward-data launch");
}

static void ln_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_layernorm *q = inst;
    const struct dl_op_call *c = &a->c;
    if (q->affine)
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_layernorm_backward_weights(dl_tensor_const_f32(&c->in[0]), dl_tensor_const_f32(&c->dout), c->batch, q->T, q->C, means(c),
                                                                   rstds(q, c), c->dparam[0], c->dparam[1]),
                   "layernorm backward-weights launch");
}

const struct dl_kernel dl_kernel_cuda_layernorm = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_layernorm,
    .device = DL_DEVICE_CUDA,
    .create = ln_create,
    .destroy = ln_destroy,
    .saved_bytes = ln_saved_bytes,
    .forward = ln_forward,
    .backward_data = ln_backward_data,
    .backward_weights = ln_backward_weights,
};
