/* watchdog.c: the watching thread and the communicator wrapper that feeds
 * it (see watchdog.h).  The wrapper forwards every call to the wrapped
 * communicator; the blocking ones are bracketed by enter/leave, which only
 * store a pointer to a static description and the clock, so watching costs
 * two mutex operations per call. */
#include "parallel/watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* What the main thread is blocked in (valid while since > 0). */
struct wait_site {
    const struct watched *group;
    const char *call;  /* "allreduce", "receive", ... */
    int peer;          /* group rank waited for, -1: the group */
};

struct dl_watchdog {
    struct dl_comm *world;
    struct dl_grid_dims dims;
    double warn_s, timeout_s;
    void (*report)(void *ctx, const char *msg);
    void *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running;
    long step;
    double since;      /* clock at the start of the current blocking call, 0: none */
    long call_id;      /* counts blocking calls, to warn once per call */
    long warned_id;
    struct wait_site site;
};

/* The wrapper: a communicator whose impl is this. */
struct watched {
    struct dl_comm *inner;
    struct dl_watchdog *w;
    const char *group;
    int *world_ranks;
};

static void enter(struct dl_comm *c, const char *call, int peer)
{
    struct watched *x = c->impl;
    struct dl_watchdog *w = x->w;
    pthread_mutex_lock(&w->lock);
    w->site = (struct wait_site){x, call, peer};
    w->since = dl_clock_now();
    w->call_id++;
    pthread_mutex_unlock(&w->lock);
}

static void leave(struct dl_comm *c)
{
    struct dl_watchdog *w = ((struct watched *)c->impl)->w;
    pthread_mutex_lock(&w->lock);
    w->since = 0;
    pthread_mutex_unlock(&w->lock);
}

static int position(const struct dl_watchdog *w, int rank, char *buf, size_t size)
{
    struct dl_grid_pos q = dl_grid_position(&w->dims, rank);
    return snprintf(buf, size, "rank %d (d=%d t=%d p=%d)", rank, q.d, q.t, q.p);
}

/* "rank 3 (d=0 t=1 p=1) has waited 4 s for a message from rank 2 (...) of
 * its pipeline group in step 7" (w locked). */
static void describe(const struct dl_watchdog *w, double waited, char *buf, size_t size)
{
    const struct wait_site *s = &w->site;
    const struct watched *x = s->group;
    char me[64], peer[64], ranks[256] = "";
    position(w, w->world->rank, me, sizeof me);
    size_t used = 0;
    for (int i = 0; i < x->inner->size && used < sizeof ranks; i++)
        used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", i ? ", " : "", x->world_ranks[i]);
    char step[48] = " outside a training step";
    if (w->step > 0)
        snprintf(step, sizeof step, " in step %ld", w->step);
    if (s->peer >= 0) {
        position(w, x->world_ranks[s->peer], peer, sizeof peer);
        snprintf(buf, size, "%s has waited %.0f s in a %s %s %s of its %s group%s", me, waited, s->call,
                 strcmp(s->call, "send") ? "from" : "to", peer, x->group, step);
    } else {
        snprintf(buf, size, "%s has waited %.0f s in a %s of its %s group (ranks %s)%s", me, waited, s->call,
                 x->group, ranks, step);
    }
}

static void *watch(void *arg)
{
    struct dl_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (w->running) {
        dl_clock_timedwait(&w->wake, &w->lock, 0.1);
        if (!w->running || w->since <= 0)
            continue;
        double waited = dl_clock_now() - w->since;
        char what[512], msg[640];
        if (w->timeout_s > 0 && waited >= w->timeout_s) {
            describe(w, waited, what, sizeof what);
            snprintf(msg, sizeof msg, "stall: %s, longer than --stall-timeout %.0f s; aborting the job", what,
                     w->timeout_s);
            pthread_mutex_unlock(&w->lock);
            w->report(w->ctx, msg);
            w->world->ops->abort(w->world, 1);
            return NULL;
        }
        if (w->warn_s > 0 && waited >= w->warn_s && w->warned_id != w->call_id) {
            w->warned_id = w->call_id;
            describe(w, waited, what, sizeof what);
            snprintf(msg, sizeof msg, "warning: %s", what);
            w->report(w->ctx, msg);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int dl_watchdog_start(struct dl_comm *world, const struct dl_grid_dims *dims, double warn_s, double timeout_s,
                      void (*report)(void *ctx, const char *msg), void *ctx, struct dl_watchdog **out,
                      struct dl_error *err)
{
    struct dl_watchdog *w = dl_calloc(1, sizeof *w, err);
    if (!w)
        return DL_ERR_NOMEM;
    *w = (struct dl_watchdog){.world = world, .dims = *dims, .warn_s = warn_s, .timeout_s = timeout_s,
                              .report = report, .ctx = ctx, .running = 1, .warned_id = -1};
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, watch, w)) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w);
        return dl_errorf(err, DL_ERR_INTERNAL, "cannot start the stall watchdog thread");
    }
    *out = w;
    return DL_OK;
}

