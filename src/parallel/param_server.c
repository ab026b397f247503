/* param_server.c: asynchronous and stale-synchronous training with a sharded
 * parameter server (Li et al. 2014; Ho et al. 2013), as two strategies, one
 * per role.  Ranks 0..K-1 are servers, each owning a contiguous shard of the
 * weights and the optimizer state for it; the other ranks are workers.  A
 * worker sends its gradient of step c to every server and waits for the fresh
 * shards.  A server applies gradients in the order they arrive and answers a
 * worker at clock c only when the slowest unfinished worker has reached
 * c - S (SSP; async: S = infinity), so no worker runs more than S steps ahead
 * of the slowest.  Each worker's gradient averages B/W samples, so W updates
 * stand for one synchronous step of batch B: each gets lr/W.  At the end the
 * final weights (and the first worker's batch-norm statistics) are gathered
 * on rank 0, which alone evaluates them; no checkpoints yet. */
#include "parallel/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/tags.h"
#include "parallel/ps_shards.h"

struct ps_header {
    double clock;    /* < 0: the worker is done */
    double loss_sum;
    double correct;
    double batch;
};

/* What both roles take from the options; the first member of both
 * implementations. */
struct ps_config {
    int servers;     /* K */
    int staleness;   /* S; < 0: async */
};

static struct ps_config ps_config(const struct dl_parallel_opts *po, int size)
{
    return (struct ps_config){dl_ps_servers(po, size), po->consistency == DL_CONS_ASYNC ? -1 : po->staleness};
}

static void ps_describe(const struct dl_strategy *s, char *buf, size_t size)
{
    const struct ps_config *cfg = s->impl;
    int workers = s->layout.data_ranks;
    snprintf(buf, size, "%s parameter server: %d server%s, %d workers, lr/%d and momentum %g per update",
             cfg->staleness < 0 ? "asynchronous" : "stale-synchronous", cfg->servers, cfg->servers > 1 ? "s" : "",
             workers, workers, s->optim->spec.momentum);
}

/* ------------------------------------------------------------ worker */
struct worker_impl {
    struct ps_config cfg;
    unsigned char *msg;   /* header + largest gradient shard */
};

static int worker_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    return DL_OK;
}

/* The metrics stay this worker's own: no sum over the ranks. */
static int worker_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                         struct dl_step_stats *st, struct dl_error *err)
{
    struct worker_impl *im = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    struct ps_header h = {(double)step, m->loss_sum, m->correct, (double)m->samples};
    for (int sv = 0; sv < im->cfg.servers; sv++) {
        long lo, hi;
        dl_ps_shard(e->n_weights, im->cfg.servers, sv, &lo, &hi);
        memcpy(im->msg, &h, sizeof h);
        memcpy(im->msg + sizeof h, e->dweights + lo, sizeof *e->dweights * (size_t)(hi - lo));
        int rc = c->ops->send(c, im->msg, sizeof h + sizeof *e->dweights * (size_t)(hi - lo), sv, DL_TAG_PS_GRADIENT, err);
        if (rc)
            return rc;
    }
    for (int sv = 0; sv < im->cfg.servers; sv++) {
        long lo, hi;
        dl_ps_shard(e->n_weights, im->cfg.servers, sv, &lo, &hi);
        int rc = c->ops->recv(c, e->weights + lo, sizeof *e->weights * (size_t)(hi - lo), sv, DL_TAG_PS_WEIGHTS, err);
        if (rc)
            return rc;
    }
    return DL_OK;
}

static int worker_end(struct dl_strategy *s, struct dl_error *err)
{
    struct worker_impl *im = s->impl;
    struct ps_header h = {-1, 0, 0, 0};
    for (int sv = 0; sv < im->cfg.servers; sv++) {
        int rc = s->comm->ops->send(s->comm, &h, sizeof h, sv, DL_TAG_PS_GRADIENT, err);
        if (rc)
            return rc;
    }
    return dl_ps_gather_final(s->comm, s->exec, im->cfg.servers, err);
}

static void worker_destroy(struct dl_strategy *s)
{
    struct worker_impl *im = s->impl;
    if (im)
        free(im->msg);
    free(im);
}

