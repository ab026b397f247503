/* nccl.c: the NCCL backend (buffers are GPU device memory; built --with-cuda).
 * NCCL needs a host-side bootstrap to share its unique id: this backend opens
 * the mpi backend for that (self when the build has no MPI), or splits the
 * host communicator it is opened over, and keeps it for barriers and splits.  Point to point uses ncclSend/ncclRecv: non-blocking
 * calls are gathered into one NCCL group that the next wait/test closes,
 * because NCCL has no tags and ungrouped pairs of send/recv can deadlock.
 * Collectives run on the communicator's own stream; wait_mark orders them
 * after a device mark (an event behind the kernels that wrote a buffer). */
#include "comm/comm.h"

#include "backends/device.h"
#include "core/threads.h"

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;
    struct dl_comm *boot; /* host communicator with the same ranks */
    int group_open;       /* ncclGroupStart issued by isend/irecv, not yet ended */
};

void dl_comm_nccl_library(char *buf, size_t size)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess)
        v = NCCL_VERSION_CODE;
    /* NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z from 2.9 on */
    snprintf(buf, size, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

static struct nccl_state *st(struct dl_comm *c)
{
    return c->impl;
}

static int nccl_fail(struct dl_error *err, ncclResult_t r, const char *what)
{
    return dl_errorf(err, DL_ERR_COMM, "nccl: %s failed: %s", what, ncclGetErrorString(r));
}

static int cuda_fail(struct dl_error *err, cudaError_t r, const char *what)
{
    return dl_errorf(err, DL_ERR_COMM, "nccl: %s failed: %s", what, cudaGetErrorString(r));
}

#define NCCL_CALL(call, what)                                                                  \
    do {                                                                                       \
        ncclResult_t nccl_rc_ = (call);                                                        \
        if (nccl_rc_ != ncclSuccess)                                                           \
            return nccl_fail(err, nccl_rc_, what);                                             \
    } while (0)

/* Closes an open group and waits for everything queued on the stream. */
static int nccl_sync(struct dl_comm *c, struct dl_error *err)
{
    struct nccl_state *s = st(c);
    if (s->group_open) {
        s->group_open = 0;
        NCCL_CALL(ncclGroupEnd(), "ncclGroupEnd");
    }
    cudaError_t r = cudaStreamSynchronize(s->stream);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaStreamSynchronize");
    return DL_OK;
}

static int nccl_post(struct dl_comm *c, int is_send, void *buf, size_t bytes, int peer,
                     struct dl_comm_req *req, struct dl_error *err)
{
    struct nccl_state *s = st(c);
    if (!s->group_open) {
        NCCL_CALL(ncclGroupStart(), "ncclGroupStart");
        s->group_open = 1;
    }
    if (is_send)
        NCCL_CALL(ncclSend(buf, bytes, ncclChar, peer, s->comm, s->stream), "ncclSend");
    else
        NCCL_CALL(ncclRecv(buf, bytes, ncclChar, peer, s->comm, s->stream), "ncclRecv");
    req->u.i = 1;
    req->active = 1;
    return DL_OK;
}

static int nccl_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                      struct dl_comm_req *req, struct dl_error *err)
{
    return nccl_post(c, 1, (void *)buf, bytes, peer, req, err);
}

static int nccl_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                      struct dl_comm_req *req, struct dl_error *err)
{
    return nccl_post(c, 0, buf, bytes, peer, req, err);
}

static int nccl_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    if (!req->active)
        return DL_OK;
    req->active = 0;
    return nccl_sync(c, err);
}

static int nccl_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    *done = 1;
    if (!req->active)
        return DL_OK;
    struct nccl_state *s = st(c);
    if (s->group_open) {
        s->group_open = 0;
        NCCL_CALL(ncclGroupEnd(), "ncclGroupEnd");
    }
    cudaError_t r = cudaStreamQuery(s->stream);
    if (r == cudaErrorNotReady) {
        *done = 0;
        return DL_OK;
    }
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaStreamQuery");
    req->active = 0;
    return DL_OK;
}

static int nccl_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                     struct dl_error *err)
{
    struct dl_comm_req r = {.active = 0};
    int rc = nccl_isend(c, buf, bytes, peer, tag, &r, err);
    return rc != DL_OK ? rc : nccl_wait(c, &r, err);
}

