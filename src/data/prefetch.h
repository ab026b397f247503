/* prefetch.h: a pool of threads that fill a bounded ring of batch slots
 * ahead of the consumer.  Batches first..end-1 are made in order: each free
 * slot takes the next batch, the threads take that batch's samples one at a
 * time (so two threads share even a batch of 2), and the consumer copies a
 * batch out as soon as all its samples are done, which frees the slot for
 * the batch `depth` places later.  What a sample is comes from the caller's
 * callbacks; this file knows only batches and sample numbers. */
#ifndef DL_PREFETCH_H
#define DL_PREFETCH_H

#include <stddef.h>

#include "core/error.h"

struct dl_prefetch_ops {
    /* Samples in batch k (>= 1), called under the pool's lock. */
    int (*count)(void *ctx, long batch);
    /* Makes sample j of batch k into x (sample_floats) and *y, on a pool
     * thread.  A nonzero status stops the pool at that batch. */
    int (*load)(void *ctx, long batch, int j, float *x, int *y, struct dl_error *err);
};

struct dl_prefetch;

/* Starts `threads` >= 1 threads and `depth` >= 1 slots of max_batch samples;
 * nothing is made until dl_prefetch_restart. */
int dl_prefetch_create(const struct dl_prefetch_ops *ops, void *ctx, int threads, int depth,
                       size_t sample_floats, int max_batch, struct dl_prefetch **out,
                       struct dl_error *err);

/* Drops all queued work, waits for the samples being made to finish (so the
 * caller may change what the callbacks read after this returns), then makes
 * batches first..end-1. */
void dl_prefetch_restart(struct dl_prefetch *p, long first, long end);

/* Waits for the next batch in order and copies it into x and y: returns its
 * sample count, 0 after the last batch, or -1 with *err when making it
 * failed.  Seconds spent waiting are added to *waited when not NULL. */
int dl_prefetch_next(struct dl_prefetch *p, float *x, int *y, double *waited, struct dl_error *err);

void dl_prefetch_free(struct dl_prefetch *p);

#endif