static int worker_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                         struct dl_error *err)
{
    struct worker_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    im->cfg = ps_config(po, s->comm->size);
    long lo, hi;
    dl_ps_shard(s->exec->n_weights, im->cfg.servers, 0, &lo, &hi); /* shard 0 is the largest */
    im->msg = dl_calloc(sizeof(struct ps_header) + dl_dtype_size(DL_F32) * (size_t)(hi - lo), 1, err);
    if (!im->msg) {
        free(im);
        return DL_ERR_NOMEM;
    }
    s->impl = im;
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_ps_worker = {
    /* capabilities: none (strategy.h; each worker's update is applied on its own) */
    .name = "parameter server", .layout = dl_ps_layout, .create = worker_create, .begin = worker_begin,
    .finish = worker_finish, .end = worker_end, .describe = ps_describe, .destroy = worker_destroy};

/* ------------------------------------------------------------ server */
static int server_serve(struct dl_strategy *s, const struct dl_serve_hooks *hooks, struct dl_serve_result *res,
                        struct dl_error *err)
{
    const struct ps_config *cfg = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    int workers = c->size - cfg->servers;
    long lo, hi;
    dl_ps_shard(e->n_weights, cfg->servers, c->rank, &lo, &hi);
    size_t bytes = sizeof(struct ps_header) + dl_dtype_size(DL_F32) * (size_t)(hi - lo);
    /* The configured momentum, per update: W updates decay the velocity as
     * much as mu^W, and asynchrony adds momentum of its own (about 1 - 1/W,
     * Mitliagkas et al. 2016); together they land near mu per global step.
     * Measured, LeNet-5, 4 ranks (3 workers), 3 epochs, per-update momentum
     * 0.7 (the 1-(1-mu)W correction) / 0.8 / 0.85 / 0.9 / 0.965 (mu^(1/W)):
     * ssp:2 87.2 / 88.1 / 88.4 / 89.1 / 87.9%, async 87.2 / 88.2 / 88.6 /
     * 89.4 / 86.9%; sync 89.3%. */
    struct dl_optim opt = {0};
    struct dl_ps_worker_slot *w = dl_calloc((size_t)workers, sizeof *w, err);
    float *grad = dl_calloc((size_t)(hi - lo > 0 ? hi - lo : 1), sizeof *grad, err);
    int rc = w && grad ? dl_optim_init(&opt, &s->optim->spec, hi - lo, err) : DL_ERR_NOMEM;
    for (int i = 0; !rc && i < workers; i++) {
        w[i].msg = dl_calloc(bytes, 1, err);
        rc = w[i].msg ? c->ops->irecv(c, w[i].msg, bytes, cfg->servers + i, DL_TAG_PS_GRADIENT, &w[i].req, err)
                      : DL_ERR_NOMEM;
    }
    int active = workers;
    while (!rc && active > 0) {
        int progress = 0;
        for (int i = 0; i < workers && !rc; i++) {
            if (w[i].finished || w[i].waiting)
                continue;
            int done = 0;
            rc = c->ops->test(c, &w[i].req, &done, err);
            if (rc || !done)
                continue;
            progress = 1;
            struct ps_header h;
            memcpy(&h, w[i].msg, sizeof h);
            if (h.clock < 0) {
                w[i].finished = 1;
                active--;
                continue;
            }
            memcpy(grad, w[i].msg + sizeof h, sizeof *grad * (size_t)(hi - lo));
            /* update u stands for 1/W of global step u / W */
            double lr = hooks->lr_at(hooks->ctx, res->updates / workers) / (double)workers;
            dl_optim_step(&opt, lr, e->weights + lo, grad);
            res->updates++;
            w[i].clock = (long)h.clock;
            w[i].waiting = 1;
            if (hooks->on_update) {
                long slow = dl_ps_slowest(w, workers);
                struct dl_served_update u = {.worker = i, .step = w[i].clock, .updates = res->updates,
                                             .loss = h.batch > 0 ? h.loss_sum / h.batch : 0,
                                             .accuracy = h.batch > 0 ? h.correct / h.batch : 0,
                                             .batch = (int)h.batch,
                                             .staleness = slow >= 0 ? (int)(w[i].clock - slow) : 0, .lr = lr};
                hooks->on_update(hooks->ctx, &u);
            }
        }
        /* Answer every waiting worker that is within the bound. */
        long slow = dl_ps_slowest(w, workers);
        for (int i = 0; i < workers && !rc; i++) {
            if (!w[i].waiting)
                continue;
            long gap = w[i].clock - slow;
            if (cfg->staleness >= 0 && gap > cfg->staleness)
                continue;
            if (gap > res->max_staleness)
                res->max_staleness = (int)gap;
            rc = c->ops->send(c, e->weights + lo, sizeof *e->weights * (size_t)(hi - lo), cfg->servers + i,
                              DL_TAG_PS_WEIGHTS, err);
            w[i].waiting = 0;
            if (!rc)
                rc = c->ops->irecv(c, w[i].msg, bytes, cfg->servers + i, DL_TAG_PS_GRADIENT, &w[i].req, err);
            progress = 1;
        }
        if (!progress) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (!rc)
        rc = dl_ps_gather_final(c, e, cfg->servers, err);
    for (int i = 0; w && i < workers; i++)
        free(w[i].msg);
    free(w);
    free(grad);
    dl_optim_free(&opt);
    return rc;
}

static void server_destroy(struct dl_strategy *s)
{
    free(s->impl);
}

static int server_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                         struct dl_error *err)
{
    struct ps_config *cfg = dl_calloc(1, sizeof *cfg, err);
    if (!cfg)
        return DL_ERR_NOMEM;
    *cfg = ps_config(po, s->comm->size);
    s->impl = cfg;
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_ps_server = {
    /* capabilities: none (strategy.h; each worker's update is applied on its own) */
    .name = "parameter server", .layout = dl_ps_layout, .create = server_create, .serve = server_serve,
    .describe = ps_describe, .destroy = server_destroy};
