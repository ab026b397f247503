/* sgd.c: stochastic gradient descent with optional momentum and Nesterov
 * momentum, and L2 weight decay added to the gradient (torch.optim.SGD,
 * dampening 0):  g' = g + wd*w;  b = mu*b + g';  step = nesterov ? g' + mu*b : b;
 * w -= lr*step.  Without momentum, step = g'. */
#include "optim/optim.h"

static void sgd_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                     dl_real *buf, long n)
{
    const dl_real wd = (dl_real)s->weight_decay, mu = (dl_real)s->momentum, rate = (dl_real)lr;
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        dl_real d = g[i] + wd * w[i];
        if (mu != 0) {
            buf[i] = mu * buf[i] + d;
            d = s->nesterov ? d + mu * buf[i] : buf[i];
        }
        w[i] -= rate * d;
    }
}

const struct dl_optim_algo dl_optim_sgd = {"sgd", 1, sgd_step};