static int nccl_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                     struct dl_error *err)
{
    struct dl_comm_req r = {.active = 0};
    int rc = nccl_irecv(c, buf, bytes, peer, tag, &r, err);
    return rc != DL_OK ? rc : nccl_wait(c, &r, err);
}

/* NCCL's element type for dtype (f32 or bf16: dl_comm_sum_dtype_ok first). */
static ncclDataType_t nccl_type(enum dl_dtype dtype)
{
    return dtype == DL_BF16 ? ncclBfloat16 : ncclFloat;
}

static int nccl_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    if (rc != DL_OK)
        return rc;
    NCCL_CALL(ncclAllReduce(buf, buf, n, nccl_type(dtype), ncclSum, st(c)->comm, st(c)->stream),
              "ncclAllReduce");
    return nccl_sync(c, err);
}

/* Collectives queued after this wait for the device's mark (a CUDA event
 * recorded on the kernels' stream): the stream waits, not the host. */
static int nccl_wait_mark(struct dl_comm *c, const struct dl_device_mark *m, struct dl_error *err)
{
    cudaError_t r = m->seconds >= 0 ? cudaStreamWaitEvent(st(c)->stream, (cudaEvent_t)m->event, 0) : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaStreamWaitEvent (the NCCL stream)");
}

static int nccl_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                               struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    if (rc != DL_OK)
        return rc;
    NCCL_CALL(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, st(c)->comm,
                                st(c)->stream), "ncclReduceScatter");
    return nccl_sync(c, err);
}

static int nccl_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    if (dtype != DL_F32)
        return dl_errorf(err, DL_ERR_INTERNAL, "reduce: f32 only");
    NCCL_CALL(ncclReduce(buf, buf, n, ncclFloat, ncclSum, root, st(c)->comm, st(c)->stream), "ncclReduce");
    return nccl_sync(c, err);
}

static int nccl_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes,
                          struct dl_error *err)
{
    NCCL_CALL(ncclAllGather(send, recv, bytes, ncclChar, st(c)->comm, st(c)->stream),
              "ncclAllGather");
    return nccl_sync(c, err);
}

/* Point-to-point sends and receives in one group (NCCL has no alltoallv). */
static int nccl_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                          const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    NCCL_CALL(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < c->size; p++) {
        if (scount[p])
            NCCL_CALL(ncclSend((const char *)send + sdispl[p], scount[p], ncclChar, p, st(c)->comm, st(c)->stream),
                      "ncclSend");
        if (rcount[p])
            NCCL_CALL(ncclRecv((char *)recv + rdispl[p], rcount[p], ncclChar, p, st(c)->comm, st(c)->stream),
                      "ncclRecv");
    }
    NCCL_CALL(ncclGroupEnd(), "ncclGroupEnd");
    return nccl_sync(c, err);
}

static int nccl_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    NCCL_CALL(ncclBroadcast(buf, buf, bytes, ncclChar, root, st(c)->comm, st(c)->stream),
              "ncclBroadcast");
    return nccl_sync(c, err);
}

static int nccl_barrier(struct dl_comm *c, struct dl_error *err)
{
    int rc = nccl_sync(c, err);
    return rc != DL_OK ? rc : st(c)->boot->ops->barrier(st(c)->boot, err);
}

static void nccl_abort(struct dl_comm *c, int code)
{
    ncclCommAbort(st(c)->comm);
    st(c)->boot->ops->abort(st(c)->boot, code);
}

static void nccl_destroy(struct dl_comm *c)
{
    struct nccl_state *s = c->impl;
    if (!s)
        return;
    if (s->comm)
        ncclCommDestroy(s->comm);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    dl_comm_close(s->boot);
    free(s);
}

static int nccl_wrap(struct dl_comm *boot, ncclComm_t comm, struct dl_comm **out,
                     struct dl_error *err);

static int nccl_split(struct dl_comm *c, int color, int key, struct dl_comm **out,
                      struct dl_error *err)
{
    *out = NULL;
    struct dl_comm *boot = NULL;
    int rc = st(c)->boot->ops->split(st(c)->boot, color, key, &boot, err);
    if (rc != DL_OK)
        return rc;
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommSplit(st(c)->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                                   &nc, NULL);
    if (r != ncclSuccess) {
        dl_comm_close(boot);
        return nccl_fail(err, r, "ncclCommSplit");
    }
    if (!boot)
        return DL_OK;
    return nccl_wrap(boot, nc, out, err);
}

