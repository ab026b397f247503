/* cuda/pool.c: maxpool, avgpool (fixed or uniform adaptive windows) and
 * global_avgpool on a GPU through cuDNN's pooling ("cudnn"; built
 * --with-cuda, never run on a GPU so far), forward and backward (from the
 * forward input and output: no saved winners), NCHW float in device memory.
 * cuDNN pads both sides alike and rounds the output size down, so only
 * layers whose right padding is at most the left (no ceil mode) are
 * supported; there PyTorch's include-padding divisor is the whole window,
 * as cuDNN's.  The output size cuDNN computes is checked at creation. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cudnn_pool {
    struct dl_cudnn_io io;
    cudnnPoolingDescriptor_t pool;
};

static int pool_supports(const struct dl_layer *l, dl_pool_geom_fn *geom)
{
    struct dl_pool_geom pg;
    return geom(l, &pg) && pg.pr_h >= 0 && pg.pr_w >= 0 && pg.pr_h <= pg.ph && pg.pr_w <= pg.pw;
}

static void pool_destroy(void *inst)
{
    struct cudnn_pool *q = inst;
    if (!q)
        return;
    if (q->pool)
        cudnnDestroyPoolingDescriptor(q->pool);
    dl_cudnn_io_free(&q->io);
    free(q);
}

static int pool_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err, dl_pool_geom_fn *geom)
{
    struct dl_pool_geom pg;
    geom(l, &pg);
    int rc;
    struct cudnn_pool *q = dl_cudnn_io_new(sizeof *q, l, cfg->mb, cfg->dtype, "cudnn", &rc, err);
    *inst = NULL;
    if (!q)
        return rc;
    cudnnPoolingMode_t mode = pg.max           ? CUDNN_POOLING_MAX_DETERMINISTIC
                              : pg.exclude_pad ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                               : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    int n = 0, c = 0, h = 0, w = 0;
    cudnnStatus_t st = cudnnCreatePoolingDescriptor(&q->pool);
    if (st != CUDNN_STATUS_SUCCESS)
        q->pool = NULL;
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetPooling2dDescriptor(q->pool, mode, CUDNN_NOT_PROPAGATE_NAN, pg.kh, pg.kw, pg.ph, pg.pw, pg.sh,
                                         pg.sw);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnGetPooling2dForwardOutputDim(q->pool, q->io.x, &n, &c, &h, &w);
    if (st != CUDNN_STATUS_SUCCESS) {
        pool_destroy(q);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn): pooling descriptor: %s", l->name,
                         cudnnGetErrorString(st));
    }
    if (c != l->out_shape.c || h != l->out_shape.h || w != l->out_shape.w) {
        pool_destroy(q);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn): cuDNN's output is %dx%dx%d, the "
                         "layer's %dx%dx%d", l->name, c, h, w, l->out_shape.c, l->out_shape.h, l->out_shape.w);
    }
    *inst = q;
    return DL_OK;
}

static void pool_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_pool *q = inst;
    const float one = 1, zero = 0;
    dl_cudnn_ok(a, "cudnn", cudnnPoolingForward(q->io.h, q->pool, &one, q->io.x, dl_tensor_const_f32(&a->c.in[0]), &zero, q->io.y, dl_tensor_f32(&a->c.out)),
                "cudnnPoolingForward");
}

static void pool_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_pool *q = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1, zero = 0;
    if (c->din[0].data)
        dl_cudnn_ok(a, "cudnn",
                    cudnnPoolingBackward(q->io.h, q->pool, &one, q->io.y, dl_tensor_f32(&c->out), q->io.y, dl_tensor_const_f32(&c->dout), q->io.x, dl_tensor_const_f32(&c->in[0]),
                                         &zero, q->io.x, c->din[0].data),
                    "cudnnPoolingBackward");
}

#define POOL_KERNEL(SYM, OP, GEOM)                                                               \
    static int SYM##_supports(const struct dl_layer *l)                                          \
    {                                                                                            \
        return pool_supports(l, GEOM);                                                           \
    }                                                                                            \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg,       \
                            void **inst, struct dl_error *err)                                   \
    {                                                                                            \
        return pool_create(l, cfg, inst, err, GEOM);                                             \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = "cudnn", .backend = "cuda", .op = &OP, .device = DL_DEVICE_CUDA,                 \
        .supports = SYM##_supports, .create = SYM##_create, .destroy = pool_destroy,             \
        .forward = pool_forward, .backward_data = pool_backward_data,                            \
    };
POOL_KERNEL(dl_kernel_cudnn_maxpool, dl_op_maxpool, dl_maxpool_geom)
POOL_KERNEL(dl_kernel_cudnn_avgpool, dl_op_avgpool, dl_avgpool_geom)
POOL_KERNEL(dl_kernel_cudnn_global_avgpool, dl_op_global_avgpool, dl_global_avgpool_geom)
