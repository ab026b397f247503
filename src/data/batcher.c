/* batcher.c: seeded per-epoch permutation (an array of indices, or for more
 * than DL_BATCHER_ARRAY_MAX samples data/permutation.h's, computed per
 * position) and the contiguous per-rank slice
 * [r*B/p, (r+1)*B/p) of every global batch; for sample sources, the decode
 * pool's callbacks (which sample a slot holds, its augmentation seed, the
 * replacement of unreadable samples) and the delivery of their warnings. */
#include "data/batcher.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/prefetch.h"
#include "data/token_windows.h"

#define DEFAULT_THREADS 2
#define DEFAULT_PREFETCH 3

static int start_prefetch(struct dl_batcher *b, struct dl_error *err);

/* The common end of both initialisations: the decode pool, then epoch 0. */
static int start(struct dl_batcher *b, struct dl_error *err)
{
    b->epoch = -1;
    int rc = start_prefetch(b, err);
    if (rc) {
        dl_batcher_free(b);
        return rc;
    }
    dl_batcher_start_epoch(b, 0);
    return DL_OK;
}

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
    if (shuffle && ds->n <= DL_BATCHER_ARRAY_MAX) {
        b->perm = dl_calloc((size_t)ds->n, sizeof *b->perm, err);
        if (!b->perm)
            return err ? err->code : DL_ERR_NOMEM;
    }
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
    return start(b, err);
}

int dl_batcher_init_range(struct dl_batcher *b, const struct dl_dataset *ds, int batch, long first,
                          long count, struct dl_error *err)
{
    memset(b, 0, sizeof *b);
    if (batch < 1 || first < 0 || count < 0 || first + count > ds->n)
        return dl_errorf(err, DL_ERR_INTERNAL, "batcher: samples %ld..%ld of %ld in batches of %d", first,
                         first + count - 1, ds->n, batch);
    b->ds = ds;
    b->range = 1;
    b->first = first;
    b->count = count;
    b->global_batch = batch;
    b->nranks = 1;
    b->steps = (count + batch - 1) / batch;
    return start(b, err);
}

void dl_batcher_set_warning(struct dl_batcher *b, dl_batcher_warn_fn fn, void *ctx)
{
    b->warn = fn;
    b->warn_ctx = ctx;
}

/* ------------------------------------------------------------ slices */

/* Positions [*lo, *hi) of the epoch's order that this rank takes in step;
 * returns the global batch's size. */
static long slice(const struct dl_batcher *b, long step, long *lo, long *hi)
{
    long n = b->range ? b->count : b->ds->n;
    long start = step * b->global_batch;
    long gsize = n - start < b->global_batch ? n - start : b->global_batch;
    *lo = start + (long)b->rank * gsize / b->nranks;
    *hi = start + (long)(b->rank + 1) * gsize / b->nranks;
    return gsize;
}

static long sample_at(const struct dl_batcher *b, long pos)
{
    if (b->range)
        return b->first + pos;
    if (b->perm)
        return b->perm[pos];
    return b->shuffle ? (long)dl_permutation_at(&b->order, (uint64_t)pos) : pos;
}

