/* prefetch.c: the decode-thread pool.  One mutex guards the ring; a slot's
 * pixels are written by the threads without it (each sample has its own
 * place) and read by the consumer without it (a slot is reused only after
 * the consumer has moved past it).  Slot of batch k: k % depth. */
#include "data/prefetch.h"

#include "core/clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    long batch;   /* -1: free */
    int count;    /* samples in the batch */
    int next;     /* next sample to hand out */
    int done;     /* samples finished */
    int failed;
    int fail_j;   /* the lowest failed sample so far, whose error err is */
    struct dl_error err;
    float *x;
    int *y;
};

struct dl_prefetch {
    struct dl_prefetch_ops ops;
    void *ctx;
    size_t sample_floats;
    pthread_mutex_t mu;
    pthread_cond_t work, ready, idle;
    pthread_t *threads;
    int nthreads, started;
    struct slot *slots;
    int depth;
    long consume;     /* the batch the consumer takes next */
    long scheduled;   /* batches before this one have a slot */
    long end;         /* one past the last batch */
    int busy;         /* samples being made right now */
    int quit;
};

/* Gives free slots to the next batches (lock held). */
static void schedule(struct dl_prefetch *p)
{
    while (p->scheduled < p->end && p->scheduled < p->consume + p->depth) {
        struct slot *s = &p->slots[p->scheduled % p->depth];
        s->batch = p->scheduled;
        s->count = p->ops.count(p->ctx, p->scheduled);
        s->next = s->done = s->failed = 0;
        p->scheduled++;
    }
}

/* The earliest batch with a sample not yet handed out (lock held). */
static struct slot *find_work(struct dl_prefetch *p)
{
    for (long k = p->consume; k < p->scheduled; k++) {
        struct slot *s = &p->slots[k % p->depth];
        if (s->batch == k && s->next < s->count && !s->failed)
            return s;
    }
    return NULL;
}

static void *worker(void *arg)
{
    struct dl_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct slot *s;
        while (!p->quit && !(s = find_work(p)))
            pthread_cond_wait(&p->work, &p->mu);
        if (p->quit)
            break;
        int j = s->next++;
        long batch = s->batch;
        p->busy++;
        pthread_mutex_unlock(&p->mu);
        struct dl_error e = {0};
        int rc = p->ops.load(p->ctx, batch, j, s->x + (size_t)j * p->sample_floats, s->y + j, &e);
        pthread_mutex_lock(&p->mu);
        p->busy--;
        /* the lowest failing sample's error, whichever thread met it first: samples
         * are handed out in order, and the reader waits for those in flight */
        if (rc && (!s->failed || j < s->fail_j)) {
            s->failed = 1;
            s->fail_j = j;
            s->err = e;
        }
        s->done++;
        if (s->done == s->count || s->failed)
            pthread_cond_broadcast(&p->ready);
        if (p->busy == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void destroy(struct dl_prefetch *p)
{
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->quit = 1;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->threads[i], NULL);
    }
    if (p->slots)
        for (int i = 0; i < p->depth; i++) {
            free(p->slots[i].x);
            free(p->slots[i].y);
        }
    free(p->slots);
    free(p->threads);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->ready);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int dl_prefetch_create(const struct dl_prefetch_ops *ops, void *ctx, int threads, int depth,
                       size_t sample_floats, int max_batch, struct dl_prefetch **out,
                       struct dl_error *err)
{
    *out = NULL;
    if (threads < 1 || depth < 1 || max_batch < 1)
        return dl_errorf(err, DL_ERR_INTERNAL, "prefetch: %d threads, %d slots, batches of %d", threads, depth,
                         max_batch);
    struct dl_prefetch *p = dl_calloc(1, sizeof *p, err);
    if (!p)
        return DL_ERR_NOMEM;
    p->ops = *ops;
    p->ctx = ctx;
    p->sample_floats = sample_floats;
    p->depth = depth;
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->ready, NULL);
    pthread_cond_init(&p->idle, NULL);
    p->slots = dl_calloc((size_t)depth, sizeof *p->slots, err);
    p->threads = dl_calloc((size_t)threads, sizeof *p->threads, err);
    int rc = p->slots && p->threads ? DL_OK : DL_ERR_NOMEM;
    for (int i = 0; !rc && i < depth; i++) {
        p->slots[i].batch = -1;
        p->slots[i].x = dl_calloc((size_t)max_batch * sample_floats, sizeof *p->slots[i].x, err);
        p->slots[i].y = dl_calloc((size_t)max_batch, sizeof *p->slots[i].y, err);
        if (!p->slots[i].x || !p->slots[i].y)
            rc = DL_ERR_NOMEM;
    }
    for (int i = 0; !rc && i < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0)
            rc = dl_errorf(err, DL_ERR_INTERNAL, "prefetch: cannot start decode thread %d of %d", i + 1, threads);
        else
            p->started++;
    }
    if (rc) {
        destroy(p);
        return rc;
    }
    *out = p;
    return DL_OK;
}

void dl_prefetch_restart(struct dl_prefetch *p, long first, long end)
{
    pthread_mutex_lock(&p->mu);
    p->scheduled = p->end = p->consume; /* hand out nothing more */
    for (int i = 0; i < p->depth; i++)
        p->slots[i].next = p->slots[i].count;
    while (p->busy > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    for (int i = 0; i < p->depth; i++)
        p->slots[i].batch = -1;
    p->consume = p->scheduled = first;
    p->end = end;
    schedule(p);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

int dl_prefetch_next(struct dl_prefetch *p, float *x, int *y, double *waited, struct dl_error *err)
{
    pthread_mutex_lock(&p->mu);
    if (p->consume >= p->end) {
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    struct slot *s = &p->slots[p->consume % p->depth];
    if (s->done < s->count && !s->failed) {
        double t0 = dl_clock_now();
        while (s->done < s->count && !s->failed)
            pthread_cond_wait(&p->ready, &p->mu);
        if (waited)
            *waited += dl_clock_now() - t0;
    }
    if (s->failed) {
        /* Wait for the batch's other samples, so that nothing writes into
         * the slot once the caller has the error. */
        while (p->busy > 0)
            pthread_cond_wait(&p->idle, &p->mu);
        if (err)
            *err = s->err;
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    int count = s->count;
    pthread_mutex_unlock(&p->mu);
    memcpy(x, s->x, (size_t)count * p->sample_floats * sizeof *x);
    memcpy(y, s->y, (size_t)count * sizeof *y);
    pthread_mutex_lock(&p->mu);
    p->consume++;
    schedule(p);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    return count;
}

void dl_prefetch_free(struct dl_prefetch *p)
{
    if (p)
        destroy(p);
}
