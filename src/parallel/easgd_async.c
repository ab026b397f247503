/* easgd_async.c: elastic averaging SGD, asynchronous form (Zhang,
 * Choromanska and LeCun 2015, algorithm 2) on the parameter-server layout
 * (ps_shards.h): ranks 0..K-1 hold shards of the center variable c (they
 * start from the common initial weights), the other ranks are workers.  A
 * worker takes local optimizer steps; every TAU steps (and once at the end
 * for a partial round) it sends its weight shards to the servers and gets
 * the center shards back; each server answers with c as it is, then
 * applies the worker's elastic difference, and the worker applies the same
 * difference with the opposite sign:
 *     d = alpha (x_i - c),   x_i <- x_i - d,   c <- c + d,
 * one worker at a time, in the order the servers receive them, nobody
 * waiting for the slowest.  The servers report each round as an update
 * (the round's mean loss).  At the end rank 0 holds the center (and the
 * first worker's batch-norm statistics) and alone evaluates it. */
#include "parallel/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/tags.h"
#include "parallel/ps_shards.h"

/* What travels before a shard: the worker's step (< 0: done) and its sums
 * over the round's steps. */
struct round_header {
    double clock, loss_sum, correct, batch;
};

struct easgd_async_impl {
    int servers, tau;
    float alpha;
    unsigned char *msg;            /* header + largest shard */
    float *center;                 /* worker: the center shard got back */
    long since;                    /* worker: local steps since its last round */
    struct round_header round;     /* worker: the sums of the round so far */
};

/* ------------------------------------------------------------ worker */
/* Sends this worker's shards, gets the center's, and moves toward them. */
static int worker_round(struct dl_strategy *s, struct dl_step_stats *st, struct dl_error *err)
{
    struct easgd_async_impl *im = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    size_t sent = 0;
    for (int sv = 0; sv < im->servers; sv++) {
        long lo, hi;
        dl_ps_shard(e->n_weights, im->servers, sv, &lo, &hi);
        size_t bytes = sizeof im->round + sizeof *e->weights * (size_t)(hi - lo);
        memcpy(im->msg, &im->round, sizeof im->round);
        memcpy(im->msg + sizeof im->round, e->weights + lo, sizeof *e->weights * (size_t)(hi - lo));
        int rc = c->ops->send(c, im->msg, bytes, sv, DL_TAG_EASGD_PUSH, err);
        if (rc)
            return rc;
        sent += bytes;
    }
    for (int sv = 0; sv < im->servers; sv++) {
        long lo, hi;
        dl_ps_shard(e->n_weights, im->servers, sv, &lo, &hi);
        int rc = c->ops->recv(c, im->center, sizeof *im->center * (size_t)(hi - lo), sv, DL_TAG_EASGD_CENTER, err);
        if (rc)
            return rc;
        for (long i = lo; i < hi; i++)
            e->weights[i] -= im->alpha * (e->weights[i] - im->center[i - lo]);
    }
    if (st)
        st->bytes_sent = st->dense_bytes = sent;
    im->round.loss_sum = im->round.correct = im->round.batch = 0;
    im->since = 0;
    return DL_OK;
}

static int worker_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    return DL_OK;
}

/* The metrics stay this worker's own: no sum over the ranks. */
static int worker_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                         struct dl_step_stats *st, struct dl_error *err)
{
    struct easgd_async_impl *im = s->impl;
    int rc = dl_strategy_optim_step(s, lr, m, err);
    if (rc)
        return rc;
    im->round.clock = (double)step;
    im->round.loss_sum += m->loss_sum;
    im->round.correct += m->correct;
    im->round.batch += m->samples;
    return ++im->since >= im->tau ? worker_round(s, st, err) : DL_OK;
}

/* A last, partial round, then "done" to every server and the final gather. */
static int worker_end(struct dl_strategy *s, struct dl_error *err)
{
    struct easgd_async_impl *im = s->impl;
    int rc = im->since ? worker_round(s, NULL, err) : DL_OK;
    struct round_header done = {-1, 0, 0, 0};
    for (int sv = 0; sv < im->servers && !rc; sv++)
        rc = s->comm->ops->send(s->comm, &done, sizeof done, sv, DL_TAG_EASGD_PUSH, err);
    return rc ? rc : dl_ps_gather_final(s->comm, s->exec, im->servers, err);
}

/* ------------------------------------------------------------ server */
/* One worker's round on this server's shard c[0, len): the center goes back
 * as it is, then c += alpha (x - c). */
