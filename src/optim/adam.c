/* adam.c: Adam (Kingma and Ba 2015) and AdamW (Loshchilov and Hutter 2019),
 * as torch.optim.Adam / AdamW:
 *   Adam:  g' = g + wd*w                    AdamW: w *= 1 - lr*wd;  g' = g
 *   m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*g'^2
 *   w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) */
#include "optim/optim.h"

#include <math.h>

static void adam_update(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *state, long n, int decoupled)
{
    dl_real *m = state, *v = state + n;
    double c1 = 1 - pow(s->beta1, (double)t), c2 = 1 - pow(s->beta2, (double)t);
    /* Constants in locals and simd loops (one per weight-decay kind):
     * vectorized, with the same per-element arithmetic as a scalar loop. */
    const double b1 = s->beta1, b2 = s->beta2, wd = s->weight_decay, eps = s->eps, shrink = 1 - lr * wd;
    if (decoupled) {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) {
            double d = g[i];
            dl_real wi = (dl_real)(w[i] * shrink);
            m[i] = (dl_real)(b1 * m[i] + (1 - b1) * d);
            v[i] = (dl_real)(b2 * v[i] + (1 - b2) * d * d);
            w[i] = wi - (dl_real)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps));
        }
    } else {
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) {
            double d = g[i] + wd * w[i];
            m[i] = (dl_real)(b1 * m[i] + (1 - b1) * d);
            v[i] = (dl_real)(b2 * v[i] + (1 - b2) * d * d);
            w[i] -= (dl_real)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps));
        }
    }
}

static void adam_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                      dl_real *state, long n)
{
    adam_update(s, lr, t, w, g, state, n, 0);
}

static void adamw_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                       dl_real *state, long n)
{
    adam_update(s, lr, t, w, g, state, n, 1);
}

const struct dl_optim_algo dl_optim_adam = {"adam", 2, adam_step};
const struct dl_optim_algo dl_optim_adamw = {"adamw", 2, adamw_step};
