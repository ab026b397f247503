/* regression_loss.c: the regression losses mse and l1 on a vector of
 * predictions x (W, 1, 1) and float targets t (W per sample, the label
 * words' bits: core/target_bits.h):
 *   mse: out[n] = (1/W) sum_k (x_nk - t_nk)^2
 *   l1:  out[n] = (1/W) sum_k |x_nk - t_nk|
 * so that the trainer's mean of the per-sample losses over the mini-batch
 * is the mean over its N x W elements, PyTorch's nn.MSELoss and nn.L1Loss
 * with reduction='mean'.  Backward: din[n, k] = dout[n] f'(x_nk - t_nk) / W
 * with f'(d) = 2 d (mse) or sign(d) (l1; 0 at d = 0, as torch.sign). */
#include "ops/op.h"

#include <math.h>
#include <stddef.h>

#include "core/target_bits.h"

static int regression_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                            struct dl_error *err)
{
    char got[48];
    (void)attr, (void)n_in;
    if (in[0].h != 1 || in[0].w != 1 || dl_shape_rank(in[0]) == 2)
        return dl_errorf(err, DL_ERR_SPEC, "a regression loss (mse, l1) takes a vector of predictions (W, 1, 1), "
                         "one per target, found %s: put a flatten or global_avgpool layer before it",
                         dl_shape_str(in[0], got, sizeof got));
    *out = (struct dl_shape){1, 1, 1};
    return DL_OK;
}

static double squared(double d)
{
    return d * d;
}

static double squared_grad(double d)
{
    return 2 * d;
}

/* PyTorch's sign: 0 at 0, so a prediction on its target gets no gradient. */
static double sign_grad(double d)
{
    return (double)((d > 0) - (d < 0));
}

/* out[n] = mean over the sample's W values of f(x - t). */
static void regression_forward(const struct dl_op_call *c, double (*f)(double))
{
    int W = c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (long)n * W;
        const int *t = c->labels + (long)n * W;
        double sum = 0;
        for (int k = 0; k < W; k++)
            sum += f((double)x[k] - (double)dl_target_value(t[k]));
        dl_tensor_f32(&c->out)[n] = (dl_real)(sum / W);
    }
}

/* din[n, k] = dout[n] f'(x - t) / W. */
static void regression_backward(const struct dl_op_call *c, double (*df)(double))
{
    if (!c->din[0].data)
        return;
    int W = c->in[0].shape.c;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < c->batch; n++) {
        const dl_real *x = dl_tensor_const_f32(&c->in[0]) + (long)n * W;
        const int *t = c->labels + (long)n * W;
        dl_real *dx = dl_tensor_f32(&c->din[0]) + (long)n * W;
        double g = (double)dl_tensor_const_f32(&c->dout)[n] / W;
        for (int k = 0; k < W; k++)
            dx[k] = (dl_real)(g * df((double)x[k] - (double)dl_target_value(t[k])));
    }
}

static void mse_forward(const struct dl_op_call *c)
{
    regression_forward(c, squared);
}

static void mse_backward(const struct dl_op_call *c)
{
    regression_backward(c, squared_grad);
}

static void l1_forward(const struct dl_op_call *c)
{
    regression_forward(c, fabs);
}

static void l1_backward(const struct dl_op_call *c)
{
    regression_backward(c, sign_grad);
}

/* A difference and its square or absolute value, and the sum. */
static double regression_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    (void)attr, (void)out;
    return 3.0 * in[0].c;
}

/* The two kinds differ by name, summary and f, f'. */
#define DL_REGRESSION_KIND(sym, kind_name, kind_summary, fwd, bwd) \
    const struct dl_op_kind sym = {                                \
        .name = kind_name,                                         \
        .summary = kind_summary,                                   \
        .min_inputs = 1,                                           \
        .max_inputs = 1,                                           \
        .is_loss = 1,                                              \
        .float_targets = 1,                                        \
        .infer = regression_infer,                                 \
        .forward = fwd,                                            \
        .backward = bwd,                                           \
        .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,     \
        .flops = regression_flops,                                 \
    }

DL_REGRESSION_KIND(dl_op_mse, "mse",
                   "mean squared error of predictions against float targets (one per prediction), the mean over "
                   "the mini-batch's elements (PyTorch's MSELoss)", mse_forward, mse_backward);
DL_REGRESSION_KIND(dl_op_l1, "l1",
                   "mean absolute error of predictions against float targets (one per prediction), the mean over "
                   "the mini-batch's elements (PyTorch's L1Loss)", l1_forward, l1_backward);
