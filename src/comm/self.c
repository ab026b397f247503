/* self.c: the one-process backend (size 1, no MPI), so that a build without
 * MPI still trains.  Collectives are copies.  Sending to oneself works through
 * an internal queue: a send is copied and held until a receive with the same
 * tag takes it (or the receive waits for the send); waiting on a receive that
 * no send can ever match is an error, not a hang. */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

/* One pending operation: an unmatched send (own copy of the data) or an
 * unmatched receive (the caller's buffer). */
struct self_msg {
    struct self_msg *next;
    int is_send;
    int tag;
    size_t bytes;
    void *buf;
    int done;         /* matched and copied */
    int owner_waiting; /* request still referenced by a dl_comm_req */
    int status;       /* DL_OK or the error of the match (size mismatch) */
};

struct self_state {
    struct self_msg *head; /* in posting order */
};

static int check_peer(int peer, struct dl_error *err)
{
    if (peer != 0)
        return dl_errorf(err, DL_ERR_COMM, "self: peer rank %d does not exist (size 1)", peer);
    return DL_OK;
}

/* Finds the oldest pending message of the other kind with this tag. */
static struct self_msg *find_match(struct self_state *s, int is_send, int tag)
{
    for (struct self_msg *m = s->head; m; m = m->next)
        if (!m->done && m->is_send != is_send && m->tag == tag)
            return m;
    return NULL;
}

static void unlink_msg(struct self_state *s, struct self_msg *m)
{
    for (struct self_msg **p = &s->head; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            return;
        }
}

static void release(struct self_state *s, struct self_msg *m)
{
    unlink_msg(s, m);
    if (m->is_send)
        free(m->buf);
    free(m);
}

/* Copies a matched send into a receive; a longer send than the receive
 * buffer is an error (as MPI_ERR_TRUNCATE). */
static void deliver(struct self_msg *snd, struct self_msg *rcv)
{
    if (snd->bytes > rcv->bytes) {
        rcv->status = DL_ERR_COMM;
    } else if (snd->bytes) {
        memcpy(rcv->buf, snd->buf, snd->bytes);
    }
    snd->done = rcv->done = 1;
}

static int post(struct dl_comm *c, int is_send, void *buf, size_t bytes, int peer, int tag,
                struct dl_comm_req *req, struct dl_error *err)
{
    struct self_state *s = c->impl;
    int rc = check_peer(peer, err);
    if (rc != DL_OK)
        return rc;
    struct self_msg *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->is_send = is_send;
    m->tag = tag;
    m->bytes = bytes;
    m->owner_waiting = 1;
    if (is_send) {
        m->buf = malloc(bytes ? bytes : 1);
        if (!m->buf) {
            free(m);
            return dl_errorf(err, DL_ERR_NOMEM, "self: out of memory queueing %zu bytes", bytes);
        }
        memcpy(m->buf, buf, bytes);
    } else {
        m->buf = buf;
    }
    struct self_msg *other = find_match(s, is_send, tag);
    if (other) {
        if (is_send) {
            deliver(m, other);
        } else {
            deliver(other, m);
            if (!other->owner_waiting) /* its sender already moved on */
                release(s, other);
        }
    }
    struct self_msg **tail = &s->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    req->u.ptr = m;
    req->active = 1;
    return DL_OK;
}

/* A send completes at once (the data is copied); the message stays queued,
 * owned by the queue, until a receive takes it. */
static int self_test(struct dl_comm *c, struct dl_comm_req *req, int *done,
                     struct dl_error *err)
{
    struct self_state *s = c->impl;
    struct self_msg *m = req->u.ptr;
    *done = 0;
    if (!req->active) {
        *done = 1;
        return DL_OK;
    }
    if (m->is_send && !m->done) {
        m->owner_waiting = 0;
        req->active = 0;
        *done = 1;
        return DL_OK;
    }
    if (!m->done)
        return DL_OK;
    int status = m->status;
    size_t bytes = m->bytes;
    release(s, m);
    req->active = 0;
    *done = 1;
    if (status != DL_OK)
        return dl_errorf(err, status, "self: message longer than the %zu-byte receive buffer",
                         bytes);
    return DL_OK;
}

