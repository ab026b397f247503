/* cuda/pointwise.c: leaky ReLU, GELU, dropout and flatten on a GPU ("cuda";
 * built --with-cuda, never run on a GPU so far) through the CUDA kernels of
 * pointwise_kernels.cu and gelu_kernels.cu, float in device memory, any
 * shape (an image, a vector, a sequence [T, C]: the kernels go element by
 * element).  Dropout keeps its mask in the layer's saved memory from
 * forward to backward and draws it from the call's key, first sample and
 * first channel as the host's op, so that any split of the batch draws
 * what one process draws; in inference (or at rate 0) both directions
 * copy.  Flatten copies both ways too: a sample's NCHW values already are
 * its feature vector. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cuda/fault.h"
#include "backends/cuda/gelu_kernels.h"
#include "backends/cuda/pointwise_kernels.h"
#include "ops/kinds.h"

struct cuda_pointwise {
    long per;      /* values per sample */
    long plane;    /* values per channel of a sample (h * w) */
    size_t mb;
    double value;  /* leaky_relu's slope, dropout's rate; gelu: 1 for the exact form (approximate: none) */
};

static int pointwise_new(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                         struct dl_error *err, double value)
{
    struct cuda_pointwise *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    *q = (struct cuda_pointwise){dl_shape_count(l->out_shape), (long)l->out_shape.h * l->out_shape.w,
                                 (size_t)cfg->mb, value};
    *inst = q;
    return DL_OK;
}

/* An instance whose value is layer l's number attribute attr. */
static int pointwise_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err, const char *attr)
{
    return pointwise_new(l, cfg, inst, err, dl_attr_float(l, attr));
}

static void pointwise_destroy(void *inst)
{
    free(inst);
}

static int leaky_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                        struct dl_error *err)
{
    return pointwise_create(l, cfg, inst, err, "slope");
}

static void leaky_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda", (cudaError_t)dl_cuda_leaky_relu_forward(dl_tensor_const_f32(&c->in[0]), c->batch * q->per, (float)q->value, dl_tensor_f32(&c->out)),
               "leaky_relu forward launch");
}

static void leaky_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0].data)
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_leaky_relu_backward(dl_tensor_const_f32(&c->in[0]), dl_tensor_const_f32(&c->dout), c->batch * q->per, (float)q->value, c->din[0].data),
                   "leaky_relu backward launch");
}

const struct dl_kernel dl_kernel_cuda_leaky_relu = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_leaky_relu,
    .device = DL_DEVICE_CUDA,
    .create = leaky_create,
    .destroy = pointwise_destroy,
    .forward = leaky_forward,
    .backward_data = leaky_backward_data,
};

static int gelu_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    return pointwise_new(l, cfg, inst, err, strcmp(dl_attr_choice(l, "approximate"), "none") == 0);
}

static void gelu_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda", (cudaError_t)dl_cuda_gelu_forward(dl_tensor_const_f32(&c->in[0]), c->batch * q->per, (int)q->value, dl_tensor_f32(&c->out)),
               "gelu forward launch");
}

static void gelu_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0].data)
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_gelu_backward(dl_tensor_const_f32(&c->in[0]), dl_tensor_const_f32(&c->dout), c->batch * q->per, (int)q->value, c->din[0].data),
                   "gelu backward launch");
}

const struct dl_kernel dl_kernel_cuda_gelu = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_gelu,
    .device = DL_DEVICE_CUDA,
    .create = gelu_create,
    .destroy = pointwise_destroy,
    .forward = gelu_forward,
    .backward_data = gelu_backward_data,
};

static int dropout_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                          struct dl_error *err)
{
    return pointwise_create(l, cfg, inst, err, "rate");
}

static size_t dropout_saved_bytes(const void *inst)
{
    const struct cuda_pointwise *q = inst;
    return dl_dtype_size(DL_F32) * q->mb * (size_t)q->per;
}

/* 1 when the call drops elements (training at a rate above 0). */
static int drops(const struct cuda_pointwise *q, const struct dl_op_call *c)
{
    return c->training && q->value > 0;
}

static void dropout_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    if (!drops(q, c)) {
        dl_cuda_copy_within(a, "cuda", dl_tensor_f32(&c->out), dl_tensor_const_f32(&c->in[0]), c->batch * q->per);
        return;
    }
    float keep = (float)(1 / (1 - q->value));
    dl_cuda_ok(a, "cuda",
               (cudaError_t)dl_cuda_dropout_forward(dl_tensor_const_f32(&c->in[0]), c->batch, q->per, c->key, c->sample0, (long)c->channel0 * q->plane,
                                       q->value, keep, (float *)c->saved, dl_tensor_f32(&c->out)),
               "dropout forward launch");
}

static void dropout_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    if (!drops(q, c))
        dl_cuda_copy_within(a, "cuda", dl_tensor_f32(&c->din[0]), dl_tensor_const_f32(&c->dout), c->batch * q->per);
    else
        dl_cuda_ok(a, "cuda", (cudaError_t)dl_cuda_multiply(dl_tensor_const_f32(&c->dout), (const float *)c->saved, c->batch * q->per, c->din[0].data),
                   "dropout backward launch");
}

const struct dl_kernel dl_kernel_cuda_dropout = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_dropout,
    .device = DL_DEVICE_CUDA,
    .create = dropout_create,
    .destroy = pointwise_destroy,
    .saved_bytes = dropout_saved_bytes,
    .forward = dropout_forward,
    .backward_data = dropout_backward_data,
};

static int flatten_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                          struct dl_error *err)
{
    struct cuda_pointwise *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    q->per = dl_shape_count(l->out_shape);
    *inst = q;
    return DL_OK;
}

static void flatten_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    dl_cuda_copy_within(a, "cuda", dl_tensor_f32(&a->c.out), dl_tensor_const_f32(&a->c.in[0]), a->c.batch * q->per);
}

static void flatten_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_pointwise *q = inst;
    if (a->c.din[0].data)
        dl_cuda_copy_within(a, "cuda", dl_tensor_f32(&a->c.din[0]), dl_tensor_const_f32(&a->c.dout), a->c.batch * q->per);
}

const struct dl_kernel dl_kernel_cuda_flatten = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_flatten,
    .device = DL_DEVICE_CUDA,
    .create = flatten_create,
    .destroy = pointwise_destroy,
    .forward = flatten_forward,
    .backward_data = flatten_backward_data,
};
