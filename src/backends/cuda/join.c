/* cuda/join.c: the layers that join several inputs, on a GPU (built
 * --with-cuda, never run on a GPU so far), NCHW float in device memory:
 * add ("cudnn": input 0 copied, then each further input added by
 * cudnnAddTensor in input order, as the host's op; backward copies the
 * output gradient to every input's) and concat ("cuda": each input's
 * per-sample block copied into its place in every sample of the output by
 * one strided cudaMemcpy2DAsync, and backward the other way). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

/* ---------------------------------------------------------------- add */
static void add_destroy(void *inst)
{
    if (inst)
        dl_cudnn_io_free(inst);
    free(inst);
}

static int add_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    int rc;
    *inst = dl_cudnn_io_new(sizeof(struct dl_cudnn_io), l, cfg->mb, cfg->dtype, "cudnn", &rc, err);
    return *inst ? DL_OK : rc;
}

static long values(const struct dl_op_call *c)
{
    return c->batch * dl_shape_count(c->out.shape);
}

static void add_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_cudnn_io *io = inst;
    const struct dl_op_call *c = &a->c;
    const float one = 1;
    if (!dl_cuda_copy_within(a, "cudnn", dl_tensor_f32(&c->out), dl_tensor_const_f32(&c->in[0]), values(c)))
        return;
    for (int k = 1; k < c->n_in; k++)
        if (!dl_cudnn_ok(a, "cudnn", cudnnAddTensor(io->h, &one, io->x, dl_tensor_const_f32(&c->in[k]), &one, io->y, dl_tensor_f32(&c->out)),
                         "cudnnAddTensor"))
            return;
}

static void add_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    for (int k = 0; k < c->n_in; k++)
        if (c->din[k].data && !dl_cuda_copy_within(a, "cudnn", dl_tensor_f32(&c->din[k]), dl_tensor_const_f32(&c->dout), values(c)))
            return;
}

const struct dl_kernel dl_kernel_cudnn_add = {
    .name = "cudnn",
    .backend = "cuda",
    .op = &dl_op_add,
    .device = DL_DEVICE_CUDA,
    .create = add_create,
    .destroy = add_destroy,
    .forward = add_forward,
    .backward_data = add_backward_data,
};

/* ---------------------------------------------------------------- concat */
static int concat_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                         struct dl_error *err)
{
    *inst = dl_calloc(1, 1, err); /* nothing to keep: the call has every shape */
    return *inst ? DL_OK : DL_ERR_NOMEM;
}

static void concat_destroy(void *inst)
{
    free(inst);
}

/* Input i's block of every sample to (to_out) or from the output. */
static int concat_copy(const struct dl_kernel_args *a, int i, float *in, float *out, int to_out)
{
    const struct dl_op_call *c = &a->c;
    size_t row = sizeof *out * (size_t)dl_shape_count(c->out.shape);
    size_t block = sizeof *in * (size_t)dl_shape_count(c->in[i].shape);
    cudaError_t st = to_out ? cudaMemcpy2DAsync(out, row, in, block, block, (size_t)c->batch, cudaMemcpyDeviceToDevice, 0)
                            : cudaMemcpy2DAsync(in, block, out, row, block, (size_t)c->batch, cudaMemcpyDeviceToDevice, 0);
    return dl_cuda_ok(a, "cuda", st, "cudaMemcpy2DAsync");
}

static void concat_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    float *y = dl_tensor_f32(&c->out);
    for (int i = 0; i < c->n_in; y += dl_shape_count(c->in[i].shape), i++)
        if (!concat_copy(a, i, (float *)dl_tensor_const_f32(&c->in[i]), y, 1))
            return;
}

static void concat_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    float *dy = (float *)dl_tensor_const_f32(&c->dout);
    for (int i = 0; i < c->n_in; dy += dl_shape_count(c->in[i].shape), i++)
        if (c->din[i].data && !concat_copy(a, i, dl_tensor_f32(&c->din[i]), dy, 0))
            return;
}

const struct dl_kernel dl_kernel_cuda_concat = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_concat,
    .device = DL_DEVICE_CUDA,
    .create = concat_create,
    .destroy = concat_destroy,
    .forward = concat_forward,
    .backward_data = concat_backward_data,
};