/* ------------------------------------------------------------ sample sources */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Records that sample s cannot be read; the first time, queues a warning
 * (the decode threads never call the user's callback themselves). */
static void note_bad(struct dl_batcher *b, long s, const struct dl_error *e)
{
    pthread_mutex_lock(&b->bad_mu);
    if (!b->bad[s]) {
        b->bad[s] = 1;
        b->bad_count++;
        if (b->pending < DL_BATCHER_PENDING_WARNINGS)
            snprintf(b->pending_msg[b->pending++], sizeof b->pending_msg[0], "warning: %s: skipped: %s",
                     b->ds->name, e->msg);
    }
    pthread_mutex_unlock(&b->bad_mu);
}

static int is_bad(struct dl_batcher *b, long s)
{
    pthread_mutex_lock(&b->bad_mu);
    int bad = b->bad[s];
    pthread_mutex_unlock(&b->bad_mu);
    return bad;
}

/* Sample s with its own seed; when it cannot be read, the next readable
 * sample after it (wrapping) takes its place, with s's seed. */
static int make_sample(struct dl_batcher *b, long s, uint64_t seed, float *x, int *y, struct dl_error *err)
{
    const struct dl_dataset *ds = b->ds;
    for (long t = 0; t < ds->n; t++) {
        long k = (s + t) % ds->n;
        if (is_bad(b, k))
            continue;
        struct dl_error e = {0};
        int rc = ds->source->ops->load(ds->source, k, seed, x, &e);
        if (rc == DL_OK) {
            *y = ds->y[k];
            return DL_OK;
        }
        if (rc != DL_ERR_DATA) {
            *err = e;
            return rc;
        }
        if (ds->bad_samples == DL_BAD_FAIL) {
            dl_errorf(err, DL_ERR_DATA, "%s: %s (stopping: --bad-samples fail; 'skip' would go on without it)",
                      ds->name, e.msg);
            return DL_ERR_DATA;
        }
        note_bad(b, k, &e);
    }
    return dl_errorf(err, DL_ERR_DATA, "%s: none of the %ld samples can be read", ds->name, ds->n);
}

static int pool_count(void *ctx, long step)
{
    long lo, hi;
    slice(ctx, step, &lo, &hi);
    return (int)(hi - lo);
}

static int pool_load(void *ctx, long step, int j, float *x, int *y, struct dl_error *err)
{
    struct dl_batcher *b = ctx;
    long lo, hi;
    slice(b, step, &lo, &hi);
    long s = sample_at(b, lo + j);
    uint64_t seed = mix64(b->seed ^ mix64((uint64_t)b->epoch * 0x9e3779b97f4a7c15ULL + (uint64_t)s));
    return make_sample(b, s, seed, x, y, err);
}

static int start_prefetch(struct dl_batcher *b, struct dl_error *err)
{
    const struct dl_dataset *ds = b->ds;
    pthread_mutex_init(&b->bad_mu, NULL);
    if (!ds->source)
        return DL_OK;
    b->bad = dl_calloc((size_t)ds->n, 1, err);
    if (!b->bad)
        return DL_ERR_NOMEM;
    static const struct dl_prefetch_ops ops = {pool_count, pool_load};
    return dl_prefetch_create(&ops, b, ds->threads > 0 ? ds->threads : DEFAULT_THREADS,
                              ds->prefetch > 0 ? ds->prefetch : DEFAULT_PREFETCH, (size_t)dl_shape_count(ds->shape),
                              dl_batcher_max_local(b), &b->prefetch, err);
}

/* Hands the queued warnings to the callback, on the caller's thread. */
static void deliver_warnings(struct dl_batcher *b, int summary)
{
    if (!b->ds || !b->ds->source)
        return;
    char msgs[DL_BATCHER_PENDING_WARNINGS][320];
    pthread_mutex_lock(&b->bad_mu);
    int n = b->pending;
    memcpy(msgs, b->pending_msg, sizeof msgs[0] * (size_t)n);
    b->pending = 0;
    long count = b->bad_count, unreported = b->bad_count - b->bad_reported;
    if (summary)
        b->bad_reported = b->bad_count;
    pthread_mutex_unlock(&b->bad_mu);
    if (!b->warn)
        return;
    for (int i = 0; i < n; i++)
        b->warn(b->warn_ctx, msgs[i]);
    if (summary && unreported > 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "warning: %s: %ld unreadable sample%s skipped so far (each replaced by the next "
                 "readable one; --bad-samples fail stops instead)", b->ds->name, count, count == 1 ? "" : "s");
        b->warn(b->warn_ctx, msg);
    }
}

long dl_batcher_bad_samples(struct dl_batcher *b)
{
    if (!b->bad)
        return 0;
    pthread_mutex_lock(&b->bad_mu);
    long n = b->bad_count;
    pthread_mutex_unlock(&b->bad_mu);
    return n;
}

void dl_batcher_free(struct dl_batcher *b)
{
    if (!b || !b->ds)
        return;
    dl_prefetch_free(b->prefetch);
    deliver_warnings(b, 1);
    free(b->perm);
    free(b->bad);
    free(b->view_x);
    free(b->view_y);
    pthread_mutex_destroy(&b->bad_mu);
    memset(b, 0, sizeof *b);
}

