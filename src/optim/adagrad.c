/* adagrad.c: AdaGrad (Duchi et al. 2011; torch.optim.Adagrad without lr decay):
 * g' = g + wd*w;  s += g'^2;  w -= lr * g' / (sqrt(s) + eps). */
#include "optim/optim.h"
#include "optim/update_rules.h"


static int adagrad_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *sum, long n, long stride)
{
    /* Constants in locals and a simd loop: vectorized, same arithmetic. */
    const double wd = s->weight_decay, eps = s->eps;
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        dl_rule_adagrad(&w[i], g[i], &sum[i], wd, eps, lr);
    return DL_OK;
}

const struct dl_optim_algo dl_optim_adagrad = {.name = "adagrad", .state_vectors = 1, .step = adagrad_step,
                                               .kind = DL_OPTIM_ADAGRAD};
