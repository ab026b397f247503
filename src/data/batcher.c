/* batcher.c: seeded per-epoch permutation and the contiguous per-rank slice
 * [r*B/p, (r+1)*B/p) of every global batch. */
#include "data/batcher.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

int dl_batcher_init(struct dl_batcher *b, const struct dl_dataset *ds, int global_batch,
                    int rank, int nranks, int shuffle, uint64_t seed, int drop_last,
                    struct dl_error *err)
{
    memset(b, 0, sizeof *b);
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return dl_errorf(err, DL_ERR_INTERNAL, "batcher: rank %d of %d ranks", rank, nranks);
    if (global_batch < nranks)
        return dl_errorf(err, DL_ERR_SPEC,
                         "batch size %d is smaller than the %d data-parallel ranks: expected "
                         "at least one sample per rank",
                         global_batch, nranks);
    if (ds->n < 1 || ds->n > INT_MAX)
        return dl_errorf(err, DL_ERR_DATA, "%s: %ld samples: expected 1..%d", ds->name, ds->n,
                         INT_MAX);
    b->perm = dl_calloc((size_t)ds->n, sizeof *b->perm, err);
    if (!b->perm)
        return err ? err->code : DL_ERR_NOMEM;
    b->ds = ds;
    b->global_batch = global_batch;
    b->rank = rank;
    b->nranks = nranks;
    b->shuffle = shuffle;
    b->drop_last = drop_last;
    b->seed = seed;
    long rest = ds->n % global_batch;
    b->steps = ds->n / global_batch + (rest >= nranks && !drop_last);
    if (b->steps == 0) {
        dl_batcher_free(b);
        return dl_errorf(err, DL_ERR_SPEC,
                         "%s: %ld samples make no batch of %d%s", ds->name, ds->n, global_batch,
                         drop_last ? " with drop_last" : " across the ranks");
    }
    dl_batcher_start_epoch(b, 0);
    return DL_OK;
}

void dl_batcher_free(struct dl_batcher *b)
{
    if (!b)
        return;
    free(b->perm);
    memset(b, 0, sizeof *b);
}

void dl_batcher_start_epoch(struct dl_batcher *b, long epoch)
{
    for (long i = 0; i < b->ds->n; i++)
        b->perm[i] = (int)i;
    if (b->shuffle) {
        /* dl_rng_seed runs the value through splitmix64, so neighbouring
         * epochs get unrelated streams. */
        struct dl_rng r;
        dl_rng_seed(&r, b->seed ^ ((uint64_t)epoch * 0x9e3779b97f4a7c15ULL + 0x62617463ULL));
        dl_rng_shuffle(&r, b->perm, b->ds->n);
    }
    b->epoch = epoch;
    b->step = 0;
    b->last_global = 0;
}

int dl_batcher_seek(struct dl_batcher *b, long epoch, long step, struct dl_error *err)
{
    if (epoch < 0 || step < 0 || step > b->steps)
        return dl_errorf(err, DL_ERR_DATA,
                         "%s: cannot resume at epoch %ld step %ld: expected epoch >= 0 and "
                         "step 0..%ld",
                         b->ds->name, epoch, step, b->steps);
    dl_batcher_start_epoch(b, epoch);
    b->step = step;
    return DL_OK;
}

int dl_batcher_next(struct dl_batcher *b, float *x, int *y)
{
    if (b->step >= b->steps)
        return 0;
    long start = b->step * b->global_batch;
    long gsize = b->ds->n - start < b->global_batch ? b->ds->n - start : b->global_batch;
    long lo = start + (long)b->rank * gsize / b->nranks;
    long hi = start + (long)(b->rank + 1) * gsize / b->nranks;
    long count = dl_shape_count(b->ds->shape);
    for (long i = lo; i < hi; i++) {
        long s = b->perm[i];
        memcpy(x + (i - lo) * count, b->ds->x + s * count, (size_t)count * sizeof *x);
        y[i - lo] = b->ds->y[s];
    }
    b->step++;
    b->last_global = (int)gsize;
    return (int)(hi - lo);
}

long dl_batcher_steps_per_epoch(const struct dl_batcher *b)
{
    return b->steps;
}

int dl_batcher_max_local(const struct dl_batcher *b)
{
    /* floor((r+1)g/p) - floor(rg/p) <= ceil(g/p) <= ceil(B/p) for g <= B. */
    return (b->global_batch + b->nranks - 1) / b->nranks;
}

void dl_batcher_min_slice(struct dl_batcher *b, int samples)
{
    long rest = b->ds->n % b->global_batch;
    if (rest > 0 && rest < (long)b->nranks * samples && b->steps > b->ds->n / b->global_batch)
        b->steps--;
}
