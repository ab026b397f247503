/* standin.c: a communicator that plays rank `rank` of a group of `size`
 * with no peers behind it, for timing one rank's compute (the planner
 * measures a tensor rank's layers on this host; cli/layer_times.c).
 * Nothing moves and nothing waits: the collectives act as if every other
 * rank held exactly this rank's values (an allreduce multiplies by the
 * size, an allgather repeats this rank's part in every slot, a
 * reduce-scatter gives the size times this rank's slice, a reduce the root
 * the size times its values, an all-to-all each rank what this rank sends
 * it, a broadcast leaves
 * the buffer as it is), so that counts summed over the group come out
 * right; sends are dropped and receives complete at once with their
 * buffers untouched.  The values computed are otherwise meaningless; the
 * work and the shapes are a real rank's. */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

static int standin_split(struct dl_comm *c, int color, int key, struct dl_comm **out, struct dl_error *err)
{
    (void)c, (void)color, (void)key, (void)out;
    return dl_errorf(err, DL_ERR_INTERNAL, "standin communicator: split is not supported");
}

static int standin_post(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                        struct dl_comm_req *req, struct dl_error *err)
{
    (void)buf, (void)bytes, (void)tag, (void)err;
    if (peer < 0 || peer >= c->size)
        return dl_errorf(err, DL_ERR_COMM, "standin: peer rank %d does not exist (size %d)", peer, c->size);
    if (req)
        req->active = 0;
    return DL_OK;
}

static int standin_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    return standin_post(c, buf, bytes, peer, tag, NULL, err);
}

static int standin_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_error *err)
{
    return standin_post(c, buf, bytes, peer, tag, NULL, err);
}

static int standin_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                         struct dl_comm_req *req, struct dl_error *err)
{
    return standin_post(c, buf, bytes, peer, tag, req, err);
}

static int standin_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag, struct dl_comm_req *req,
                         struct dl_error *err)
{
    return standin_post(c, buf, bytes, peer, tag, req, err);
}

static int standin_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    (void)c, (void)err;
    req->active = 0;
    return DL_OK;
}

static int standin_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    (void)c, (void)err;
    req->active = 0;
    *done = 1;
    return DL_OK;
}

static int standin_allreduce_f32(struct dl_comm *c, float *buf, size_t n, void *ctx, struct dl_error *err)
{
    (void)ctx, (void)err;
    for (size_t i = 0; i < n; i++)
        buf[i] *= (float)c->size;
    return DL_OK;
}

static int standin_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    return dl_comm_sum_as_f32(c, buf, dtype, n, standin_allreduce_f32, NULL, err);
}

static int standin_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype,
                                  size_t count, struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    size_t size = dl_dtype_size(dtype);
    if (rc == DL_OK && count)
        memmove(recv, (const unsigned char *)send + (size_t)c->rank * count * size, count * size);
    return rc != DL_OK ? rc : standin_allreduce(c, recv, dtype, count, err);
}

static int standin_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root,
                          struct dl_error *err)
{
    if (dtype != DL_F32)
        return dl_errorf(err, DL_ERR_INTERNAL, "reduce: f32 only");
    return c->rank == root ? standin_allreduce(c, buf, dtype, n, err) : DL_OK;
}

static int standin_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes, struct dl_error *err)
{
    (void)err;
    unsigned char *mine = (unsigned char *)recv + (size_t)c->rank * bytes;
    if (bytes && send != mine)
        memmove(mine, send, bytes);
    for (int r = 0; bytes && r < c->size; r++)
        if (r != c->rank)
            memcpy((unsigned char *)recv + (size_t)r * bytes, mine, bytes);
    return DL_OK;
}

/* Every rank's part from rank p as if p held this rank's: the bytes this
 * rank sends p, as many as fit. */
static int standin_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl,
                             void *recv, const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    (void)err;
    for (int p = 0; p < c->size; p++) {
        size_t n = scount[p] < rcount[p] ? scount[p] : rcount[p];
        if (n)
            memmove((char *)recv + rdispl[p], (const char *)send + sdispl[p], n);
    }
    return DL_OK;
}

static int standin_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    return standin_post(c, buf, bytes, root, 0, NULL, err);
}

static int standin_barrier(struct dl_comm *c, struct dl_error *err)
{
    (void)c, (void)err;
    return DL_OK;
}

static void standin_abort(struct dl_comm *c, int code)
{
    (void)c;
    exit(code ? code : 1);
}

static void standin_destroy(struct dl_comm *c)
{
    (void)c;
}

static const struct dl_comm_ops standin_ops = {
    .name = "standin",
    .split = standin_split,
    .send = standin_send,
    .recv = standin_recv,
    .isend = standin_isend,
    .irecv = standin_irecv,
    .wait = standin_wait,
    .test = standin_test,
    .allreduce = standin_allreduce,
    .reduce_scatter = standin_reduce_scatter,
    .reduce = standin_reduce,
    .allgather = standin_allgather,
    .alltoallv = standin_alltoallv,
    .bcast = standin_bcast,
    .barrier = standin_barrier,
    .abort = standin_abort,
    .destroy = standin_destroy,
};

int dl_comm_standin_open(int rank, int size, struct dl_comm **out, struct dl_error *err)
{
    *out = dl_comm_new(&standin_ops, rank, size, err);
    return *out ? DL_OK : DL_ERR_NOMEM;
}
