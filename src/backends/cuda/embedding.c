/* cuda/embedding.c: the lookup tables of a transformer on a GPU ("cuda";
 * built --with-cuda, never run on a GPU so far), through the CUDA kernels
 * of embedding_kernels.cu: the token embedding (i32 ids [T] to [T, dim],
 * its weight gradient summed row by row without atomics, in the
 * reference's order, so deterministic and equal to the host's bit for bit)
 * and the position embedding (a table row added at every position from the
 * call's position0; its input gradient a device copy of the output's).
 * Both keep nothing from forward to backward.
 * A tensor rank's part of the token table (op.h's tp_vocab) holds rows
 * from dl_embedding_first_row (ops/embedding.h): ids outside its rows give
 * zeros, as in the reference. */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/embedding_kernels.h"
#include "backends/cuda/fault.h"
#include "ops/embedding.h"
#include "ops/kinds.h"

struct cuda_table {
    long T, C;  /* positions and features of the output */
    long vocab; /* the token table's rows */
    long row0;  /* the whole table's index of row 0 (dl_embedding_first_row) */
};

static int table_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                        struct dl_error *err)
{
    struct cuda_table *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    int token = l->kind == &dl_op_embedding;
    *q = (struct cuda_table){l->out_shape.h, l->out_shape.c, token ? dl_attr_int(l, "vocab", 0) : 0,
                             token ? dl_embedding_first_row(l->attr) : 0};
    *inst = q;
    return DL_OK;
}

static void table_destroy(void *inst)
{
    free(inst);
}

/* ---------------------------------------------------------------- token embedding */
static void embedding_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_table *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda",
               (cudaError_t)dl_cuda_embedding_forward(dl_tensor_const_i32(&c->in[0]), c->batch, q->T, q->C, q->row0,
                                                      q->vocab, c->param[0], dl_tensor_f32(&c->out)),
               "embedding forward launch");
}

/* The ids take no gradient: only the table's rows. */
static void embedding_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_table *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->dparam[0])
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_embedding_backward(dl_tensor_const_i32(&c->in[0]),
                                                           dl_tensor_const_f32(&c->dout), c->batch, q->T, q->C, q->row0,
                                                           q->vocab, c->dparam[0]),
                   "embedding backward launch");
}

static void no_input_gradient(void *inst, const struct dl_kernel_args *a)
{
}

const struct dl_kernel dl_kernel_cuda_embedding = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_embedding,
    .device = DL_DEVICE_CUDA,
    .create = table_create,
    .destroy = table_destroy,
    .forward = embedding_forward,
    .backward_data = no_input_gradient,
    .backward_weights = embedding_backward_weights,
};

/* ---------------------------------------------------------------- position embedding */
static void position_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_table *q = inst;
    const struct dl_op_call *c = &a->c;
    dl_cuda_ok(a, "cuda",
               (cudaError_t)dl_cuda_position_embedding_forward(dl_tensor_const_f32(&c->in[0]), c->batch, q->T, q->C,
                                                               c->position0, c->param[0], dl_tensor_f32(&c->out)),
               "position_embedding forward launch");
}

static void position_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_table *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->din[0].data)
        dl_cuda_copy_within(a, "cuda", dl_tensor_f32(&c->din[0]), dl_tensor_const_f32(&c->dout),
                            c->batch * q->C * q->T);
}

static void position_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cuda_table *q = inst;
    const struct dl_op_call *c = &a->c;
    if (c->dparam[0])
        dl_cuda_ok(a, "cuda",
                   (cudaError_t)dl_cuda_position_embedding_backward(dl_tensor_const_f32(&c->dout), c->batch, q->T, q->C,
                                                                    c->position0, c->dparam[0]),
                   "position_embedding backward launch");
}

const struct dl_kernel dl_kernel_cuda_position_embedding = {
    .name = "cuda",
    .backend = "cuda",
    .op = &dl_op_position_embedding,
    .device = DL_DEVICE_CUDA,
    .create = table_create,
    .destroy = table_destroy,
    .forward = position_forward,
    .backward_data = position_backward_data,
    .backward_weights = position_backward_weights,
};
