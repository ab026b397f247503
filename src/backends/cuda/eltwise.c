/* cuda/eltwise.c: relu, sigmoid and tanh on a GPU through cuDNN's
 * activations ("cudnn"; built --with-cuda, never run on a GPU so far),
 * forward and backward (which cuDNN computes from the forward input and
 * output and the output gradient), NCHW float in device memory.  One
 * instance type; each kind's kernel table names its cuDNN mode. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cudnn_act {
    struct dl_cudnn_io io;
    cudnnActivationDescriptor_t act;
};

static void act_destroy(void *inst)
{
    struct cudnn_act *q = inst;
    if (!q)
        return;
    if (q->act)
        cudnnDestroyActivationDescriptor(q->act);
    dl_cudnn_io_free(&q->io);
    free(q);
}

static int act_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                      struct dl_error *err, cudnnActivationMode_t mode)
{
    int rc;
    struct cudnn_act *q = dl_cudnn_io_new(sizeof *q, l, cfg->mb, cfg->dtype, "cudnn", &rc, err);
    *inst = NULL;
    if (!q)
        return rc;
    cudnnStatus_t st = cudnnCreateActivationDescriptor(&q->act);
    if (st == CUDNN_STATUS_SUCCESS) /* relu: NaN as 0, as the op (fmax) */
        st = cudnnSetActivationDescriptor(q->act, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0);
    else
        q->act = NULL;
    if (st != CUDNN_STATUS_SUCCESS) {
        act_destroy(q);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn): activation descriptor: %s", l->name,
                         cudnnGetErrorString(st));
    }
    *inst = q;
    return DL_OK;
}

static void act_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_act *q = inst;
    const float one = 1, zero = 0;
    dl_cudnn_ok(a, "cudnn", cudnnActivationForward(q->io.h, q->act, &one, q->io.x, dl_tensor_const_f32(&a->c.in[0]), &zero, q->io.y, dl_tensor_f32(&a->c.out)),
                "cudnnActivationForward");
}

static void act_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_act *q = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    if (c->din[0].data)
        dl_cudnn_ok(a, "cudnn",
                    cudnnActivationBackward(q->io.h, q->act, &one, q->io.y, dl_tensor_f32(&c->out), q->io.y, dl_tensor_const_f32(&c->dout), q->io.x,
                                            dl_tensor_const_f32(&c->in[0]), &zero, q->io.x, c->din[0].data),
                    "cudnnActivationBackward");
}

#define ACT_KERNEL(SYM, OP, MODE)                                                                \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg,       \
                            void **inst, struct dl_error *err)                                   \
    {                                                                                            \
        return act_create(l, cfg, inst, err, MODE);                                              \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = "cudnn", .backend = "cuda", .op = &OP, .device = DL_DEVICE_CUDA,                 \
        .create = SYM##_create, .destroy = act_destroy, .forward = act_forward,                  \
        .backward_data = act_backward_data,                                                      \
    };
ACT_KERNEL(dl_kernel_cudnn_relu, dl_op_relu, CUDNN_ACTIVATION_RELU)
ACT_KERNEL(dl_kernel_cudnn_sigmoid, dl_op_sigmoid, CUDNN_ACTIVATION_SIGMOID)
ACT_KERNEL(dl_kernel_cudnn_tanh, dl_op_tanh, CUDNN_ACTIVATION_TANH)
