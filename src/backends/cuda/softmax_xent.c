/* cuda/softmax_xent.c: the softmax cross-entropy loss on a GPU ("cuda";
 * built --with-cuda, never run on a GPU so far): scores, labels, losses and
 * gradients in device memory, through the CUDA kernels of
 * softmax_xent_kernels.cu; the probabilities stay in the layer's saved
 * memory from forward to backward.  Label smoothing as the op.  Class
 * scores split over a tensor group (the op's sync_max) are not supported:
 * the executor does not run on a GPU yet, and such a layer would need the
 * reductions of softmax_xent.c's split forward. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/softmax_xent_kernels.h"
#include "ops/kinds.h"

struct cuda_xent {
    int C;
    size_t mb;
    double eps;
};

static int xent_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err)
{
    struct cuda_xent *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    *q = (struct cuda_xent){l->in_shape[0].c, (size_t)cfg->mb, dl_attr_float(l, "label_smoothing")};
    *inst = q;
    return DL_OK;
}

static void xent_destroy(void *inst)
{
    free(inst);
}

static size_t xent_saved_bytes(const void *inst)
{
    const struct cuda_xent *q = inst;
    return sizeof(float) * q->mb * (size_t)q->C;
}

static void xent_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_xent *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda",
               (cudaError_t)dl_cuda_xent_forward(c->in[0], c->labels, c->batch, q->C, q->eps, c->out, (float *)c->saved),
               "softmax_xent forward launch");
}

static void xent_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_xent *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0])
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_xent_backward((const float *)c->saved, c->labels, c->dout, c->batch, q->C,
                                                      q->eps, c->din[0]),
                   "softmax_xent backward launch");
}

/* A vector of class scores per sample; a loss at every position of a
 * sequence [T, C] has no GPU kernel yet. */
static int xent_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) != 2;
}

const struct dl_kernel dl_kernel_cuda_softmax_xent = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_softmax_xent,
    .device = DL_DEVICE_CUDA,
    .supports = xent_supports,
    .create = xent_create,
    .destroy = xent_destroy,
    .saved_bytes = xent_saved_bytes,
    .forward = xent_forward,
    .backward_data = xent_backward_data,
};
