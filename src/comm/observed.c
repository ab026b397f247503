/* observed.c: the forwarding communicator (see observed.h).  Non-blocking
 * calls (isend, irecv, test) pass through unobserved; their wait is
 * observed. */
#include "comm/observed.h"

#include <stdlib.h>

struct observed {
    struct dl_comm *inner;
    const struct dl_comm_observer *o;
    void *ctx;
    int owns;
};

static const struct dl_comm_ops observed_ops;

struct dl_comm *dl_comm_observed_inner(struct dl_comm *c)
{
    return c && c->ops == &observed_ops ? ((struct observed *)c->impl)->inner : c;
}

void *dl_comm_observer_ctx(struct dl_comm *c, const struct dl_comm_observer *o)
{
    for (; c && c->ops == &observed_ops; c = ((struct observed *)c->impl)->inner)
        if (((struct observed *)c->impl)->o == o)
            return ((struct observed *)c->impl)->ctx;
    return NULL;
}

static struct dl_comm *inner(struct dl_comm *c)
{
    return ((struct observed *)c->impl)->inner;
}

static long enter(struct dl_comm *c, const char *call, int peer, size_t bytes)
{
    struct observed *x = c->impl;
    return x->o->enter(x->ctx, call, peer, bytes);
}

static void leave(struct dl_comm *c, long token)
{
    struct observed *x = c->impl;
    x->o->leave(x->ctx, token);
}

static int o_split(struct dl_comm *c, int color, int key, struct dl_comm **out, struct dl_error *err)
{
    return inner(c)->ops->split(inner(c), color, key, out, err);
}

static int o_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    long t = enter(c, "send", peer, bytes);
    int rc = inner(c)->ops->send(inner(c), buf, bytes, peer, tag, err);
    leave(c, t);
    return rc;
}

static int o_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    long t = enter(c, "receive", peer, bytes);
    int rc = inner(c)->ops->recv(inner(c), buf, bytes, peer, tag, err);
    leave(c, t);
    return rc;
}

static int o_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    return inner(c)->ops->isend(inner(c), buf, bytes, peer, tag, req, err);
}

static int o_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                   struct dl_error *err)
{
    return inner(c)->ops->irecv(inner(c), buf, bytes, peer, tag, req, err);
}

static int o_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    long t = enter(c, "message exchange", -1, 0);
    int rc = inner(c)->ops->wait(inner(c), req, err);
    leave(c, t);
    return rc;
}

static int o_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    return inner(c)->ops->test(inner(c), req, done, err);
}

static int o_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    long t = enter(c, "sum (allreduce)", -1, n * dl_dtype_size(dtype));
    int rc = inner(c)->ops->allreduce(inner(c), buf, dtype, n, err);
    leave(c, t);
    return rc;
}

static int o_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    long t = enter(c, "reduce", -1, n * dl_dtype_size(dtype));
    int rc = inner(c)->ops->reduce(inner(c), buf, dtype, n, root, err);
    leave(c, t);
    return rc;
}

static int o_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                            struct dl_error *err)
{
    long t = enter(c, "reduce-scatter", -1, count * (size_t)c->size * dl_dtype_size(dtype));
    int rc = inner(c)->ops->reduce_scatter(inner(c), send, recv, dtype, count, err);
    leave(c, t);
    return rc;
}

static int o_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes, struct dl_error *err)
{
    long t = enter(c, "allgather", -1, bytes);
    int rc = inner(c)->ops->allgather(inner(c), send, recv, bytes, err);
    leave(c, t);
    return rc;
}

static int o_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                       const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    size_t bytes = 0;
    for (int p = 0; p < c->size; p++)
        bytes += scount[p];
    long t = enter(c, "all-to-all", -1, bytes);
    int rc = inner(c)->ops->alltoallv(inner(c), send, scount, sdispl, recv, rcount, rdispl, err);
    leave(c, t);
    return rc;
}

static int o_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    long t = enter(c, "broadcast", -1, bytes);
    int rc = inner(c)->ops->bcast(inner(c), buf, bytes, root, err);
    leave(c, t);
    return rc;
}

static int o_barrier(struct dl_comm *c, struct dl_error *err)
{
    long t = enter(c, "barrier", -1, 0);
    int rc = inner(c)->ops->barrier(inner(c), err);
    leave(c, t);
    return rc;
}

static void o_abort(struct dl_comm *c, int code)
{
    inner(c)->ops->abort(inner(c), code);
}

static void o_destroy(struct dl_comm *c)
{
    struct observed *x = c->impl;
    if (x->owns)
        dl_comm_close(x->inner);
    if (x->o->destroy)
        x->o->destroy(x->ctx);
    free(x);
}

static const struct dl_comm_ops observed_ops = {
    .name = "observed", .split = o_split, .send = o_send, .recv = o_recv, .isend = o_isend, .irecv = o_irecv,
    .wait = o_wait, .test = o_test, .allreduce = o_allreduce, .reduce_scatter = o_reduce_scatter, .reduce = o_reduce,
    .allgather = o_allgather, .alltoallv = o_alltoallv, .bcast = o_bcast, .barrier = o_barrier, .abort = o_abort,
    .destroy = o_destroy};

int dl_comm_observe(struct dl_comm **c, const struct dl_comm_observer *o, void *ctx, int owns, struct dl_error *err)
{
    struct dl_comm *in = *c;
    struct observed *x = dl_calloc(1, sizeof *x, err);
    struct dl_comm *out = x ? dl_comm_new(&observed_ops, in->rank, in->size, err) : NULL;
    if (!out) {
        free(x);
        return DL_ERR_NOMEM;
    }
    *x = (struct observed){in, o, ctx, owns};
    out->impl = x;
    out->thread_level = in->thread_level;
    out->ops = &observed_ops;
    *c = out;
    return DL_OK;
}
