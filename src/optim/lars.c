/* lars.c: LARS, layer-wise adaptive rate scaling (You, Gitman and Ginsburg
 * 2017, Algorithm 1), one parameter tensor at a time:
 *   ratio = eta ||w|| / (||g|| + wd ||w||)   (1 where ||w|| or ||g|| is 0)
 *   b = mu b + lr ratio (g + wd w);  w -= b
 * eta is train.optimizer.trust_coefficient.  A tensor no_decay leaves out
 * (adapt 0) takes momentum SGD's step: ratio 1 and no weight decay. */
#include "optim/optim.h"
#include "optim/update_rules.h"

#include <math.h>

static int lars_step(const struct dl_optim_spec *s, double lr, long t, dl_real *restrict w,
                     const dl_real *restrict g, dl_real *restrict buf, long n, long stride, int adapt,
                     long rows)
{
    (void)t;
    (void)stride;
    (void)rows;
    const double wd = adapt ? s->weight_decay : 0, mu = s->momentum;
    double ratio = 1;
    if (adapt) {
        double wn = sqrt(dl_optim_sq_sum(w, n)), gn = sqrt(dl_optim_sq_sum(g, n));
        if (wn > 0 && gn > 0)
            ratio = s->trust_coefficient * wn / (gn + wd * wn);
    }
    const double rate = lr * ratio;
    #pragma omp parallel for simd schedule(static) if (n > (1L << 16))
    for (long i = 0; i < n; i++)
        dl_rule_lars(&w[i], g[i], &buf[i], wd, mu, rate);
    return DL_OK;
}

const struct dl_optim_algo dl_optim_lars = {.name = "lars", .state_vectors = 1, .tensor_step = lars_step,
                                            .kind = DL_OPTIM_LARS};
