/* batcher.h: iteration over a dataset in mini-batches, one epoch at a time,
 * with a seeded shuffle and data-parallel sharding.  Every rank computes the
 * same global order; global batch k is split into contiguous per-rank slices,
 * so the ranks' slices concatenated in rank order are exactly the batch one
 * process would see: this is what makes data-parallel training equal serial.
 * For a dataset with a sample source (image folders) each rank makes only its
 * own slices, on a pool of decode threads that keeps `prefetch` batches ready
 * ahead of the step; a sample's random transform is seeded from (seed, epoch,
 * sample), so the result does not depend on the thread or rank count.  A
 * sample that cannot be read is replaced by the next readable one of the
 * dataset (same slot, same seed: still independent of threads and ranks),
 * with a warning naming its file, unless bad_samples is DL_BAD_FAIL. */
#ifndef DL_BATCHER_H
#define DL_BATCHER_H

#include <pthread.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/permutation.h"

struct dl_prefetch;

/* Warnings (unreadable samples) go to this callback, on the thread that
 * calls dl_batcher_next, never on a decode thread. */
typedef void (*dl_batcher_warn_fn)(void *ctx, const char *msg);

#define DL_BATCHER_PENDING_WARNINGS 8
/* The most samples shuffled through an array of their indices (16 MiB);
 * more (a large corpus's windows) are shuffled by data/permutation.h in
 * constant memory. */
#define DL_BATCHER_ARRAY_MAX (1L << 22)

struct dl_batcher {
    const struct dl_dataset *ds; /* borrowed: must outlive the batcher */
    int global_batch;            /* B: samples per step over all ranks */
    int rank, nranks;            /* this process's slice of every batch */
    int shuffle, drop_last;
    uint64_t seed;
    int *perm;                   /* ds->n sample indices in this epoch's order, shuffled, when at most
                                    DL_BATCHER_ARRAY_MAX; NULL: the order below, or none (no shuffle) */
    struct dl_permutation order; /* a shuffle of more samples: this epoch's, position by position */
    long steps;                  /* global batches per epoch */
    long epoch, step;            /* cursor: the next batch is `step` of `epoch` */
    int last_global;             /* size of the global batch last returned */
    /* dl_batcher_count_labels: the labels not equal to ignored_label per
     * sample of the global batch last returned, every rank's slice of it
     * (a loss's divisor, struct dl_op_call's label_norm). */
    int count_labels, ignored_label;
    double last_label_norm;
    /* range mode (dl_batcher_init_range): samples first.. in order */
    int range;
    long first, count;
    /* sample sources */
    struct dl_prefetch *prefetch;
    double waited_s;             /* time dl_batcher_next spent waiting for decoding */
    struct dl_error error;       /* why dl_batcher_next returned -1 */
    void *view_x;                /* dl_batcher_next_view's buffers (x of the dataset's dtype) */
    int *view_y;
    /* unreadable samples (guarded by bad_mu: decode threads find them) */
    pthread_mutex_t bad_mu;
    unsigned char *bad;          /* one flag per sample */
    long bad_count, bad_reported;
    int pending;                 /* warnings not yet delivered */
    char pending_msg[DL_BATCHER_PENDING_WARNINGS][320];
    dl_batcher_warn_fn warn;
    void *warn_ctx;
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

/* Sequential reading (evaluation): samples first..first+count-1 in order, in
 * batches of `batch` (the last one smaller); one process, no shuffle. */
int dl_batcher_init_range(struct dl_batcher *b, const struct dl_dataset *ds, int batch, long first,
                          long count, struct dl_error *err);

/* From now on dl_batcher_next counts the labels that are not `ignored`
 * over the whole global batch (every rank's samples, read again on each:
 * the batch is the same on every rank) into b->last_label_norm. */
void dl_batcher_count_labels(struct dl_batcher *b, int ignored);

/* Where warnings go (default: nowhere). */
void dl_batcher_set_warning(struct dl_batcher *b, dl_batcher_warn_fn fn, void *ctx);

/* Moves to step 0 of epoch: the order is a shuffle of 0..n-1 seeded from
 * (seed, epoch) only, the same on every rank and on every resume. */
void dl_batcher_start_epoch(struct dl_batcher *b, long epoch);

/* Moves to an arbitrary (epoch, step), 0 <= step <= steps per epoch, e.g. the
 * cursor saved in a checkpoint (b->epoch, b->step). */
int dl_batcher_seek(struct dl_batcher *b, long epoch, long step, struct dl_error *err);

/* Copies this rank's slice of the next global batch into x (size x
 * dl_shape_count values of the dataset's dtype, ds->shape.dtype: floats, or
 * a text dataset's token ids as int32_t) and y (size labels) and returns its
 * size, which is at least 1 and at most dl_batcher_max_local(b); returns 0
 * at the end of the epoch, and -1 when a sample could not be made (an
 * unreadable one with DL_BAD_FAIL, or out of memory): the message is in
 * b->error.  The global batch size is then in b->last_global. */
int dl_batcher_next(struct dl_batcher *b, void *x, int *y);

/* Same, returning pointers (valid until the next call) instead of copying:
 * into the dataset itself for in-memory data read in range mode. */
int dl_batcher_next_view(struct dl_batcher *b, const void **x, const int **y);

/* Unreadable samples met so far. */
long dl_batcher_bad_samples(struct dl_batcher *b);

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
