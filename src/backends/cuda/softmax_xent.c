/* cuda/softmax_xent.c: the softmax cross-entropy loss on a GPU ("cuda";
 * built --with-cuda, never run on a GPU so far): class scores per sample
 * (C, 1, 1) or at every position of a sequence [T, C] (stored [C][T] per
 * sample, T labels per sample), labels, losses and gradients in device
 * memory, through the CUDA kernels of softmax_xent_kernels.cu.  Positions
 * whose label is ignore_index add nothing, and a sample's sum is divided by
 * the mini-batch's labelled positions per sample (the call's label_norm, or
 * its own count: ops/softmax_xent.h), as the op; label smoothing as the op.  Only each position's log-sum-exp
 * stays in the layer's saved memory from forward to backward (a double per
 * sample and position), and backward recomputes the probabilities from the
 * scores, so GPT-2's 50,257 classes keep nothing the size of the scores.
 * Workspace: the positions' losses forward (a double each), the samples'
 * gradient scales backward.  Class scores split over a tensor group (the
 * call's sync_max, op.h's split_classes) are not supported: such a call
 * records a fault, since the reductions over the group of
 * ops/softmax_xent.c's split forward have no GPU kernel yet. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/softmax_xent_kernels.h"
#include "ops/kinds.h"

struct cuda_xent {
    int C, P; /* classes, positions per sample (1: a vector of scores) */
    int ignore;
    size_t mb;
    double eps;
};

static int xent_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err)
{
    struct cuda_xent *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    struct dl_shape s = l->in_shape[0];
    *q = (struct cuda_xent){s.c, dl_shape_rank(s) == 2 ? s.h : 1, dl_attr_int(l, "ignore_index", 0), (size_t)cfg->mb,
                            dl_attr_float(l, "label_smoothing")};
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
    return sizeof(double) * q->mb * (size_t)q->P;
}

static size_t xent_workspace_bytes(const void *inst, enum dl_dir dir)
{
    const struct cuda_xent *q = inst;
    return dir == DL_DIR_FORWARD ? sizeof(double) * q->mb * (size_t)q->P
           : dir == DL_DIR_BACKWARD_DATA ? dl_dtype_size(DL_F32) * q->mb
                                          : 0;
}

/* A call whose classes are split over a tensor group has no GPU kernel. */
static int whole_classes(const struct dl_kernel_args *a)
{
    if (!a->c.sync_max)
        return 1;
    dl_kernel_fail(a, "cuda", "softmax_xent", "class scores split over the tensor group have no GPU kernel");
    return 0;
}

static void xent_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_xent *q = inst;
    const struct dl_op_call *c = &a->c;
    if (whole_classes(a))
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_xent_forward(dl_tensor_const_f32(&c->in[0]), c->labels, c->batch, q->P, q->C, q->eps, q->ignore,
                                                     c->label_norm, (double *)c->saved, a->workspace, dl_tensor_f32(&c->out)),
                   "softmax_xent forward launch");
}

static void xent_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_xent *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0].data && whole_classes(a))
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_xent_backward(dl_tensor_const_f32(&c->in[0]), c->labels, (const double *)c->saved, dl_tensor_const_f32(&c->dout), c->batch,
                                                      q->P, q->C, q->eps, q->ignore, c->label_norm, a->workspace,
                                                      c->din[0].data),
                   "softmax_xent backward launch");
}

const struct dl_kernel dl_kernel_cuda_softmax_xent = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_softmax_xent,
    .device = DL_DEVICE_CUDA,
    .create = xent_create,
    .destroy = xent_destroy,
    .workspace_bytes = xent_workspace_bytes,
    .saved_bytes = xent_saved_bytes,
    .forward = xent_forward,
    .backward_data = xent_backward_data,
};
