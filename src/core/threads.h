/* threads.h: the one thread-count setting (--threads) that governs OpenMP
 * loops in the project's own ops and the libraries' thread pools. */
#ifndef DL_THREADS_H
#define DL_THREADS_H

/* Cores this process may run on (sched_getaffinity), at least 1. */
int dl_threads_available(void);
/* Sets the thread count everywhere; n <= 0 means dl_threads_available(). */
void dl_threads_set(int n);
int dl_threads_get(void);

#endif
