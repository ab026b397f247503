/* rmsprop.c: RMSProp (Tieleman and Hinton 2012; torch.optim.RMSprop,
 * non-centred):  g' = g + wd*w;  v = alpha*v + (1-alpha)*g'^2;
 * u = g' / (sqrt(v) + eps);  with momentum b = mu*b + u, w -= lr*b; else w -= lr*u. */
#include "optim/optim.h"

#include <math.h>

static void rmsprop_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                         dl_real *state, long n)
{
    dl_real *v = state, *buf = state + n;
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double d = g[i] + s->weight_decay * w[i];
        v[i] = (dl_real)(s->alpha * v[i] + (1 - s->alpha) * d * d);
        double u = d / (sqrt((double)v[i]) + s->eps);
        if (s->momentum > 0) {
            buf[i] = (dl_real)(s->momentum * buf[i] + u);
            u = buf[i];
        }
        w[i] -= (dl_real)(lr * u);
    }
}

const struct dl_optim_algo dl_optim_rmsprop = {"rmsprop", 2, rmsprop_step};