static int self_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    int done;
    int rc = self_test(c, req, &done, err);
    if (rc == DL_OK && !done) {
        struct self_msg *m = req->u.ptr;
        return dl_errorf(err, DL_ERR_COMM,
                         "self: waiting on a receive (tag %d, %zu bytes) that no send matches;"
                         " it would never complete", m->tag, m->bytes);
    }
    return rc;
}

static int self_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                      struct dl_comm_req *req, struct dl_error *err)
{
    return post(c, 1, (void *)buf, bytes, peer, tag, req, err);
}

static int self_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                      struct dl_comm_req *req, struct dl_error *err)
{
    return post(c, 0, buf, bytes, peer, tag, req, err);
}

static int self_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                     struct dl_error *err)
{
    struct dl_comm_req r = {.active = 0};
    int rc = self_isend(c, buf, bytes, peer, tag, &r, err);
    return rc != DL_OK ? rc : self_wait(c, &r, err);
}

static int self_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                     struct dl_error *err)
{
    struct dl_comm_req r = {.active = 0};
    int rc = self_irecv(c, buf, bytes, peer, tag, &r, err);
    if (rc != DL_OK)
        return rc;
    rc = self_wait(c, &r, err);
    if (rc != DL_OK && r.active) /* unmatched: withdraw it */
        release(c->impl, r.u.ptr);
    return rc;
}

/* One rank's sum is its values (a bf16 value widened and rounded back is itself). */
static int self_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    return dl_comm_sum_dtype_ok(dtype, err);
}

static int self_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                               struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    if (rc == DL_OK && count && send != recv)
        memmove(recv, send, count * dl_dtype_size(dtype));
    return rc;
}

static int self_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    (void)c, (void)buf, (void)n, (void)root;
    return dtype == DL_F32 ? DL_OK : dl_errorf(err, DL_ERR_INTERNAL, "reduce: f32 only");
}

static int self_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes,
                          struct dl_error *err)
{
    if (bytes && send != recv)
        memmove(recv, send, bytes);
    return DL_OK;
}

static int self_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                          const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    if (scount[0] != rcount[0])
        return dl_errorf(err, DL_ERR_INTERNAL, "alltoallv: %zu bytes sent to oneself, %zu expected", scount[0],
                         rcount[0]);
    if (scount[0])
        memmove((char *)recv + rdispl[0], (const char *)send + sdispl[0], scount[0]);
    return DL_OK;
}

static int self_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    return check_peer(root, err);
}

static int self_barrier(struct dl_comm *c, struct dl_error *err)
{
    return DL_OK;
}

static void self_abort(struct dl_comm *c, int code)
{
    exit(code ? code : 1);
}

static void self_destroy(struct dl_comm *c)
{
    struct self_state *s = c->impl;
    if (!s)
        return;
    while (s->head)
        release(s, s->head);
    free(s);
}

static int self_split(struct dl_comm *c, int color, int key, struct dl_comm **out,
                      struct dl_error *err)
{
    *out = NULL;
    if (color < 0)
        return DL_OK;
    return dl_comm_self_open(out, err);
}

static const struct dl_comm_ops self_ops = {
    .name = "self",
    .split = self_split,
    .send = self_send,
    .recv = self_recv,
    .isend = self_isend,
    .irecv = self_irecv,
    .wait = self_wait,
    .test = self_test,
    .allreduce = self_allreduce,
    .reduce_scatter = self_reduce_scatter,
    .reduce = self_reduce,
    .allgather = self_allgather,
    .alltoallv = self_alltoallv,
    .bcast = self_bcast,
    .barrier = self_barrier,
    .abort = self_abort,
    .destroy = self_destroy,
};

int dl_comm_self_open(struct dl_comm **out, struct dl_error *err)
{
    struct dl_comm *c = dl_comm_new(&self_ops, 0, 1, err);
    if (!c)
        return DL_ERR_NOMEM;
    c->impl = dl_calloc(1, sizeof(struct self_state), err);
    if (!c->impl) {
        free(c);
        return DL_ERR_NOMEM;
    }
    c->thread_level = 3; /* no runtime underneath: any thread may call */
    *out = c;
    return DL_OK;
}
