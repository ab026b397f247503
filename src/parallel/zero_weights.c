/* zero_weights.c: ZeRO stage 3's weights, gathered a layer at a time and
 * released after use (see zero_weights.h). */
#include "parallel/zero_weights.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/pages.h"

struct zrange {
    long lo, hi; /* weights [lo, hi) */
};

enum { LANE_NONE = -1, LANE_ALL = -2 };

/* The gathers' thread: a layer's weights gathered while the compute
 * thread runs the one before it, over a communicator of its own (a
 * duplicate of the data group's, so that its collectives never interleave
 * with the compute thread's on the same one). */
struct zlane {
    struct dl_comm *comm;   /* NULL: no thread (MPI without MPI_THREAD_MULTIPLE): gathers on the caller's */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int want;               /* the layer to gather next (LANE_NONE, LANE_ALL: every weight) */
    int busy, quit, rc;
    struct dl_error err;
};

struct dl_zero_weights {
    struct dl_comm *comm;
    struct dl_zero_shard shard;
    struct dl_exec **execs; /* whose hooks it set */
    int n_execs;
    dl_real *weights;
    long padded;            /* the vector's values: the ranks' blocks */
    struct zrange *ranges;  /* every layer's, sorted and merged within a layer */
    int *first;             /* [layer + 1]: layer i's ranges are [first[i], first[i + 1]) */
    int layers;
    int holding;            /* hold_all's: every weight is here */
    long gathered;          /* the most values gathered at once (two_largest) */
    double seconds;         /* the compute thread's waits for gathers */
    double gathering;       /* the gathers' own time (on the thread: the waits' and what was hidden) */
    size_t bytes;
    struct zlane lane;
    /* The order layers are used in, learnt from the last step: next[key] is
     * the use that came after use key (key = (phase - 1) x layers + layer;
     * -1: none seen), and the layer gathered ahead (-1: none). */
    int *next, last_key, prefetched;
};