void dl_batcher_start_epoch(struct dl_batcher *b, long epoch)
{
    if (epoch == b->epoch && b->step == 0)
        return; /* already there (and the first batches may be decoding) */
    if (b->prefetch) /* the threads read perm and epoch: stop them first */
        dl_prefetch_restart(b->prefetch, 0, 0);
    /* dl_rng_seed and dl_rng_hash run the value through splitmix64, so
     * neighbouring epochs get unrelated orders. */
    uint64_t epoch_seed = b->seed ^ ((uint64_t)epoch * 0x9e3779b97f4a7c15ULL + 0x62617463ULL);
    for (long i = 0; b->perm && i < b->ds->n; i++)
        b->perm[i] = (int)i;
    if (b->shuffle && b->perm) {
        struct dl_rng r;
        dl_rng_seed(&r, epoch_seed);
        dl_rng_shuffle(&r, b->perm, b->ds->n);
    } else if (b->shuffle) {
        dl_permutation_init(&b->order, (uint64_t)b->ds->n, epoch_seed);
    }
    b->epoch = epoch;
    b->step = 0;
    b->last_global = 0;
    if (b->prefetch)
        dl_prefetch_restart(b->prefetch, 0, b->steps);
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
    if (b->prefetch)
        dl_prefetch_restart(b->prefetch, step, b->steps);
    return DL_OK;
}

/* This rank's samples lo..hi-1 of the batch from memory into x (the
 * dataset's dtype) and y: a text dataset's windows of ids (i32), another's
 * float values. */
static void copy_samples(const struct dl_batcher *b, long lo, long hi, void *x, int *y)
{
    const struct dl_dataset *ds = b->ds;
    long count = dl_shape_count(ds->shape), P = dl_dataset_positions(ds);
    int32_t *ids = x;
    float *values = x;
    for (long i = lo; i < hi; i++) {
        long s = sample_at(b, i);
        if (ds->windows) {
            dl_token_windows_get(ds->windows, s, ids + (i - lo) * count, y + (i - lo) * P);
            continue;
        }
        memcpy(values + (i - lo) * count, ds->x + s * count, (size_t)count * sizeof *values);
        memcpy(y + (i - lo) * P, ds->y + s * P, (size_t)P * sizeof *y);
    }
}

int dl_batcher_next(struct dl_batcher *b, void *x, int *y)
{
    if (b->step >= b->steps) {
        deliver_warnings(b, 1);
        return 0;
    }
    long lo, hi;
    long gsize = slice(b, b->step, &lo, &hi);
    if (b->prefetch) { /* a sample source's decoded float values */
        int got = dl_prefetch_next(b->prefetch, x, y, &b->waited_s, &b->error);
        deliver_warnings(b, 0);
        if (got < 0)
            return -1;
        if (got != hi - lo) {
            dl_errorf(&b->error, DL_ERR_INTERNAL, "batcher: step %ld brought %d samples, expected %ld", b->step,
                      got, hi - lo);
            return -1;
        }
    } else {
        copy_samples(b, lo, hi, x, y);
    }
    if (b->count_labels) { /* the whole global batch, every rank's slice */
        long start = b->step * b->global_batch, labelled = 0;
        for (long i = start; i < start + gsize; i++)
            labelled += dl_dataset_labelled(b->ds, sample_at(b, i), b->ignored_label);
        b->last_label_norm = gsize > 0 ? (double)labelled / (double)gsize : 0;
    }
    b->step++;
    b->last_global = (int)gsize;
    return (int)(hi - lo);
}

void dl_batcher_count_labels(struct dl_batcher *b, int ignored)
{
    b->count_labels = 1;
    b->ignored_label = ignored;
}

int dl_batcher_next_view(struct dl_batcher *b, const void **x, const int **y)
{
    if (b->range && b->ds->x) { /* consecutive samples in memory: no copy */
        if (b->step >= b->steps)
            return 0;
        long lo, hi;
        b->last_global = (int)slice(b, b->step, &lo, &hi);
        b->step++;
        *x = b->ds->x + (b->first + lo) * dl_shape_count(b->ds->shape);
        *y = b->ds->y + (b->first + lo) * dl_dataset_positions(b->ds);
        return (int)(hi - lo);
    }
    if (!b->view_x) {
        size_t local = (size_t)dl_batcher_max_local(b);
        b->view_x = dl_calloc(local * (size_t)dl_shape_count(b->ds->shape), dl_dtype_size(b->ds->shape.dtype), &b->error);
        b->view_y = dl_calloc(local * (size_t)dl_dataset_positions(b->ds), sizeof *b->view_y, &b->error);
        if (!b->view_x || !b->view_y)
            return -1;
    }
    *x = b->view_x;
    *y = b->view_y;
    return dl_batcher_next(b, b->view_x, b->view_y);
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
