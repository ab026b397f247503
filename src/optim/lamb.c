/* lamb.c: LAMB, layer-wise adaptive moments (You et al. 2019, Algorithm 2,
 * with Adam's bias corrections), one parameter tensor at a time:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   r = (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd w
 *   w -= lr (||w|| / ||r||) r   (the ratio 1 where ||w|| or ||r|| is 0)
 * Two passes: the moments and both norms, then the update (r computed
 * again from the same values).  A tensor no_decay leaves out (adapt 0)
 * takes Adam's step: no weight decay, ratio 1. */
#include "optim/optim.h"
#include "optim/update_rules.h"

#include <math.h>

/* Cloned per instruction set and the loops simd (as adam.c's): the two
 * passes' divisions and square roots vectorize. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int lamb_step(const struct dl_optim_spec *s, double lr, long t, dl_real *restrict w,
                     const dl_real *restrict g, dl_real *restrict state, long n, long stride, int adapt,
                     long rows)
{
    (void)rows;
    dl_real *m = state, *v = state + stride;
    double c1, c2, shrink;
    dl_optim_adam_corrections(s, lr, t, &c1, &c2, &shrink);
    const double b1 = s->beta1, b2 = s->beta2, eps = s->eps, wd = adapt ? s->weight_decay : 0;
    double wsq = 0, rsq = 0;
    #pragma omp parallel for simd reduction(+ : wsq, rsq) schedule(static) if (n > (1L << 16))
    for (long i = 0; i < n; i++) {
        m[i] = (dl_real)(b1 * m[i] + (1 - b1) * g[i]);
        v[i] = (dl_real)(b2 * v[i] + (1 - b2) * (double)g[i] * g[i]);
        double r = dl_rule_lamb_direction(w[i], m[i], v[i], c1, c2, eps, wd);
        wsq += (double)w[i] * w[i];
        rsq += r * r;
    }
    double ratio = adapt && wsq > 0 && rsq > 0 ? sqrt(wsq) / sqrt(rsq) : 1, rate = lr * ratio;
    #pragma omp parallel for simd schedule(static) if (n > (1L << 16))
    for (long i = 0; i < n; i++)
        w[i] -= (dl_real)(rate * dl_rule_lamb_direction(w[i], m[i], v[i], c1, c2, eps, wd));
    return DL_OK;
}

const struct dl_optim_algo dl_optim_lamb = {.name = "lamb", .state_vectors = 2, .tensor_step = lamb_step,
                                            .kind = DL_OPTIM_LAMB};
