/* clock.h: timing: the one clock for elapsed times (step and epoch times,
 * kernel and allreduce timings, stall and checkpoint schedules), seconds on
 * the monotonic clock, which never jumps when the wall clock is set; and the
 * median that every benchmark and calibration takes of repeated timings. */
#ifndef DL_CLOCK_H
#define DL_CLOCK_H

#include <pthread.h>

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): only differences
 * between two readings mean anything. */
double dl_clock_now(void);

/* Waits at least seconds (nothing for seconds <= 0), to a deadline on the
 * same clock, so that a signal handled on the way does not shorten it:
 * asleep until 300 us before it, then reading the clock until it (the core
 * stays busy, as an MPI wait's polling does), so that short waits
 * (--comm-emulate's latencies) last what they say rather than a timer's
 * wake-up delay. */
void dl_clock_sleep(double seconds);

/* pthread_cond_timedwait on cv (default attributes: the wall clock's
 * deadlines) for at most seconds from now; returns its status. */
int dl_clock_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds);

/* Sorts t[0..n) ascending in place and returns t[n / 2] (n > 0). */
double dl_median(double *t, int n);

#endif
