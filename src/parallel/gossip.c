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

#include "comm/tags.h"
#include "core/clock.h"
#include "parallel/mixing.h"

struct gossip_impl {
    enum dl_topology topology;
    int overlap;
    const char *algorithm;  /* of the final average */
    long n;                 /* floats per vector: weights, then statistics */
    float *own;             /* this rank's vector as sent */
    float *heard;           /* the in-neighbours' vectors, max_peers x n */
    int max_peers;
    int *offsets, peers;    /* D of the exchange in flight */
    struct dl_comm_req *reqs; /* receives, then sends */
    int in_flight;
    double started;         /* clock when the exchange was posted */
    int global_batch;       /* of the step in progress */
    long t;                 /* exchanges so far: the 0-based step */
};

/* Copies the weights and statistics into own and posts the exchange of
 * 0-based step t: receive from i - d, send to i + d. */
static int exchange_start(struct dl_strategy *s, long t, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    memcpy(im->own, e->weights, sizeof *im->own * (size_t)e->n_weights);
    memcpy(im->own + e->n_weights, e->state, sizeof *im->own * (size_t)e->n_state);
    im->peers = dl_mixing_offsets(im->topology, c->size, t, im->offsets, im->max_peers);
    size_t bytes = sizeof *im->own * (size_t)im->n;
    im->started = dl_clock_now();
    int rc = DL_OK;
    for (int k = 0; k < im->peers && !rc; k++) {
        int from = (c->rank - im->offsets[k] + c->size) % c->size;
        rc = c->ops->irecv(c, im->heard + (size_t)k * (size_t)im->n, bytes, from, DL_TAG_GOSSIP, &im->reqs[k], err);
    }
    for (int k = 0; k < im->peers && !rc; k++) {
        int to = (c->rank + im->offsets[k]) % c->size;
        rc = c->ops->isend(c, im->own, bytes, to, DL_TAG_GOSSIP, &im->reqs[im->peers + k], err);
    }
    im->in_flight = 1;
    return rc;
}

/* Waits for the exchange and mixes: x <- (own + sum heard) / (peers + 1),
 * plus the local change since own was taken (x - own) when overlapping. */
static int exchange_finish(struct dl_strategy *s, struct dl_step_stats *st, struct dl_error *err)
{
    struct gossip_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    double waited = dl_clock_now();
    int rc = dl_comm_waitall(s->comm, im->reqs, 2 * im->peers, err);
    im->in_flight = 0;
    if (rc)
        return rc;
    double done = dl_clock_now();
    double each = dl_mixing_weight(im->peers);
    for (long i = 0; i < im->n; i++) {
        float *x = i < e->n_weights ? &e->weights[i] : &e->state[i - e->n_weights];
        double acc = im->own[i];
        for (int k = 0; k < im->peers; k++)
            acc += im->heard[(size_t)k * (size_t)im->n + (size_t)i];
        acc *= each;
        if (im->overlap)
            acc += (double)*x - im->own[i];
        *x = (float)acc;
    }
    st->bytes_sent = sizeof *im->own * (size_t)im->n * (size_t)im->peers;
    st->dense_bytes = st->bytes_sent;
    st->comm_seconds = done - im->started;
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
            dl_strategy_optim_step(s, lr);
    } else {
        dl_strategy_optim_step(s, lr);
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
    snprintf(buf, size, "gossip over %s (%d peer%s per step%s), averaged at the end", dl_topology_names[im->topology],
             dl_mixing_max_peers(im->topology, s->comm->size), dl_mixing_max_peers(im->topology, s->comm->size) > 1 ? "s" : "",
             im->overlap ? ", exchange overlapped with the step" : "");
}

static void gossip_destroy(struct dl_strategy *s)
{
    struct gossip_impl *im = s->impl;
    if (!im)
        return;
    if (im->in_flight) { /* an error left the exchange posted: let it complete before freeing its buffers */
        struct dl_error ignored;
        dl_comm_waitall(s->comm, im->reqs, 2 * im->peers, &ignored);
    }
    free(im->own);
    free(im->heard);
    free(im->offsets);
    free(im->reqs);
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
    im->topology = po->topology;
    im->overlap = po->gossip_overlap;
    im->algorithm = po->allreduce ? po->allreduce : "auto";
    im->n = s->exec->n_weights + s->exec->n_state;
    im->max_peers = dl_mixing_max_peers(im->topology, s->comm->size);
    size_t n = (size_t)(im->n > 0 ? im->n : 1), k = (size_t)im->max_peers;
    im->own = dl_calloc(n, sizeof *im->own, err);
    im->heard = im->own ? dl_calloc(n * k, sizeof *im->heard, err) : NULL;
    im->offsets = im->heard ? dl_calloc(k, sizeof *im->offsets, err) : NULL;
    im->reqs = im->offsets ? dl_calloc(2 * k, sizeof *im->reqs, err) : NULL;
    if (!im->reqs) {
        gossip_destroy(s);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_gossip = {
    .name = "gossip", .layout = dl_layout_decentralized, .create = gossip_create, .begin = gossip_begin,
    .finish = gossip_finish, .end = gossip_end, .describe = gossip_describe, .destroy = gossip_destroy};
