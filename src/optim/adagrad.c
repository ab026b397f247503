/* adagrad.c: AdaGrad (Duchi et al. 2011; torch.optim.Adagrad without lr decay):
 * g' = g + wd*w;  s += g'^2;  w -= lr * g' / (sqrt(s) + eps). */
#include "optim/optim.h"

#include <math.h>

static void adagrad_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                         dl_real *sum, long n)
{
    /* Constants in locals and a simd loop: vectorized, same arithmetic. */
    const double wd = s->weight_decay, eps = s->eps;
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        double d = g[i] + wd * w[i];
        sum[i] += (dl_real)(d * d);
        w[i] -= (dl_real)(lr * d / (sqrt((double)sum[i]) + eps));
    }
}

const struct dl_optim_algo dl_optim_adagrad = {"adagrad", 1, adagrad_step};
