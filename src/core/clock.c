/* clock.c: the monotonic clock and the median of timings (see clock.h). */
#include "core/clock.h"

#include <stdlib.h>
#include <time.h>

double dl_clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dl_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, ascending);
    return t[n / 2];
}
