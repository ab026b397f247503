/* gossip.c: decentralized training over a virtual topology (gossip SGD,
 * D-PSGD: Lian et al. 2017).  Every rank keeps its own model; each step it
 * takes a local optimizer step on its own gradient (adapt) and then replaces
 * its weights and batch-norm statistics by the mix of its own and its
 * in-neighbours' (combine): x_i <- sum_j W_ij x_j, with the doubly stochastic
 * W of parallel/mixing.h.  The vectors travel point to point, one message
 * (weights, then statistics) per neighbour and step, with non-blocking sends
 * and receives, so no rank waits on more than its neighbours.
 *
 * --gossip-overlap is D-PSGD's form: the vectors of the step's start are sent
 * while forward and backward run, then x_i <- sum_j W_ij x_j(t) + (the
 * step's local change), the optimizer step last (for the weights the local
 * change is zero: the gradient was taken at x_i(t)).  The end of training
 * averages once over all ranks, so that every rank evaluates and saves the
 * one average model. */
#include "parallel/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "parallel/gossip_exchange.h"

struct gossip_impl {
    struct dl_gossip_exchange x; /* weights, then statistics */
    int overlap;
    const char *algorithm;  /* of the final average */
    int global_batch;       /* of the step in progress */
    long t;                 /* exchanges so far: the 0-based step */
};

/* Posts the exchange of this rank's weights and statistics at step t. */
static int exchange_start(struct dl_strategy *s, long t, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    memcpy(im->x.own, e->weights, sizeof *im->x.own * (size_t)e->n_weights);
    memcpy(im->x.own + e->n_weights, e->state, sizeof *im->x.own * (size_t)e->n_state);
    return dl_gossip_exchange_start(&im->x, t, err);
}

/* Waits for the exchange and mixes into the weights and statistics, the
 * local change since the start kept when overlapping. */
static int exchange_finish(struct dl_strategy *s, struct dl_step_stats *st, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    double waited = dl_clock_now();
    int rc = dl_gossip_exchange_wait(&im->x, err);
    if (rc)
        return rc;
    double done = dl_clock_now();
    size_t nw = (size_t)e->n_weights;
    dl_gossip_exchange_combine(&im->x, 0, nw, e->weights, im->overlap);
    dl_gossip_exchange_combine(&im->x, nw, im->x.n, e->state, im->overlap);
    st->bytes_sent = st->dense_bytes = dl_gossip_exchange_bytes(&im->x);
    st->comm_seconds = done - im->x.started;
    st->exposed_seconds = done - waited;
    return DL_OK;
}

/* The 0-based step t of the exchange is counted here (begin does not know
 * the trainer's step number). */
static int gossip_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    im->global_batch = global_batch;
    return im->overlap ? exchange_start(s, im->t, err) : DL_OK;
}

static int gossip_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                         struct dl_step_stats *st, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    int rc = dl_strategy_sum_metrics(s, m, im->global_batch, err);
    if (rc)
        return rc;
    if (im->overlap) {
        rc = exchange_finish(s, st, err);
        if (!rc)
            rc = dl_strategy_optim_step(s, lr, m, err);
    } else {
        rc = dl_strategy_optim_step(s, lr, m, err);
        if (!rc)
            rc = exchange_start(s, im->t, err);
        if (!rc)
            rc = exchange_finish(s, st, err);
    }
    im->t++;
    return rc;
}

static int gossip_end(struct dl_strategy *s, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    return dl_strategy_average_model(s, im->algorithm, err);
}

static void gossip_describe(const struct dl_strategy *s, char *buf, size_t size)
{
    const struct gossip_impl *im = s->impl;
    int peers = im->x.max_peers;
    snprintf(buf, size, "gossip over %s (%d neighbour%s per step%s), averaged at the end",
             dl_topology_names[im->x.topology], peers, peers > 1 ? "s" : "",
             im->overlap ? ", exchange overlapped with the step" : "");
}

static void gossip_destroy(struct dl_strategy *s)
{
    struct gossip_impl *im = s->impl;
    if (!im)
        return;
    dl_gossip_exchange_free(&im->x);
    free(im);
    s->impl = NULL;
}

static int gossip_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                         struct dl_error *err)
{
    struct gossip_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    s->impl = im;
    im->overlap = po->gossip_overlap;
    im->algorithm = po->allreduce ? po->allreduce : "auto";
    int rc = dl_gossip_exchange_init(&im->x, s->comm, po->topology,
                                     (size_t)(s->exec->n_weights + s->exec->n_state), err);
    if (rc) {
        free(im);
        s->impl = NULL;
    }
    return rc;
}

const struct dl_strategy_ops dl_strategy_gossip = {
    .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_tied_across_ranks = 1,
    .name = "gossip", .layout = dl_layout_decentralized, .create = gossip_create, .begin = gossip_begin,
    .finish = gossip_finish, .end = gossip_end, .describe = gossip_describe, .destroy = gossip_destroy};
