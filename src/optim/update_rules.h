/* update_rules.h: each optimizer's update of one weight, written once for
 * the host's loops (sgd.c, adagrad.c, rmsprop.c, adam.c) and the GPU's
 * (optim/cuda/optim_kernels.cu), so both apply the same arithmetic in
 * the same types (see each file's header for the rule and its PyTorch
 * counterpart; LARS's and LAMB's, lars.c and lamb.c, run on the host only).  w, buf, sum, v, m point at the weight and its state
 * values; the constants are the ones the loops hoist. */
#ifndef DL_OPTIM_UPDATE_RULES_H
#define DL_OPTIM_UPDATE_RULES_H

#include <math.h>

#include "core/host_device.h"
#include "core/real.h"

/* SGD without momentum: w -= lr (g + wd w). */
static inline DL_HOST_DEVICE void dl_rule_sgd(dl_real *w, dl_real g, dl_real wd, dl_real rate)
{
    *w -= rate * (g + wd * *w);
}

/* SGD with momentum: b = mu b + (g + wd w); w -= lr b. */
static inline DL_HOST_DEVICE void dl_rule_sgd_momentum(dl_real *w, dl_real g, dl_real *buf, dl_real wd, dl_real mu,
                                                       dl_real rate)
{
    dl_real b = mu * *buf + (g + wd * *w);
    *buf = b;
    *w -= rate * b;
}

/* SGD with Nesterov momentum: d = g + wd w; b = mu b + d; w -= lr (d + mu b). */
static inline DL_HOST_DEVICE void dl_rule_sgd_nesterov(dl_real *w, dl_real g, dl_real *buf, dl_real wd, dl_real mu,
                                                       dl_real rate)
{
    dl_real d = g + wd * *w, b = mu * *buf + d;
    *buf = b;
    *w -= rate * (d + mu * b);
}

/* AdaGrad: d = g + wd w; s += d^2; w -= lr d / (sqrt(s) + eps). */
static inline DL_HOST_DEVICE void dl_rule_adagrad(dl_real *w, dl_real g, dl_real *sum, double wd, double eps,
                                                  double lr)
{
    double d = g + wd * *w;
    *sum += (dl_real)(d * d);
    *w -= (dl_real)(lr * d / (sqrt((double)*sum) + eps));
}

/* RMSProp's square average of d = g + wd w, returning d. */
static inline DL_HOST_DEVICE double dl_rule_rmsprop_average(const dl_real *w, dl_real g, dl_real *v, double wd,
                                                            double alpha)
{
    double d = g + wd * *w;
    *v = (dl_real)(alpha * *v + (1 - alpha) * d * d);
    return d;
}

/* RMSProp without momentum: w -= lr d / (sqrt(v) + eps). */
static inline DL_HOST_DEVICE void dl_rule_rmsprop(dl_real *w, dl_real g, dl_real *v, double wd, double alpha,
                                                  double eps, double lr)
{
    double d = dl_rule_rmsprop_average(w, g, v, wd, alpha);
    *w -= (dl_real)(lr * (d / (sqrt((double)*v) + eps)));
}

/* RMSProp with momentum: b = mu b + d / (sqrt(v) + eps); w -= lr b. */
static inline DL_HOST_DEVICE void dl_rule_rmsprop_momentum(dl_real *w, dl_real g, dl_real *v, dl_real *buf, double wd,
                                                           double alpha, double eps, double mu, double lr)
{
    double d = dl_rule_rmsprop_average(w, g, v, wd, alpha);
    *buf = (dl_real)(mu * *buf + d / (sqrt((double)*v) + eps));
    *w -= (dl_real)(lr * *buf);
}

/* Adam's moments of d and its step lr (m / c1) / (sqrt(v / c2) + eps),
 * c1 and c2 the bias corrections 1 - beta^t. */
static inline DL_HOST_DEVICE dl_real dl_rule_adam_step(dl_real *m, dl_real *v, double d, double b1, double b2,
                                                       double c1, double c2, double eps, double lr)
{
    *m = (dl_real)(b1 * *m + (1 - b1) * d);
    *v = (dl_real)(b2 * *v + (1 - b2) * d * d);
    return (dl_real)(lr * (*m / c1) / (sqrt(*v / c2) + eps));
}

/* Adam (weight decay in the gradient) or, decoupled, AdamW (w shrunk by
 * shrink = 1 - lr wd first). */
static inline DL_HOST_DEVICE void dl_rule_adam(dl_real *w, dl_real g, dl_real *m, dl_real *v, int decoupled, double b1,
                                               double b2, double c1, double c2, double wd, double shrink, double eps,
                                               double lr)
{
    if (decoupled) {
        dl_real wi = (dl_real)(*w * shrink);
        *w = wi - dl_rule_adam_step(m, v, g, b1, b2, c1, c2, eps, lr);
    } else {
        double d = g + wd * *w;
        *w -= dl_rule_adam_step(m, v, d, b1, b2, c1, c2, eps, lr);
    }
}

/* LARS's momentum step with the tensor's rate lr x ratio: b = mu b + rate
 * (g + wd w); w -= b (You et al. 2017, Algorithm 1: the rate inside the
 * buffer). */
static inline DL_HOST_DEVICE void dl_rule_lars(dl_real *w, dl_real g, dl_real *buf, double wd, double mu,
                                               double rate)
{
    double b = mu * *buf + rate * (g + wd * *w);
    *buf = (dl_real)b;
    *w -= (dl_real)b;
}

/* LAMB's update direction before the trust ratio, from the moments m and v
 * (updated already): (m / c1) / (sqrt(v / c2) + eps) + wd w. */
static inline DL_HOST_DEVICE double dl_rule_lamb_direction(dl_real w, dl_real m, dl_real v, double c1, double c2,
                                                           double eps, double wd)
{
    return (m / c1) / (sqrt(v / c2) + eps) + wd * w;
}

#endif
