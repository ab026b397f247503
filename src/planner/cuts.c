/* cuts.c: stage cuts minimising the costliest stage, then the largest
 * memory (see cuts.h).  O(P n^2) time, O(P n) memory. */
#include "planner/cuts.h"

#include <math.h>
#include <stdlib.h>

/* best[k][i]: the least largest value over cuts of items [0, i) into k runs
 * whose run sums of `val` are the values, restricted (cap >= 0) to cuts
 * whose every run's sum of `limit` is at most cap; INFINITY when there is
 * none.  from[k][i]: where its last run starts. */
static void min_max(const double *pre_val, const double *pre_limit, double cap, int n, int P, double *best,
                    int *from)
{
#define B(k, i) best[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
#define F(k, i) from[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
    for (int k = 0; k <= P; k++)
        for (int i = 0; i <= n; i++)
            B(k, i) = INFINITY, F(k, i) = -1;
    B(0, 0) = -INFINITY;
    for (int k = 1; k <= P; k++)
        for (int i = k; i <= n; i++)
            for (int j = k - 1; j < i; j++) { /* the last run is [j, i) */
                if (B(k - 1, j) == INFINITY || (cap >= 0 && pre_limit[i] - pre_limit[j] > cap))
                    continue;
                double v = fmax(B(k - 1, j), pre_val[i] - pre_val[j]);
                if (v < B(k, i)) /* ties keep the earliest start */
                    B(k, i) = v, F(k, i) = j;
            }
#undef B
#undef F
}

int dl_cuts_balance(const double *cost, const double *mem, int n, int P, int *first, double *max_cost,
                    double *max_mem, struct dl_error *err)
{
    if (P < 1 || P > n)
        return dl_errorf(err, DL_ERR_SPEC, "%d stages for %d layers: each stage needs a layer", P, n);
    size_t cells = (size_t)(P + 1) * (size_t)(n + 1);
    double *pc = dl_calloc((size_t)n + 1, sizeof *pc, err), *pm = dl_calloc((size_t)n + 1, sizeof *pm, err);
    double *best = dl_calloc(cells, sizeof *best, err);
    int *from = dl_calloc(cells, sizeof *from, err);
    if (!pc || !pm || !best || !from) {
        free(pc), free(pm), free(best), free(from);
        return DL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        pc[i + 1] = pc[i] + cost[i], pm[i + 1] = pm[i] + mem[i];
    min_max(pc, NULL, -1, n, P, best, from);
    double C = best[(size_t)P * (size_t)(n + 1) + (size_t)n];
    /* C is one of the differences pc[i] - pc[j] computed the same way, so
     * the cut that achieved it passes the cap exactly. */
    min_max(pm, pc, C, n, P, best, from);
    double Mx = best[(size_t)P * (size_t)(n + 1) + (size_t)n];
    first[P] = n;
    for (int k = P, i = n; k >= 1; k--) {
        i = from[(size_t)k * (size_t)(n + 1) + (size_t)i];
        first[k - 1] = i;
    }
    if (max_cost)
        *max_cost = C;
    if (max_mem)
        *max_mem = Mx;
    free(pc), free(pm), free(best), free(from);
    return DL_OK;
}
