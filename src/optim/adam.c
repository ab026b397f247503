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
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double d = g[i];
        if (decoupled)
            w[i] = (dl_real)(w[i] * (1 - lr * s->weight_decay));
        else
            d += s->weight_decay * w[i];
        m[i] = (dl_real)(s->beta1 * m[i] + (1 - s->beta1) * d);
        v[i] = (dl_real)(s->beta2 * v[i] + (1 - s->beta2) * d * d);
        w[i] -= (dl_real)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + s->eps));
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
