/* watchdog.c: the watching thread and the observer of a rank's group
 * communicators that feeds it (see watchdog.h; comm/observed.h forwards the
 * calls): enter and leave only store a pointer to a static description and
 * the clock, so watching costs two mutex operations per blocking call. */
#include "parallel/watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/flight.h"
#include "comm/observed.h"
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

/* A watched group communicator: the observer's context. */
struct watched {
    int size;
    struct dl_watchdog *w;
    const char *group;
    int *world_ranks;
};

static long enter(void *ctx, const char *call, int peer, size_t bytes)
{
    (void)bytes;
    struct watched *x = ctx;
    struct dl_watchdog *w = x->w;
    pthread_mutex_lock(&w->lock);
    w->site = (struct wait_site){x, call, peer};
    w->since = dl_clock_now();
    w->call_id++;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static void leave(void *ctx, long token)
{
    (void)token;
    struct dl_watchdog *w = ((struct watched *)ctx)->w;
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
    for (int i = 0; i < x->size && used < sizeof ranks; i++)
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
        char what[512], msg[1200];
        if (w->timeout_s > 0 && waited >= w->timeout_s) {
            describe(w, waited, what, sizeof what);
            pthread_mutex_unlock(&w->lock);
            char found[600]; /* what the ranks' flight records say, when they keep them */
            dl_flight_post_mortem(dl_flight_global(), 5.0, found, sizeof found);
            snprintf(msg, sizeof msg, "stall: %s, longer than --stall-timeout %.0f s; aborting the job%s%s", what,
                     w->timeout_s, *found ? "; " : "", found);
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

/* ------------------------------------------------------------ the observer */
static void watched_free(void *ctx)
{
    struct watched *x = ctx;
    free(x->world_ranks);
    free(x);
}

static const struct dl_comm_observer watching = {enter, leave, watched_free};

int dl_watch_comm(struct dl_comm **c, struct dl_watchdog *w, const char *group, const int *world_ranks,
                  struct dl_error *err)
{
    struct dl_comm *in = *c;
    struct watched *x = dl_calloc(1, sizeof *x, err);
    int *ranks = x ? dl_calloc((size_t)in->size, sizeof *ranks, err) : NULL;
    if (!ranks) {
        free(x);
        return DL_ERR_NOMEM;
    }
    memcpy(ranks, world_ranks, sizeof *ranks * (size_t)in->size);
    *x = (struct watched){in->size, w, group, ranks};
    int rc = dl_comm_observe(c, &watching, x, 1, err);
    if (rc)
        watched_free(x);
    return rc;
}
