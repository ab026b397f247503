/* adam.c: Adam (Kingma and Ba 2015) and AdamW (Loshchilov and Hutter 2019),
 * as torch.optim.Adam / AdamW:
 *   Adam:  g' = g + wd*w                    AdamW: w *= 1 - lr*wd;  g' = g
 *   m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*g'^2
 *   w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) */
#include "optim/optim.h"
#include "optim/update_rules.h"

#include <math.h>

void dl_optim_adam_corrections(const struct dl_optim_spec *s, double lr, long t, double *c1, double *c2,
                               double *shrink)
{
    *c1 = 1 - pow(s->beta1, (double)t);
    *c2 = 1 - pow(s->beta2, (double)t);
    *shrink = 1 - lr * s->weight_decay;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void adam_update(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *state, long n, long stride, int decoupled)
{
    dl_real *m = state, *v = state + stride;
    double c1, c2, shrink;
    dl_optim_adam_corrections(s, lr, t, &c1, &c2, &shrink);
    /* Constants in locals and simd loops (one per weight-decay kind):
     * vectorized, with the same per-element arithmetic as a scalar loop. */
    const double b1 = s->beta1, b2 = s->beta2, wd = s->weight_decay, eps = s->eps;
    if (decoupled) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_adam(&w[i], g[i], &m[i], &v[i], 1, b1, b2, c1, c2, wd, shrink, eps, lr);
    } else {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dl_rule_adam(&w[i], g[i], &m[i], &v[i], 0, b1, b2, c1, c2, wd, shrink, eps, lr);
    }
}

static int adam_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                     dl_real *state, long n, long stride)
{
    adam_update(s, lr, t, w, g, state, n, stride, 0);
    return DL_OK;
}

static int adamw_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                      dl_real *state, long n, long stride)
{
    adam_update(s, lr, t, w, g, state, n, stride, 1);
    return DL_OK;
}

const struct dl_optim_algo dl_optim_adam = {.name = "adam", .state_vectors = 2, .step = adam_step,
                                            .kind = DL_OPTIM_ADAM};
const struct dl_optim_algo dl_optim_adamw = {.name = "adamw", .state_vectors = 2, .step = adamw_step,
                                             .kind = DL_OPTIM_ADAMW};
