/* sgd.c: stochastic gradient descent with optional momentum and Nesterov
 * momentum, and L2 weight decay added to the gradient (torch.optim.SGD,
 * dampening 0):  g' = g + wd*w;  b = mu*b + g';  step = nesterov ? g' + mu*b : b;
 * w -= lr*step.  Without momentum, step = g'. */
#include "optim/optim.h"
#include "optim/update_rules.h"

/* Three loops with the choices hoisted out, so that each one vectorizes. */
static int sgd_step(const struct dl_optim_spec *s, double lr, long t, dl_real *restrict w,
                    const dl_real *restrict g, dl_real *restrict buf, long n, long stride)
{
    const dl_real wd = (dl_real)s->weight_decay, mu = (dl_real)s->momentum, rate = (dl_real)lr;
    if (mu == 0) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_sgd(&w[i], g[i], wd, rate);
    } else if (s->nesterov) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_sgd_nesterov(&w[i], g[i], &buf[i], wd, mu, rate);
    } else {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_sgd_momentum(&w[i], g[i], &buf[i], wd, mu, rate);
    }
    return DL_OK;
}

const struct dl_optim_algo dl_optim_sgd = {.name = "sgd", .state_vectors = 1, .step = sgd_step, .kind = DL_OPTIM_SGD};
