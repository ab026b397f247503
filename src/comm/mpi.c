/* mpi.c: the Open MPI backend (started by mpirun or by Slurm's srun).
 * Initialises MPI with MPI_THREAD_MULTIPLE when the library grants it (else
 * what it grants, at least FUNNELED) and records the level in the handle;
 * errors come back as return codes (MPI_ERRORS_RETURN), never as aborts. */
#include "comm/comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

_Static_assert(sizeof(MPI_Request) <= sizeof(((struct dl_comm_req *)0)->u),
               "MPI_Request must fit into struct dl_comm_req");

struct mpi_state {
    MPI_Comm comm;
    int finalize; /* this handle initialised MPI and finalizes it on close */
};

static MPI_Comm comm_of(struct dl_comm *c)
{
    return ((struct mpi_state *)c->impl)->comm;
}

static int fail(struct dl_error *err, int mpi_rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    return dl_errorf(err, DL_ERR_COMM, "mpi: %s failed: %s", what, msg);
}

/* MPI counts are int: larger messages are refused rather than truncated. */
static int count_of(size_t n, int *out, struct dl_error *err)
{
    if (n > INT_MAX)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "mpi: message of %zu elements exceeds INT_MAX",
                         n);
    *out = (int)n;
    return DL_OK;
}

#define MPI_CALL(call, what)                                                                   \
    do {                                                                                       \
        int mpi_rc_ = (call);                                                                  \
        if (mpi_rc_ != MPI_SUCCESS)                                                            \
            return fail(err, mpi_rc_, what);                                                   \
    } while (0)

static int mpi_send(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                    struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_CALL(MPI_Send(buf, n, MPI_BYTE, peer, tag, comm_of(c)), "MPI_Send");
    return DL_OK;
}

static int mpi_recv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                    struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_CALL(MPI_Recv(buf, n, MPI_BYTE, peer, tag, comm_of(c), MPI_STATUS_IGNORE), "MPI_Recv");
    return DL_OK;
}

static int mpi_isend(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                     struct dl_comm_req *req, struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_Request r;
    MPI_CALL(MPI_Isend(buf, n, MPI_BYTE, peer, tag, comm_of(c), &r), "MPI_Isend");
    memcpy(&req->u, &r, sizeof r);
    req->active = 1;
    return DL_OK;
}

static int mpi_irecv(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                     struct dl_comm_req *req, struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_Request r;
    MPI_CALL(MPI_Irecv(buf, n, MPI_BYTE, peer, tag, comm_of(c), &r), "MPI_Irecv");
    memcpy(&req->u, &r, sizeof r);
    req->active = 1;
    return DL_OK;
}

static int mpi_wait(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err)
{
    if (!req->active)
        return DL_OK;
    MPI_Request r;
    memcpy(&r, &req->u, sizeof r);
    req->active = 0;
    MPI_CALL(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
    return DL_OK;
}

static int mpi_test(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err)
{
    *done = 1;
    if (!req->active)
        return DL_OK;
    MPI_Request r;
    memcpy(&r, &req->u, sizeof r);
    MPI_CALL(MPI_Test(&r, done, MPI_STATUS_IGNORE), "MPI_Test");
    memcpy(&req->u, &r, sizeof r);
    if (*done)
        req->active = 0;
    return DL_OK;
}

/* MPI_Allreduce in pieces of at most INT_MAX floats. */
static int mpi_allreduce_f32(struct dl_comm *c, float *buf, size_t n, void *ctx, struct dl_error *err)
{
    (void)ctx;
    while (n > 0) {
        int m = n > INT_MAX ? INT_MAX : (int)n;
        MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, comm_of(c)),
                 "MPI_Allreduce");
        buf += m;
        n -= (size_t)m;
    }
    return DL_OK;
}

static int mpi_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    return dl_comm_sum_as_f32(c, buf, dtype, n, mpi_allreduce_f32, NULL, err);
}

/* MPI_Reduce into root's buffer in place, in pieces of at most INT_MAX floats. */
static int mpi_reduce_f32(struct dl_comm *c, float *buf, size_t n, void *ctx, struct dl_error *err)
{
    int root = *(const int *)ctx;
    while (n > 0) {
        int m = n > INT_MAX ? INT_MAX : (int)n;
        MPI_CALL(MPI_Reduce(c->rank == root ? MPI_IN_PLACE : buf, buf, m, MPI_FLOAT, MPI_SUM, root, comm_of(c)),
                 "MPI_Reduce");
        buf += m;
        n -= (size_t)m;
    }
    return DL_OK;
}

static int mpi_reduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err)
{
    if (dtype != DL_F32)
        return dl_errorf(err, DL_ERR_INTERNAL, "reduce: f32 only");
    return mpi_reduce_f32(c, buf, n, &root, err);
}

static int mpi_reduce_scatter_f32(struct dl_comm *c, const float *send, float *recv, size_t count,
                                  struct dl_error *err)
{
    int n = 0, rc = count_of(count, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_CALL(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm_of(c)),
             "MPI_Reduce_scatter_block");
    return DL_OK;
}

static int mpi_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                              struct dl_error *err)
{
    return dl_comm_scatter_as_f32(c, send, recv, dtype, count, mpi_reduce_scatter_f32, err);
}

