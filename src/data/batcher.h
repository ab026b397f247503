/* batcher.h: iteration over a dataset in mini-batches, one epoch at a time,
 * with a seeded shuffle and data-parallel sharding.  Every rank computes the
 * same global order; global batch k is split into contiguous per-rank slices,
 * so the ranks' slices concatenated in rank order are exactly the batch one
 * process would see: this is what makes data-parallel training equal serial. */
#ifndef DL_BATCHER_H
#define DL_BATCHER_H

#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"

struct dl_batcher {
    const struct dl_dataset *ds; /* borrowed: must outlive the batcher */
    int global_batch;            /* B: samples per step over all ranks */
    int rank, nranks;            /* this process's slice of every batch */
    int shuffle, drop_last;
    uint64_t seed;
    int *perm;                   /* ds->n sample indices in this epoch's order */
    long steps;                  /* global batches per epoch */
    long epoch, step;            /* cursor: the next batch is `step` of `epoch` */
    int last_global;             /* size of the global batch last returned */
};

/* Prepares iteration and positions the cursor at epoch 0, step 0.  Requires
 * 1 <= nranks <= global_batch and 0 <= rank < nranks.  The last global batch of
 * an epoch holds the n % B leftover samples; it is dropped with drop_last,
 * and also whenever it has fewer than nranks samples (so that no rank ever
 * gets an empty slice while the others train). */
int dl_batcher_init(struct dl_batcher *b, const struct dl_dataset *ds, int global_batch,
                    int rank, int nranks, int shuffle, uint64_t seed, int drop_last,
                    struct dl_error *err);
void dl_batcher_free(struct dl_batcher *b);

/* Moves to step 0 of epoch: the order is a shuffle of 0..n-1 seeded from
 * (seed, epoch) only, the same on every rank and on every resume. */
void dl_batcher_start_epoch(struct dl_batcher *b, long epoch);

/* Moves to an arbitrary (epoch, step), 0 <= step <= steps per epoch, e.g. the
 * cursor saved in a checkpoint (b->epoch, b->step). */
int dl_batcher_seek(struct dl_batcher *b, long epoch, long step, struct dl_error *err);

/* Copies this rank's slice of the next global batch into x (size x
 * dl_shape_count floats) and y (size labels) and returns its size, which is
 * at least 1 and at most dl_batcher_max_local(b); returns 0 at the end of the
 * epoch.  The global batch size is then in b->last_global. */
int dl_batcher_next(struct dl_batcher *b, float *x, int *y);

long dl_batcher_steps_per_epoch(const struct dl_batcher *b);

/* Every rank's slice must hold at least `samples` (a pipeline's chunks): the
 * last global batch of an epoch is dropped when it is too small for that. */
void dl_batcher_min_slice(struct dl_batcher *b, int samples);

/* Index, in the global batch last returned, of this rank's first sample. */
static inline long dl_batcher_last_offset(const struct dl_batcher *b)
{
    return (long)b->rank * b->last_global / b->nranks;
}

/* Largest slice dl_batcher_next can return on this rank (buffer sizing). */
int dl_batcher_max_local(const struct dl_batcher *b);

#endif
