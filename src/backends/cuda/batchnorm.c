/* cuda/batchnorm.c: batch normalisation on a GPU through cuDNN's spatial
 * batch norm ("cudnn"; built --with-cuda, never run on a GPU so far), NCHW
 * float in device memory, parameters weight, bias, running_mean and
 * running_var as the op (PyTorch) keeps them.  Training-mode forward
 * normalises with the batch statistics and updates the running ones with
 * factor momentum (cuDNN's running variance is the unbiased one, as
 * PyTorch's); it keeps cuDNN's batch mean and inverse standard deviation in
 * the layer's saved memory for backward, which computes the input gradient
 * and accumulates the weight and bias gradients (beta 1) in one call, so
 * the kernel has no backward_weights.  Inference-mode forward uses the
 * running statistics; backward is only defined after a training-mode
 * forward (the executor never runs one after evaluation).  Whole batch, and
 * no --sync-bn hook (sync_stats 0: kernel choice then takes another). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR };

struct cudnn_bn {
    struct dl_cudnn_io io;
    cudnnTensorDescriptor_t per_channel; /* 1 C 1 1 */
    double eps, momentum;
    int C;
    size_t x_bytes;                      /* mb samples of the input */
};

static void bn_destroy(void *inst)
{
    struct cudnn_bn *q = inst;
    if (!q)
        return;
    if (q->per_channel)
        cudnnDestroyTensorDescriptor(q->per_channel);
    dl_cudnn_io_free(&q->io);
    free(q);
}

static int bn_supports(const struct dl_layer *l)
{
    return dl_attr_float(l, "eps") >= CUDNN_BN_MIN_EPSILON;
}

static int bn_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    int rc;
    struct cudnn_bn *q = dl_cudnn_io_new(sizeof *q, l, cfg->mb, cfg->dtype, "cudnn", &rc, err);
    *inst = NULL;
    if (!q)
        return rc;
    q->eps = dl_attr_float(l, "eps");
    q->momentum = dl_attr_float(l, "momentum");
    q->C = l->in_shape[0].c;
    q->x_bytes = dl_dtype_size(DL_F32) * (size_t)cfg->mb * (size_t)dl_shape_count(l->in_shape[0]);
    cudnnStatus_t st = cudnnCreateTensorDescriptor(&q->per_channel);
    if (st != CUDNN_STATUS_SUCCESS)
        q->per_channel = NULL;
    else
        st = cudnnDeriveBNTensorDescriptor(q->per_channel, q->io.x, CUDNN_BATCHNORM_SPATIAL);
    if (st != CUDNN_STATUS_SUCCESS) {
        bn_destroy(q);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn): batch-norm descriptor: %s", l->name,
                         cudnnGetErrorString(st));
    }
    *inst = q;
    return DL_OK;
}

/* mean[C] and inverse standard deviation[C] of the batch. */
static size_t bn_saved_bytes(const void *inst)
{
    const struct cudnn_bn *q = inst;
    return 2 * dl_dtype_size(DL_F32) * (size_t)q->C;
}

/* Backward writes the input gradient somewhere even when none is wanted,
 * and weight and bias gradients even for frozen ones: workspace stands in. */
static size_t bn_workspace_bytes(const void *inst, enum dl_dir dir)
{
    const struct cudnn_bn *q = inst;
    return dir == DL_DIR_BACKWARD_DATA ? q->x_bytes + 2 * dl_dtype_size(DL_F32) * (size_t)q->C : 0;
}

static void bn_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_bn *q = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    float *saved = (float *)c->saved;
    if (c->training)
        dl_cudnn_ok(a, "cudnn",
                    cudnnBatchNormalizationForwardTraining(q->io.h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, q->io.x,
                                                           dl_tensor_const_f32(&c->in[0]), q->io.y, dl_tensor_f32(&c->out), q->per_channel,
                                                           c->param[BN_WEIGHT], c->param[BN_BIAS], q->momentum,
                                                           c->param[BN_RUNNING_MEAN], c->param[BN_RUNNING_VAR],
                                                           q->eps, saved, saved + q->C),
                    "cudnnBatchNormalizationForwardTraining");
    else
        dl_cudnn_ok(a, "cudnn",
                    cudnnBatchNormalizationForwardInference(q->io.h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, q->io.x,
                                                            dl_tensor_const_f32(&c->in[0]), q->io.y, dl_tensor_f32(&c->out), q->per_channel,
                                                            c->param[BN_WEIGHT], c->param[BN_BIAS],
                                                            c->param[BN_RUNNING_MEAN], c->param[BN_RUNNING_VAR],
                                                            q->eps),
                    "cudnnBatchNormalizationForwardInference");
}

static void bn_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_bn *q = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    const float *saved = (const float *)c->saved;
    float *spare = a->workspace, *spare_params = (float *)((unsigned char *)a->workspace + q->x_bytes);
    dl_cudnn_ok(a, "cudnn",
                cudnnBatchNormalizationBackward(q->io.h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, q->io.x,
                                                dl_tensor_const_f32(&c->in[0]), q->io.y, dl_tensor_const_f32(&c->dout), q->io.x, c->din[0].data ? dl_tensor_f32(&c->din[0]) : spare,
                                                q->per_channel, c->param[BN_WEIGHT],
                                                c->dparam[BN_WEIGHT] ? c->dparam[BN_WEIGHT] : spare_params,
                                                c->dparam[BN_BIAS] ? c->dparam[BN_BIAS] : spare_params + q->C, q->eps,
                                                saved, saved + q->C),
                "cudnnBatchNormalizationBackward");
}

const struct dl_kernel dl_kernel_cudnn_batchnorm = {
    .name = "cudnn",
    .backend = "cuda",
    .op = &dl_op_batchnorm,
    .device = DL_DEVICE_CUDA,
    .whole_batch = 1,
    .supports = bn_supports,
    .create = bn_create,
    .destroy = bn_destroy,
    .workspace_bytes = bn_workspace_bytes,
    .saved_bytes = bn_saved_bytes,
    .forward = bn_forward,
    .backward_data = bn_backward_data,
};