static int serve_round(struct dl_strategy *s, struct dl_ps_worker_slot *w, int i, float *c, long len,
                       const struct dl_serve_hooks *hooks, struct dl_serve_result *res, int workers,
                       struct dl_error *err)
{
    struct easgd_async_impl *im = s->impl;
    struct dl_comm *comm = s->comm;
    struct round_header h;
    memcpy(&h, w[i].msg, sizeof h);
    int rc = comm->ops->send(comm, c, sizeof *c * (size_t)len, im->servers + i, DL_TAG_EASGD_CENTER, err);
    if (rc)
        return rc;
    const float *x = (const float *)(w[i].msg + sizeof h);
    for (long j = 0; j < len; j++)
        c[j] += im->alpha * (x[j] - c[j]);
    res->updates++;
    res->steps += (long)h.clock - w[i].clock; /* the round's steps */
    w[i].clock = (long)h.clock;
    long slow = dl_ps_slowest(w, workers);
    int lead = slow >= 0 ? (int)(w[i].clock - slow) : 0;
    if (lead > res->max_staleness)
        res->max_staleness = lead;
    if (hooks->on_update) {
        struct dl_served_update u = {.worker = i, .step = w[i].clock, .updates = res->updates,
                                     .loss = h.batch > 0 ? h.loss_sum / h.batch : 0,
                                     .accuracy = h.batch > 0 ? h.correct / h.batch : 0, .batch = (int)h.batch,
                                     .staleness = lead, .lr = hooks->lr_at(hooks->ctx, w[i].clock - 1)};
        hooks->on_update(hooks->ctx, &u);
    }
    return DL_OK;
}

static int server_serve(struct dl_strategy *s, const struct dl_serve_hooks *hooks, struct dl_serve_result *res,
                        struct dl_error *err)
{
    struct easgd_async_impl *im = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    int workers = c->size - im->servers;
    long lo, hi;
    dl_ps_shard(e->n_weights, im->servers, c->rank, &lo, &hi);
    size_t bytes = sizeof(struct round_header) + dl_dtype_size(DL_F32) * (size_t)(hi - lo);
    struct dl_ps_worker_slot *w = dl_calloc((size_t)workers, sizeof *w, err);
    int rc = w ? DL_OK : DL_ERR_NOMEM;
    for (int i = 0; !rc && i < workers; i++) {
        w[i].msg = dl_calloc(bytes, 1, err);
        rc = w[i].msg ? c->ops->irecv(c, w[i].msg, bytes, im->servers + i, DL_TAG_EASGD_PUSH, &w[i].req, err)
                      : DL_ERR_NOMEM;
    }
    int active = workers;
    while (!rc && active > 0) {
        int progress = 0;
        for (int i = 0; i < workers && !rc; i++) {
            int done = 0;
            if (w[i].finished || (rc = c->ops->test(c, &w[i].req, &done, err)) || !done)
                continue;
            progress = 1;
            if (((struct round_header *)w[i].msg)->clock < 0) {
                w[i].finished = 1;
                active--;
                continue;
            }
            rc = serve_round(s, w, i, e->weights + lo, hi - lo, hooks, res, workers, err);
            if (!rc)
                rc = c->ops->irecv(c, w[i].msg, bytes, im->servers + i, DL_TAG_EASGD_PUSH, &w[i].req, err);
        }
        if (!progress)
            nanosleep(&(struct timespec){0, 50000}, NULL);
    }
    if (!rc)
        rc = dl_ps_gather_final(c, e, im->servers, err);
    for (int i = 0; w && i < workers; i++)
        free(w[i].msg);
    free(w);
    return rc;
}

/* ------------------------------------------------------------ both */
static void easgd_async_describe(const struct dl_strategy *s, char *buf, size_t size)
{
    const struct easgd_async_impl *im = s->impl;
    snprintf(buf, size, "asynchronous easgd: %d server%s holding the center, %d workers, a round every %d step%s, "
             "alpha %g", im->servers, im->servers > 1 ? "s" : "", s->layout.data_ranks, im->tau,
             im->tau > 1 ? "s" : "", im->alpha);
}

static void easgd_async_destroy(struct dl_strategy *s)
{
    struct easgd_async_impl *im = s->impl;
    if (!im)
        return;
    free(im->msg);
    free(im->center);
    free(im);
    s->impl = NULL;
}

static int easgd_async_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                              struct dl_error *err)
{
    struct easgd_async_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    s->impl = im;
    im->servers = dl_ps_servers(po, s->comm->size);
    im->tau = po->easgd_tau > 0 ? po->easgd_tau : 1;
    im->alpha = (float)dl_easgd_alpha(po, s->comm->size - im->servers);
    long lo, hi;
    dl_ps_shard(s->exec->n_weights, im->servers, 0, &lo, &hi); /* shard 0 is the largest */
    size_t len = (size_t)(hi - lo > 0 ? hi - lo : 1);
    im->msg = dl_calloc(sizeof(struct round_header) + dl_dtype_size(DL_F32) * len, 1, err);
    im->center = im->msg ? dl_calloc(len, sizeof *im->center, err) : NULL;
    if (!im->center) {
        easgd_async_destroy(s);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_easgd_worker = {
    .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_tied_across_ranks = 1,
    .name = "asynchronous easgd", .layout = dl_ps_layout, .create = easgd_async_create, .begin = worker_begin,
    .finish = worker_finish, .end = worker_end, .describe = easgd_async_describe, .destroy = easgd_async_destroy};

const struct dl_strategy_ops dl_strategy_easgd_server = {
    .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_tied_across_ranks = 1,
    .name = "asynchronous easgd", .layout = dl_ps_layout, .create = easgd_async_create, .serve = server_serve,
    .describe = easgd_async_describe, .destroy = easgd_async_destroy};