static int by_lo(const void *a, const void *b)
{
    const struct zrange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Layer i's parameters' ranges of the flat weights (a tied parameter: its
 * owner's), sorted and merged, written at out (room for its n_params);
 * their count. */
static int layer_ranges(const struct dl_exec *e, int i, struct zrange *out)
{
    const struct dl_layer *l = &e->g->layers[i];
    int n = 0;
    for (int j = 0; e->flat.param_first && j < l->n_params; j++) {
        long at = e->flat.weight_index[e->flat.param_first[i] + j];
        if (at >= 0 && l->param[j].count > 0)
            out[n++] = (struct zrange){at, at + l->param[j].count};
    }
    qsort(out, (size_t)n, sizeof *out, by_lo);
    int m = 0;
    for (int k = 0; k < n; k++)
        if (m && out[k].lo <= out[m - 1].hi)
            out[m - 1].hi = out[k].hi > out[m - 1].hi ? out[k].hi : out[m - 1].hi;
        else
            out[m++] = out[k];
    return m;
}

static long values_of(const struct zrange *r, int n)
{
    long v = 0;
    for (int k = 0; k < n; k++)
        v += r[k].hi - r[k].lo;
    return v;
}

/* The two largest layers' values, a layer whose ranges start where the
 * largest's do (a tied parameter's other user) not counted again. */
static long two_largest(const struct dl_exec *e, const struct zrange *all, const int *first)
{
    long top = 0, second = 0, top_lo = -1;
    for (int i = 0; i < e->g->n; i++) {
        struct zrange own[e->g->layers[i].n_params > 0 ? e->g->layers[i].n_params : 1];
        const struct zrange *r = all ? all + first[i] : own;
        int m = all ? first[i + 1] - first[i] : layer_ranges(e, i, own);
        long v = values_of(r, m), lo = m ? r[0].lo : -1;
        if (v > top) {
            if (lo != top_lo)
                second = top;
            top = v, top_lo = lo;
        } else if (v > second && lo != top_lo) {
            second = v;
        }
    }
    return top + second;
}

long dl_zero_weights_gathered_of(const struct dl_exec *e)
{
    return two_largest(e, NULL, NULL);
}

long dl_zero_weights_gathered(const struct dl_zero_weights *z)
{
    return z->gathered;
}

/* The pages wholly inside weights [lo, hi) that hold none of this rank's
 * block handed back. */
static void release(struct dl_zero_weights *z, long lo, long hi)
{
    size_t v = sizeof *z->weights;
    dl_pages_release(z->weights, v * (size_t)lo, v * (size_t)hi, v * (size_t)z->shard.lo,
                     v * (size_t)(z->shard.lo + z->shard.block));
}

/* Weights [lo, hi) from their owners: each rank whose block meets the
 * range broadcasts its part. */
static int gather(struct dl_zero_weights *z, long lo, long hi, struct dl_error *err)
{
    const struct dl_zero_shard *sh = &z->shard;
    int rc = DL_OK;
    for (int r = (int)(lo / sh->block); !rc && r < sh->ranks && (long)r * sh->block < hi; r++) {
        long a = (long)r * sh->block > lo ? (long)r * sh->block : lo;
        long b = (long)(r + 1) * sh->block < hi ? (long)(r + 1) * sh->block : hi;
        size_t bytes = sizeof *z->weights * (size_t)(b - a);
        if (b <= a)
            continue;
        struct dl_comm *c = z->lane.comm ? z->lane.comm : z->comm;
        rc = c->ops->bcast(c, z->weights + a, bytes, r, err);
        if (r == sh->rank)
            z->bytes += bytes * (size_t)(sh->ranks - 1);
    }
    return rc;
}

/* Layer `layer`'s ranges gathered (LANE_ALL: every weight). */
static int gather_layer(struct dl_zero_weights *z, int layer, struct dl_error *err)
{
    if (layer == LANE_ALL)
        return gather(z, 0, z->padded, err);
    int rc = DL_OK;
    for (int k = z->first[layer]; !rc && k < z->first[layer + 1]; k++)
        rc = gather(z, z->ranges[k].lo, z->ranges[k].hi, err);
    return rc;
}

/* Layer `layer`'s pages handed back, but not those of a range that the
 * layer being gathered ahead (`keep`) shares. */
static void release_layer(struct dl_zero_weights *z, int layer, int keep)
{
    for (int k = z->first[layer]; k < z->first[layer + 1]; k++) {
        int kept = 0;
        for (int i = keep >= 0 ? z->first[keep] : 0; keep >= 0 && i < z->first[keep + 1]; i++)
            kept |= z->ranges[i].lo < z->ranges[k].hi && z->ranges[k].lo < z->ranges[i].hi;
        if (!kept)
            release(z, z->ranges[k].lo, z->ranges[k].hi);
    }
}

static void *lane_main(void *arg)
{
    struct dl_zero_weights *z = arg;
    struct zlane *q = &z->lane;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->want == LANE_NONE && !q->quit)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->quit)
            break;
        int layer = q->want;
        q->want = LANE_NONE;
        q->busy = 1;
        pthread_mutex_unlock(&q->mu);
        struct dl_error err = {0};
        double t0 = dl_clock_now();
        int rc = q->rc ? DL_OK : gather_layer(z, layer, &err); /* after a failure: nothing more */
        z->gathering += dl_clock_now() - t0;
        pthread_mutex_lock(&q->mu);
        if (rc && !q->rc)
            q->rc = rc, q->err = err;
        q->busy = 0;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* The thread's gather of `layer` asked for (no thread: done here). */
static int lane_post(struct dl_zero_weights *z, int layer, struct dl_error *err)
{
    struct zlane *q = &z->lane;
    if (!q->started) {
        double t0 = dl_clock_now();
        int rc = gather_layer(z, layer, err);
        z->gathering += dl_clock_now() - t0;
        return rc;
    }
    pthread_mutex_lock(&q->mu);
    q->want = layer;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return DL_OK;
}

/* Until the thread has done what it was asked; its first failure. */
static int lane_wait(struct dl_zero_weights *z, struct dl_error *err)
{
    struct zlane *q = &z->lane;
    if (!q->started)
        return DL_OK;
    pthread_mutex_lock(&q->mu);
    while (q->busy || q->want != LANE_NONE)
        pthread_cond_wait(&q->cv, &q->mu);
    int rc = q->rc;
    if (rc)
        *err = q->err;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Layer `layer` about to be used in `phase` (1 forward, 2 backward): its
 * weights there (gathered ahead, or now), and the layer that came after
 * this use last time gathered ahead. */
static int use_layer(struct dl_zero_weights *z, int layer, int phase, struct dl_error *err)
{
    double t0 = dl_clock_now();
    int rc = lane_wait(z, err), ahead = z->prefetched;
    z->prefetched = -1;
    if (!rc && ahead != layer) {
        if (ahead >= 0) /* the guess was wrong: its weights go back */
            release_layer(z, ahead, layer);
        rc = lane_post(z, layer, err);
        if (!rc)
            rc = lane_wait(z, err);
    }
    z->seconds += dl_clock_now() - t0;
    int key = (phase - 1) * z->layers + layer;
    if (z->last_key >= 0)
        z->next[z->last_key] = key;
    z->last_key = key;
    int guess = z->next[key] >= 0 ? z->next[key] % z->layers : -1;
    if (!rc && z->lane.started && guess >= 0 && guess != layer && z->first[guess + 1] > z->first[guess]) {
        z->prefetched = guess;
        rc = lane_post(z, guess, err);
    }
    return rc;
}

static int on_layer(void *ctx, int layer, int use, struct dl_error *err)
{
    struct dl_zero_weights *z = ctx;
    if (layer < 0 || layer >= z->layers || z->holding || z->first[layer + 1] == z->first[layer])
        return DL_OK;
    if (use)
        return use_layer(z, layer, use, err);
    release_layer(z, layer, z->prefetched); /* not what the gather ahead is writing */
    return DL_OK;
}

int dl_zero_weights_hold_all(struct dl_zero_weights *z, int all, struct dl_error *err)
{
    int rc = lane_wait(z, err);
    if (z->prefetched >= 0 && !all)
        release_layer(z, z->prefetched, -1);
    z->prefetched = -1;
    z->holding = all;
    if (rc || !all) {
        if (!all)
            release(z, 0, z->padded);
        return rc;
    }
    double t0 = dl_clock_now();
    rc = lane_post(z, LANE_ALL, err);
    if (!rc)
        rc = lane_wait(z, err);
    z->seconds += dl_clock_now() - t0;
    return rc;
}

void dl_zero_weights_updated(struct dl_zero_weights *z)
{
    struct dl_error ignored; /* a failure comes back from the next use */
    if (lane_wait(z, &ignored) == DL_OK && z->prefetched >= 0) /* gathered before the update: again */
        lane_post(z, z->prefetched, &ignored);
}

void dl_zero_weights_take_stats(struct dl_zero_weights *z, double *seconds, double *exposed, size_t *bytes)
{
    struct dl_error ignored; /* a failure comes back from the next use */
    lane_wait(z, &ignored);
    *seconds = z->gathering;
    *exposed = z->seconds < z->gathering ? z->seconds : z->gathering;
    *bytes = z->bytes;
    z->seconds = z->gathering = 0;
    z->bytes = 0;
}

int dl_zero_weights_create(struct dl_comm *c, struct dl_exec *e, const struct dl_zero_shard *sh,
                           struct dl_zero_weights **out, struct dl_error *err)
{
    struct dl_zero_weights *z = dl_calloc(1, sizeof *z, err);
    int params = 0;
    for (int i = 0; i < e->g->n; i++)
        params += e->g->layers[i].n_params;
    if (z) {
        z->ranges = dl_calloc((size_t)(params > 0 ? params : 1), sizeof *z->ranges, err);
        z->first = dl_calloc((size_t)e->g->n + 1, sizeof *z->first, err);
        z->next = dl_calloc((size_t)(2 * e->g->n + 1), sizeof *z->next, err);
    }
    if (!z || !z->ranges || !z->first || !z->next) {
        dl_zero_weights_free(z);
        return DL_ERR_NOMEM;
    }
    *z = (struct dl_zero_weights){.comm = c, .shard = *sh, .weights = e->weights, .padded = sh->block * sh->ranks,
                                  .ranges = z->ranges, .first = z->first, .layers = e->g->n, .next = z->next,
                                  .last_key = -1, .prefetched = -1};
    for (int k = 0; k < 2 * e->g->n; k++)
        z->next[k] = -1;
    for (int i = 0; i < e->g->n; i++) {
        int m = layer_ranges(e, i, z->ranges + z->first[i]);
        z->first[i + 1] = z->first[i] + m;
    }
    z->gathered = two_largest(e, z->ranges, z->first);
    int rc = dl_zero_weights_attach(z, e, err);
    struct zlane *q = &z->lane;
    q->want = LANE_NONE;
    /* the gathers ahead on a thread of their own where MPI allows threads to
     * call it at once; else each gather on the caller's thread, when used */
    if (!rc && c->thread_level >= 3 && c->size > 1 && c->ops->split(c, 0, c->rank, &q->comm, err) == DL_OK) {
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->cv, NULL);
        q->started = pthread_create(&q->thread, NULL, lane_main, z) == 0;
        if (!q->started) {
            pthread_mutex_destroy(&q->mu);
            pthread_cond_destroy(&q->cv);
            dl_comm_close(q->comm);
            q->comm = NULL;
        }
    }
    if (rc) {
        dl_zero_weights_free(z);
        return rc;
    }
    release(z, 0, z->padded);
    *out = z;
    return DL_OK;
}

int dl_zero_weights_attach(struct dl_zero_weights *z, struct dl_exec *e, struct dl_error *err)
{
    if (e->weights != z->weights)
        return dl_errorf(err, DL_ERR_INTERNAL, "ZeRO stage 3: an executor with weights of its own");
    struct dl_exec **more = realloc(z->execs, sizeof *more * (size_t)(z->n_execs + 1));
    if (!more)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    z->execs = more;
    z->execs[z->n_execs++] = e;
    e->hooks.weights_hook = on_layer, e->hooks.weights_ctx = z;
    return DL_OK;
}

void dl_zero_weights_free(struct dl_zero_weights *z)
{
    if (!z)
        return;
    for (int k = 0; z->execs && k < z->n_execs; k++)
        if (z->execs[k]->hooks.weights_ctx == z)
            z->execs[k]->hooks.weights_hook = NULL, z->execs[k]->hooks.weights_ctx = NULL;
    struct zlane *q = &z->lane;
    if (q->started) { /* a gather ahead is finished first: every rank's thread posted the same ones */
        pthread_mutex_lock(&q->mu);
        while (q->busy || q->want != LANE_NONE)
            pthread_cond_wait(&q->cv, &q->mu);
        q->quit = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
    }
    dl_comm_close(q->comm);
    free(z->next);
    free(z->ranges);
    free(z->first);
    free(z->execs);
    free(z);
}
