/* clock.c: the monotonic clock, sleeping on it, and the median of timings
 * (see clock.h). */
#include "core/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

double dl_clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The part of a wait that is not slept but spent reading the clock, as MPI
 * polls: a timed sleep wakes late by the kernel's timer slack and the
 * scheduler's delay (about 110 us on the development VM, where sleeping 20
 * us took 130), and yielding the core instead comes back a time slice late
 * when another process is runnable. */
#define YIELD_TAIL_S 300e-6

void dl_clock_sleep(double seconds)
{
    if (!(seconds > 0))
        return;
    double deadline = dl_clock_now() + seconds;
    if (seconds > YIELD_TAIL_S) {
        struct timespec now, until;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ns = (double)now.tv_nsec + (seconds - YIELD_TAIL_S) * 1e9;
        until.tv_sec = now.tv_sec + (time_t)(ns / 1e9);
        until.tv_nsec = (long)(ns - 1e9 * (double)(time_t)(ns / 1e9));
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
            ;
    }
    while (dl_clock_now() < deadline)
        ;
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

int dl_clock_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)((seconds - (double)(long)seconds) * 1e9);
    until.tv_sec += (time_t)seconds + ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    return pthread_cond_timedwait(cv, mu, &until);
}