void dl_watchdog_set_step(struct dl_watchdog *w, long step)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->step = step;
    pthread_mutex_unlock(&w->lock);
}

void dl_watchdog_stop(struct dl_watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->running = 0;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    free(w);
}

/* ------------------------------------------------------------ the wrapper */
static struct dl_comm *inner(struct dl_comm *c)
{
    return ((struct watched *)c->impl)->inner;
}

static int w_split(struct dl_comm *c, int color, int key, struct dl_comm **out, struct dl_error *err)
{
    return inner(c)->ops->split(inner(c), color, key, out, err);
}

static int w_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    enter(c, "send", peer);
    int rc = inner(c)->ops->send(inner(c), buf, bytes, peer, tag, err);
    leave(c);
    return rc;
}

static int w_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    enter(c, "receive", peer);
    int rc = inner(c)->ops->recv(inner(c), buf, bytes, peer, tag, err);
    leave(c);
    return rc;
}

static int w_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    return inner(c)->ops->isend(inner(c), buf, bytes, peer, tag, req, err);
}

static int w_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    return inner(c)->ops->irecv(inner(c), buf, bytes, peer, tag, req, err);
}

static int w_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    enter(c, "message exchange", -1);
    int rc = inner(c)->ops->wait(inner(c), req, err);
    leave(c);
    return rc;
}

static int w_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    return inner(c)->ops->test(inner(c), req, done, err);
}

static int w_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    enter(c, "sum (allreduce)", -1);
    int rc = inner(c)->ops->allreduce(inner(c), buf, dtype, n, err);
    leave(c);
    return rc;
}

static int w_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    enter(c, "reduce", -1);
    int rc = inner(c)->ops->reduce(inner(c), buf, dtype, n, root, err);
    leave(c);
    return rc;
}

static int w_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                            struct dl_error *err)
{
    enter(c, "reduce-scatter", -1);
    int rc = inner(c)->ops->reduce_scatter(inner(c), send, recv, dtype, count, err);
    leave(c);
    return rc;
}

static int w_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes, struct dl_error *err)
{
    enter(c, "allgather", -1);
    int rc = inner(c)->ops->allgather(inner(c), send, recv, bytes, err);
    leave(c);
    return rc;
}

static int w_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                       const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    enter(c, "all-to-all", -1);
    int rc = inner(c)->ops->alltoallv(inner(c), send, scount, sdispl, recv, rcount, rdispl, err);
    leave(c);
    return rc;
}

static int w_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    enter(c, "broadcast", -1);
    int rc = inner(c)->ops->bcast(inner(c), buf, bytes, root, err);
    leave(c);
    return rc;
}

static int w_barrier(struct dl_comm *c, struct dl_error *err)
{
    enter(c, "barrier", -1);
    int rc = inner(c)->ops->barrier(inner(c), err);
    leave(c);
    return rc;
}

static void w_abort(struct dl_comm *c, int code)
{
    inner(c)->ops->abort(inner(c), code);
}

static void w_destroy(struct dl_comm *c)
{
    struct watched *x = c->impl;
    dl_comm_close(x->inner);
    free(x->world_ranks);
    free(x);
}

static const struct dl_comm_ops watched_ops = {
    .name = "watched", .split = w_split, .send = w_send, .recv = w_recv, .isend = w_isend, .irecv = w_irecv,
    .wait = w_wait, .test = w_test, .allreduce = w_allreduce, .reduce_scatter = w_reduce_scatter, .reduce = w_reduce,
    .allgather = w_allgather, .alltoallv = w_alltoallv, .bcast = w_bcast, .barrier = w_barrier, .abort = w_abort, .destroy = w_destroy};

int dl_watch_comm(struct dl_comm **c, struct dl_watchdog *w, const char *group, const int *world_ranks,
                  struct dl_error *err)
{
    struct dl_comm *in = *c;
    struct watched *x = dl_calloc(1, sizeof *x, err);
    int *ranks = x ? dl_calloc((size_t)in->size, sizeof *ranks, err) : NULL;
    struct dl_comm *out = ranks ? dl_comm_new(&watched_ops, in->rank, in->size, err) : NULL;
    if (!out) {
        free(ranks);
        free(x);
        return DL_ERR_NOMEM;
    }
    memcpy(ranks, world_ranks, sizeof *ranks * (size_t)in->size);
    *x = (struct watched){in, w, group, ranks};
    out->impl = x;
    out->thread_level = in->thread_level;
    *c = out;
    return DL_OK;
}
