/* emulate.c: the emulated slower network (see emulate.h): the option's
 * parser, the delays of messages and native collectives, and the wrapper,
 * which sleeps, then forwards every call to the wrapped communicator. */
#include "comm/emulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/parse.h"

/* Longest latency accepted: ten seconds per message is no network. */

int dl_comm_emulation_parse(const char *opt, const char *text, struct dl_comm_emulation *out,
                            struct dl_error *err)
{
    struct dl_link l;
    int rc = dl_parse_link(opt, text, 0, DL_LINK_MAX_ALPHA, &l, err);
    if (!rc)
        *out = (struct dl_comm_emulation){l.alpha, l.bw};
    return rc;
}

const char *dl_comm_emulation_str(const struct dl_comm_emulation *e, char *buf, size_t size)
{
    if (e->bw > 0)
        snprintf(buf, size, "alpha %g us, %g GB/s", e->alpha * 1e6, e->bw / 1e9);
    else
        snprintf(buf, size, "alpha %g us, unlimited bandwidth", e->alpha * 1e6);
    return buf;
}

double dl_comm_emulation_message_s(const struct dl_comm_emulation *e, double bytes)
{
    return e->alpha + (e->bw > 0 ? bytes / e->bw : 0);
}

double dl_comm_emulation_allreduce_s(const struct dl_comm_emulation *e, int p, double bytes)
{
    if (p <= 1)
        return 0;
    return 2.0 * (p - 1) * dl_comm_emulation_message_s(e, bytes / p);
}

void dl_comm_emulation_cost(const struct dl_comm_emulation *e, struct dl_cost_params *cp)
{
    double beta = e->bw > 0 ? 1 / e->bw : 0;
    double *betas[] = {&cp->beta, &cp->beta_pair, &cp->beta_small, &cp->beta_oneway, &cp->beta_large};
    cp->alpha += e->alpha;
    for (size_t i = 0; i < sizeof betas / sizeof betas[0]; i++)
        if (*betas[i] > 0) /* 0 means "as beta", which already has it */
            *betas[i] += beta;
}

/* ceil(log2 p): the rounds of a binomial tree or a dissemination barrier. */
static int rounds(int p)
{
    int r = 0;
    while ((1 << r) < p)
        r++;
    return r;
}

/* ------------------------------------------------------------ the wrapper */
struct emulated {
    struct dl_comm *inner;
    struct dl_comm_emulation e;
};

static struct dl_comm *inner(struct dl_comm *c)
{
    return ((struct emulated *)c->impl)->inner;
}

/* Sleeps for `messages` messages of `bytes` each. */
static void delay(struct dl_comm *c, double messages, double bytes)
{
    dl_clock_sleep(messages * dl_comm_emulation_message_s(&((struct emulated *)c->impl)->e, bytes));
}

static int e_split(struct dl_comm *c, int color, int key, struct dl_comm **out, struct dl_error *err)
{
    int rc = inner(c)->ops->split(inner(c), color, key, out, err);
    if (rc || !*out)
        return rc;
    rc = dl_comm_emulate(out, &((struct emulated *)c->impl)->e, err);
    if (rc) {
        dl_comm_close(*out);
        *out = NULL;
    }
    return rc;
}

static int e_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    delay(c, 1, (double)bytes);
    return inner(c)->ops->send(inner(c), buf, bytes, peer, tag, err);
}

static int e_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    return inner(c)->ops->recv(inner(c), buf, bytes, peer, tag, err);
}

static int e_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    delay(c, 1, (double)bytes);
    return inner(c)->ops->isend(inner(c), buf, bytes, peer, tag, req, err);
}

static int e_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    return inner(c)->ops->irecv(inner(c), buf, bytes, peer, tag, req, err);
}

static int e_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    return inner(c)->ops->wait(inner(c), req, err);
}

static int e_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    return inner(c)->ops->test(inner(c), req, done, err);
}

static int e_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    dl_clock_sleep(dl_comm_emulation_allreduce_s(&((struct emulated *)c->impl)->e, c->size,
                                                 (double)n * dl_dtype_size(dtype)));
    return inner(c)->ops->allreduce(inner(c), buf, dtype, n, err);
}

static int e_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                            struct dl_error *err)
{
    delay(c, c->size - 1, (double)count * dl_dtype_size(dtype));
    return inner(c)->ops->reduce_scatter(inner(c), send, recv, dtype, count, err);
}

static int e_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    /* a reduce-scatter, then the blocks gathered to the root: 2 (p - 1) messages of n / p */
    delay(c, 2.0 * (c->size - 1), (double)n * dl_dtype_size(dtype) / c->size);
    return inner(c)->ops->reduce(inner(c), buf, dtype, n, root, err);
}

static int e_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes, struct dl_error *err)
{
    delay(c, c->size - 1, (double)bytes);
    return inner(c)->ops->allgather(inner(c), send, recv, bytes, err);
}

/* size - 1 messages, of this rank's mean part to another rank */
static int e_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                       const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    double sent = 0;
    for (int p = 0; p < c->size; p++)
        sent += p == c->rank ? 0 : (double)scount[p];
    if (c->size > 1)
        delay(c, c->size - 1, sent / (c->size - 1));
    return inner(c)->ops->alltoallv(inner(c), send, scount, sdispl, recv, rcount, rdispl, err);
}

static int e_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    delay(c, rounds(c->size), (double)bytes);
    return inner(c)->ops->bcast(inner(c), buf, bytes, root, err);
}

static int e_barrier(struct dl_comm *c, struct dl_error *err)
{
    delay(c, rounds(c->size), 0);
    return inner(c)->ops->barrier(inner(c), err);
}

static void e_abort(struct dl_comm *c, int code)
{
    inner(c)->ops->abort(inner(c), code);
}

static void e_destroy(struct dl_comm *c)
{
    struct emulated *x = c->impl;
    dl_comm_close(x->inner);
    free(x);
}

static const struct dl_comm_ops emulated_ops = {
    .name = "emulated", .split = e_split, .send = e_send, .recv = e_recv, .isend = e_isend, .irecv = e_irecv,
    .wait = e_wait, .test = e_test, .allreduce = e_allreduce, .reduce_scatter = e_reduce_scatter, .reduce = e_reduce,
    .allgather = e_allgather, .alltoallv = e_alltoallv, .bcast = e_bcast, .barrier = e_barrier, .abort = e_abort, .destroy = e_destroy};

int dl_comm_emulate(struct dl_comm **c, const struct dl_comm_emulation *e, struct dl_error *err)
{
    struct dl_comm *in = *c;
    struct emulated *x = dl_calloc(1, sizeof *x, err);
    struct dl_comm *out = x ? dl_comm_new(&emulated_ops, in->rank, in->size, err) : NULL;
    if (!out) {
        free(x);
        return DL_ERR_NOMEM;
    }
    *x = (struct emulated){in, *e};
    out->impl = x;
    out->thread_level = in->thread_level;
    *c = out;
    return DL_OK;
}
