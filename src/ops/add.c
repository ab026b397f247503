/* add.c: element-wise sum of 2..16 inputs of the same shape (residual
 * connections): out = in[0] + in[1] + ... + in[n-1], summed in input order.
 * Backward hands the same gradient to every input: din[i] = dout. */
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

static int add_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                     struct dl_error *err)
{
    char want[48], got[48], list[768] = "";
    size_t len = 0;
    int bad = 0;
    for (int i = 1; i < n_in; i++) {
        if (dl_shape_eq(in[i], in[0]))
            continue;
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%sinput %d is %s",
                                    bad ? ", " : "", i, dl_shape_str(in[i], got, sizeof got));
        bad++;
    }
    if (bad)
        return dl_errorf(err, DL_ERR_SPEC, "add needs every input in the shape of input 0 (%s): %s",
                         dl_shape_str(in[0], want, sizeof want), list);
    *out = in[0];
    return DL_OK;
}

static void add_forward(const struct dl_op_call *c)
{
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    dl_real *y = dl_tensor_f32(&c->out);
    memcpy(y, dl_tensor_const_f32(&c->in[0]), sizeof *y * (size_t)n);
    /* One input at a time, so each element is summed in input order. */
    for (int k = 1; k < c->n_in; k++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[k]);
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            y[i] += x[i];
    }
}

static void add_backward(const struct dl_op_call *c)
{
    long n = (long)c->batch * dl_shape_count(c->out.shape);
    const dl_real *dy = dl_tensor_const_f32(&c->dout);
    for (int k = 0; k < c->n_in; k++)
        if (c->din[k].data)
            memcpy(dl_tensor_f32(&c->din[k]), dy, sizeof *dy * (size_t)n);
}

/* The number of inputs is not passed to flops(), so this counts the two-input
 * case: one addition per output element. */
static double add_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    return (double)dl_shape_count(out);
}

const struct dl_op_kind dl_op_add = {
    .name = "add",
    .summary = "element-wise sum of its inputs, which must all have the same shape",
    .min_inputs = 2,
    .max_inputs = DL_MAX_INPUTS,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .backward_reads = DL_READS_DECLARED /* the output gradient alone */,
    .flops = add_flops,
    .tp.channel_local = 1,
    .tp.row_local = 1,
};