static const struct dl_comm_ops nccl_ops = {
    .name = "nccl",
    .device_buffers = 1,
    .split = nccl_split,
    .send = nccl_send,
    .recv = nccl_recv,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .wait = nccl_wait,
    .test = nccl_test,
    .wait_mark = nccl_wait_mark,
    .allreduce = nccl_allreduce,
    .reduce_scatter = nccl_reduce_scatter,
    .reduce = nccl_reduce,
    .allgather = nccl_allgather,
    .alltoallv = nccl_alltoallv,
    .bcast = nccl_bcast,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

/* Takes ownership of boot and comm. */
static int nccl_wrap(struct dl_comm *boot, ncclComm_t comm, struct dl_comm **out,
                     struct dl_error *err)
{
    struct nccl_state *s = dl_calloc(1, sizeof *s, err);
    struct dl_comm *c = s ? dl_comm_new(&nccl_ops, boot->rank, boot->size, err) : NULL;
    if (!c) {
        free(s);
        ncclCommDestroy(comm);
        dl_comm_close(boot);
        return DL_ERR_NOMEM;
    }
    s->comm = comm;
    s->boot = boot;
    c->impl = s;
    c->thread_level = boot->thread_level;
    cudaError_t r = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (r != cudaSuccess) {
        s->stream = NULL;
        dl_comm_close(c);
        return cuda_fail(err, r, "cudaStreamCreate");
    }
    *out = c;
    return DL_OK;
}

/* The GPU of this rank: the local rank (from the launcher) modulo the count. */
static int pick_device(struct dl_comm *boot, struct dl_error *err)
{
    int ndev = 0;
    cudaError_t r = cudaGetDeviceCount(&ndev);
    if (r != cudaSuccess || ndev == 0)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "nccl: no CUDA device (%s)",
                         r != cudaSuccess ? cudaGetErrorString(r) : "count is 0");
    int local = dl_threads_local_rank();
    int dev = (local >= 0 ? local : boot->rank) % ndev;
    r = cudaSetDevice(dev);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaSetDevice");
    return DL_OK;
}

/* The NCCL communicator of boot's ranks, bootstrapped through boot, which
 * it takes (closed with it, or on failure). */
static int open_on(struct dl_comm *boot, struct dl_comm **out, struct dl_error *err)
{
    int rc = pick_device(boot, err);
    ncclUniqueId id;
    if (rc == DL_OK && boot->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            rc = nccl_fail(err, r, "ncclGetUniqueId");
    }
    /* Every rank must reach the broadcast, or the others hang: abort instead. */
    if (rc != DL_OK && boot->size > 1)
        boot->ops->abort(boot, 1);
    if (rc == DL_OK)
        rc = boot->ops->bcast(boot, &id, sizeof id, 0, err);
    ncclComm_t comm = NULL;
    if (rc == DL_OK) {
        ncclResult_t r = ncclCommInitRank(&comm, boot->size, id, boot->rank);
        if (r != ncclSuccess)
            rc = nccl_fail(err, r, "ncclCommInitRank");
    }
    if (rc != DL_OK) {
        dl_comm_close(boot);
        return rc;
    }
    return nccl_wrap(boot, comm, out, err);
}

int dl_comm_nccl_open(int *argc, char ***argv, struct dl_comm **out, struct dl_error *err)
{
    *out = NULL;
    struct dl_comm *boot = NULL;
    int rc = dl_comm_open(dl_comm_available("mpi") ? "mpi" : "self", argc, argv, &boot, err);
    return rc != DL_OK ? rc : open_on(boot, out, err);
}

/* Over host: its ranks as a split of their own (color 0, in host's order),
 * which the NCCL communicator owns as its bootstrap. */
int dl_comm_nccl_open_over(struct dl_comm *host, struct dl_comm **out, struct dl_error *err)
{
    *out = NULL;
    struct dl_comm *boot = NULL;
    int rc = host->ops->split(host, 0, host->rank, &boot, err);
    return rc != DL_OK ? rc : open_on(boot, out, err);
}
