/* pareto.c: the Pareto set of configurations on (time, workspace): the ones
 * that no other configuration beats on both.  Sorting by workspace, then
 * time, a configuration survives when it is faster than every smaller one. */
#include "tune/tune_impl.h"

#include <stdlib.h>

static int by_ws_then_time(const void *a, const void *b)
{
    const struct dl_tune_config *x = a, *y = b;
    if (x->ws != y->ws)
        return x->ws < y->ws ? -1 : 1;
    return (x->time_s > y->time_s) - (x->time_s < y->time_s);
}

int dl_tune_pareto(struct dl_tune_config *c, int n)
{
    if (n <= 0)
        return 0;
    qsort(c, (size_t)n, sizeof *c, by_ws_then_time);
    int k = 1;
    for (int i = 1; i < n; i++)
        if (c[i].time_s < c[k - 1].time_s)
            c[k++] = c[i];
    return k;
}
