/* eltwise.h: the loop skeleton shared by the element-wise activations (relu,
 * leaky_relu, sigmoid, tanh).  An activation file defines two static inline
 * per-element functions, NAME_value and NAME_grad, and instantiates the batch
 * loops with DL_ELTWISE_LOOPS(NAME).  A macro rather than a function pointer,
 * so that the formula is inlined into the OpenMP loop body and vectorised
 * (`simd`: gcc -O2 does not vectorise these loops on its own). */
#ifndef DL_OPS_ELTWISE_H
#define DL_OPS_ELTWISE_H

#include "ops/op.h"

/* Output shape = input shape (also used by dropout). */
static inline int dl_eltwise_infer(const void *attr, int n_in, const struct dl_shape *in,
                                   struct dl_shape *out, struct dl_error *err)
{
    *out = in[0];
    return DL_OK;
}

/* One FLOP per element; exp and tanh are counted as one as well, since the
 * activations are negligible next to convolutions either way. */
static inline double dl_eltwise_flops(const void *attr, const struct dl_shape *in,
                                      struct dl_shape out)
{
    return (double)dl_shape_count(out);
}

/* Defines
 *   static void NAME_forward(c):  out[i] = NAME_value(attr, x[i])
 *   static void NAME_backward(c): din[i] = NAME_grad(attr, x[i], out[i], dout[i])
 * over the N x C x H x W elements of the batch.  Every element is independent,
 * so any split over threads or vector lanes gives the same bits.  A formula
 * with a branch vectorises only when both sides are computed unconditionally
 * (a multiplication under a condition may trap, so gcc keeps the branch). */
#define DL_ELTWISE_LOOPS(NAME)                                                    \
    static void NAME##_forward(const struct dl_op_call *c)                        \
    {                                                                             \
        long n = (long)c->batch * dl_shape_count(c->out.shape);                   \
        const dl_real *x = dl_tensor_const_f32(&c->in[0]);                        \
        dl_real *y = dl_tensor_f32(&c->out);                                      \
        _Pragma("omp parallel for simd schedule(static)")                         \
        for (long i = 0; i < n; i++)                                              \
            y[i] = NAME##_value(c->attr, x[i]);                                   \
    }                                                                             \
    static void NAME##_backward(const struct dl_op_call *c)                       \
    {                                                                             \
        if (!c->din[0].data)                                                      \
            return;                                                               \
        long n = (long)c->batch * dl_shape_count(c->out.shape);                   \
        const dl_real *x = dl_tensor_const_f32(&c->in[0]);                        \
        const dl_real *y = dl_tensor_const_f32(&c->out);                          \
        const dl_real *dy = dl_tensor_const_f32(&c->dout);                        \
        dl_real *dx = dl_tensor_f32(&c->din[0]);                                  \
        _Pragma("omp parallel for simd schedule(static)")                         \
        for (long i = 0; i < n; i++)                                              \
            dx[i] = NAME##_grad(c->attr, x[i], y[i], dy[i]);                      \
    }

/* The fields every element-wise kind shares, for its struct dl_op_kind:
 * one input, output shape = input shape, the loops from DL_ELTWISE_LOOPS,
 * and micro-batches, channel blocks and row bands allowed (every element is
 * independent). */
#define DL_ELTWISE_KIND_FIELDS(NAME)                                              \
    .min_inputs = 1, .max_inputs = 1, .infer = dl_eltwise_infer, .micro_batch = 1, \
    .forward = NAME##_forward, .backward = NAME##_backward, .flops = dl_eltwise_flops, \
    .tp.channel_local = 1, .tp.row_local = 1

#endif
