/* rmsprop.c: RMSProp (Tieleman and Hinton 2012; torch.optim.RMSprop,
 * non-centred):  g' = g + wd*w;  v = alpha*v + (1-alpha)*g'^2;
 * u = g' / (sqrt(v) + eps);  with momentum b = mu*b + u, w -= lr*b; else w -= lr*u. */
#include "optim/optim.h"
#include "optim/update_rules.h"


static int rmsprop_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *state, long n, long stride)
{
    dl_real *v = state, *buf = state + stride;
    /* Constants in locals and simd loops (one per momentum choice): vectorized,
     * with the same per-element arithmetic as a scalar loop. */
    const double wd = s->weight_decay, alpha = s->alpha, eps = s->eps, mu = s->momentum;
    if (mu > 0) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_rmsprop_momentum(&w[i], g[i], &v[i], &buf[i], wd, alpha, eps, mu, lr);
    } else {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_rmsprop(&w[i], g[i], &v[i], wd, alpha, eps, lr);
    }
    return DL_OK;
}

const struct dl_optim_algo dl_optim_rmsprop = {.name = "rmsprop", .state_vectors = 2, .step = rmsprop_step,
                                               .kind = DL_OPTIM_RMSPROP};