static int mpi_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes,
                         struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_CALL(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_of(c)), "MPI_Allgather");
    return DL_OK;
}

static int mpi_alltoallv(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                         const size_t *rcount, const size_t *rdispl, struct dl_error *err)
{
    int p = c->size, rc = DL_OK;
    int *v = calloc(4 * (size_t)p, sizeof *v);
    if (!v)
        return dl_errorf(err, DL_ERR_NOMEM, "mpi: out of memory for an all-to-all of %d ranks", p);
    for (int r = 0; !rc && r < p; r++) {
        rc = count_of(scount[r], &v[r], err);
        if (!rc)
            rc = count_of(sdispl[r], &v[p + r], err);
        if (!rc)
            rc = count_of(rcount[r], &v[2 * p + r], err);
        if (!rc)
            rc = count_of(rdispl[r], &v[3 * p + r], err);
    }
    int code = rc ? MPI_SUCCESS
                  : MPI_Alltoallv(send, v, v + p, MPI_BYTE, recv, v + 2 * p, v + 3 * p, MPI_BYTE, comm_of(c));
    free(v);
    if (rc)
        return rc;
    MPI_CALL(code, "MPI_Alltoallv");
    return DL_OK;
}

static int mpi_bcast(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err)
{
    int n = 0, rc = count_of(bytes, &n, err);
    if (rc != DL_OK)
        return rc;
    MPI_CALL(MPI_Bcast(buf, n, MPI_BYTE, root, comm_of(c)), "MPI_Bcast");
    return DL_OK;
}

static int mpi_barrier(struct dl_comm *c, struct dl_error *err)
{
    MPI_CALL(MPI_Barrier(comm_of(c)), "MPI_Barrier");
    return DL_OK;
}

void dl_comm_mpi_library(char *buf, size_t size)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) /* callable before MPI_Init */
        len = 0;
    v[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    size_t n = strcspn(v, ",\n"); /* "Open MPI v4.1.4, package: ..." -> its first part */
    while (n > 0 && v[n - 1] == ' ')
        n--;
    snprintf(buf, size, "%.*s", (int)n, v);
}

static void mpi_abort(struct dl_comm *c, int code)
{
    MPI_Abort(comm_of(c), code ? code : 1);
}

static void mpi_destroy(struct dl_comm *c)
{
    struct mpi_state *s = c->impl;
    if (!s)
        return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        MPI_Comm_free(&s->comm);
        if (s->finalize)
            MPI_Finalize();
    }
    free(s);
}

static int wrap(MPI_Comm comm, int finalize, int thread_level, struct dl_comm **out,
                struct dl_error *err);

static int mpi_split(struct dl_comm *c, int color, int key, struct dl_comm **out,
                     struct dl_error *err)
{
    *out = NULL;
    MPI_Comm nc;
    MPI_CALL(MPI_Comm_split(comm_of(c), color < 0 ? MPI_UNDEFINED : color, key, &nc),
             "MPI_Comm_split");
    if (nc == MPI_COMM_NULL)
        return DL_OK;
    return wrap(nc, 0, c->thread_level, out, err);
}

static const struct dl_comm_ops mpi_ops = {
    .name = "mpi",
    .split = mpi_split,
    .send = mpi_send,
    .recv = mpi_recv,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .wait = mpi_wait,
    .test = mpi_test,
    .allreduce = mpi_allreduce,
    .reduce_scatter = mpi_reduce_scatter,
    .reduce = mpi_reduce,
    .allgather = mpi_allgather,
    .alltoallv = mpi_alltoallv,
    .bcast = mpi_bcast,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

/* Wraps comm (owned from now on) into a dl_comm. */
static int wrap(MPI_Comm comm, int finalize, int thread_level, struct dl_comm **out,
                struct dl_error *err)
{
    int rank, size;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    struct mpi_state *s = dl_calloc(1, sizeof *s, err);
    struct dl_comm *c = s ? dl_comm_new(&mpi_ops, rank, size, err) : NULL;
    if (!c) {
        free(s);
        MPI_Comm_free(&comm);
        return DL_ERR_NOMEM;
    }
    s->comm = comm;
    s->finalize = finalize;
    c->impl = s;
    c->thread_level = thread_level;
    *out = c;
    return DL_OK;
}

static int level_index(int mpi_level)
{
    if (mpi_level == MPI_THREAD_MULTIPLE)
        return 3;
    if (mpi_level == MPI_THREAD_SERIALIZED)
        return 2;
    if (mpi_level == MPI_THREAD_FUNNELED)
        return 1;
    return 0;
}

int dl_comm_mpi_open(int *argc, char ***argv, struct dl_comm **out, struct dl_error *err)
{
    *out = NULL;
    int inited = 0, provided = MPI_THREAD_SINGLE, finalize = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return dl_errorf(err, DL_ERR_COMM, "mpi: MPI_Init_thread failed (code %d)", rc);
        finalize = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    MPI_Comm world;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
    if (rc != MPI_SUCCESS)
        return fail(err, rc, "MPI_Comm_dup");
    return wrap(world, finalize, level_index(provided), out, err);
}
