/* rmsprop.c: RMSProp (Tieleman and Hinton 2012; torch.optim.RMSprop,
 * non-centred):  g' = g + wd*w;  v = alpha*v + (1-alpha)*g'^2;
 * u = g' / (sqrt(v) + eps);  with momentum b = mu*b + u, w -= lr*b; else w -= lr*u. */
#include "optim/optim.h"

#include <math.h>

static void rmsprop_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                         dl_real *state, long n)
{
    dl_real *v = state, *buf = state + n;
    /* Constants in locals and simd loops (one per momentum choice): vectorized,
     * with the same per-element arithmetic as a scalar loop. */
    const double wd = s->weight_decay, alpha = s->alpha, eps = s->eps, mu = s->momentum;
    if (mu > 0) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) {
            double d = g[i] + wd * w[i];
            v[i] = (dl_real)(alpha * v[i] + (1 - alpha) * d * d);
            buf[i] = (dl_real)(mu * buf[i] + d / (sqrt((double)v[i]) + eps));
            w[i] -= (dl_real)(lr * buf[i]);
        }
    } else {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) {
            double d = g[i] + wd * w[i];
            v[i] = (dl_real)(alpha * v[i] + (1 - alpha) * d * d);
            w[i] -= (dl_real)(lr * (d / (sqrt((double)v[i]) + eps)));
        }
    }
}

const struct dl_optim_algo dl_optim_rmsprop = {"rmsprop", 2, rmsprop_step};
