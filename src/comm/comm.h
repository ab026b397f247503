/* comm.h: the communication interface.  A backend (mpi, nccl, self) fills a
 * table of function pointers; everything above it (collective algorithms,
 * gradient codecs, the parallel planner) calls only these functions, so no
 * caller ever #ifdefs on a backend.  Byte-moving calls take void buffers;
 * the reductions (allreduce, reduce_scatter) sum values of a dtype (f32 or
 * bf16; bf16 summed in f32, widen.c). */
#ifndef DL_COMM_H
#define DL_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/error.h"

struct dl_comm;
struct dl_device_mark; /* backends/device.h */

/* A non-blocking operation in flight.  Caller-owned storage (no allocation per
 * message); its contents belong to the backend until wait/test completes it. */
struct dl_comm_req {
    union {
        void *ptr;
        long long i;
        unsigned char bytes[16];
    } u;
    int active; /* 1 between isend/irecv and completion */
};

struct dl_comm_ops {
    const char *name;
    /* 1: every buffer of these calls is GPU device memory (nccl); 0: host
     * memory (mpi, self).  Callers holding device memory stage it through
     * the host for a communicator of host memory (parallel/grad_sync.c). */
    int device_buffers;
    /* New communicator of the ranks that passed the same color, ordered by
     * key (ties by old rank).  color < 0: this rank joins none (*out = NULL). */
    int (*split)(struct dl_comm *c, int color, int key, struct dl_comm **out,
                 struct dl_error *err);
    /* Point to point; messages between one pair with one tag arrive in order. */
    int (*send)(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                struct dl_error *err);
    int (*recv)(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                struct dl_error *err);
    int (*isend)(struct dl_comm *c, const void *buf, size_t bytes, int peer, int tag,
                 struct dl_comm_req *req, struct dl_error *err);
    int (*irecv)(struct dl_comm *c, void *buf, size_t bytes, int peer, int tag,
                 struct dl_comm_req *req, struct dl_error *err);
    int (*wait)(struct dl_comm *c, struct dl_comm_req *req, struct dl_error *err);
    /* *done = 1 (and req completed) or 0 (still in flight). */
    int (*test)(struct dl_comm *c, struct dl_comm_req *req, int *done, struct dl_error *err);
    /* Native collectives.  allreduce: in-place sum of n values of dtype.
     * reduce_scatter: sum of size*count values of send, this rank's block of
     * count values into recv.  dtype f32 or bf16 (others: DL_ERR_INTERNAL);
     * bf16 values are summed in f32: on host backends the f32 sum rounded
     * once (dl_comm_sum_as_f32), on NCCL rounded at each hop of its ring.
     * allgather: bytes from each rank, rank order.  bcast: bytes from root.
     * reduce: the sum of n values of dtype (f32) into root's buf, in place
     * (the others' buf unchanged). */
    int (*allreduce)(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err);
    /* A communicator of device buffers: the collectives queued after this
     * call wait until device mark m (recorded by the device's mark_record
     * behind the kernels that wrote their buffers) is reached, without the
     * host waiting for the device (NCCL: cudaStreamWaitEvent on its own
     * stream).  NULL: callers wait for the device (its sync) first. */
    int (*wait_mark)(struct dl_comm *c, const struct dl_device_mark *m, struct dl_error *err);
    int (*reduce_scatter)(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                          struct dl_error *err);
    int (*allgather)(struct dl_comm *c, const void *send, void *recv, size_t bytes,
                     struct dl_error *err);
    int (*bcast)(struct dl_comm *c, void *buf, size_t bytes, int root, struct dl_error *err);
    int (*reduce)(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, int root, struct dl_error *err);
    /* All-to-all of uneven parts (a mixture of experts' tokens to their
     * experts' ranks and back): the scount[p] bytes at send + sdispl[p] go
     * to rank p, the rcount[p] bytes from rank p land at recv + rdispl[p]
     * (counts and offsets in bytes, one of each a rank; any may be 0; what
     * p sends this rank must be what this rank expects of p). */
    int (*alltoallv)(struct dl_comm *c, const void *send, const size_t *scount, const size_t *sdispl, void *recv,
                     const size_t *rcount, const size_t *rdispl, struct dl_error *err);
    int (*barrier)(struct dl_comm *c, struct dl_error *err);
    /* Ends every process of the job (for fatal errors on one rank). */
    void (*abort)(struct dl_comm *c, int code);
    /* Frees the backend part of c (and finalizes the runtime for the world). */
    void (*destroy)(struct dl_comm *c);
};

struct dl_comm {
    const struct dl_comm_ops *ops;
    int rank;
    int size;
    void *impl;          /* backend state */
    int thread_level;    /* 0 single, 1 funneled, 2 serialized, 3 multiple (granted) */
    void *scratch;       /* reusable work space for the algorithms (dl_comm_scratch) */
    size_t scratch_bytes;
    void *widened;       /* bf16 sums' f32 copies (widen.c) */
    size_t widened_bytes;
};

/* Opens the world communicator of backend name: "auto", "mpi", "nccl" or
 * "self".  auto = mpi when this build has MPI and the process was started by
 * mpirun or srun with more than one task (or DLTRAIN_COMM names one), else
 * self.  argc/argv may be NULL. */
int dl_comm_open(const char *name, int *argc, char ***argv, struct dl_comm **out,
                 struct dl_error *err);
/* A communicator of backend name with the ranks of host, in host's order,
 * set up through host (which it does not own; close it before host): for
 * a backend whose buffers are device memory next to one of host memory
 * ("nccl" in a --with-cuda build).  DL_ERR_UNSUPPORTED when this build
 * has no such backend. */
int dl_comm_open_over(const char *name, struct dl_comm *host, struct dl_comm **out, struct dl_error *err);
/* Frees c (world or split); NULL is fine.  Close split communicators first. */
void dl_comm_close(struct dl_comm *c);
/* Most values dl_comm_sum_small sums in one call. */
#define DL_COMM_SMALL_SUM_MAX 8
/* Sums v[0..n) over the ranks with the backend's allreduce, through float:
 * exact for counts below 2^24 (step metrics, evaluation sums).  Nothing
 * happens on one rank.  More than DL_COMM_SMALL_SUM_MAX values is
 * DL_ERR_INTERNAL. */
int dl_comm_sum_small(struct dl_comm *c, double *v, int n, struct dl_error *err);

/* 1 when a parallel launcher (mpirun, srun, Hydra) started this process
 * as one of several, from its environment. */
int dl_comm_launched_in_parallel(void);

/* 1 when this build contains backend name. */
int dl_comm_available(const char *name);
/* "mpi (Open MPI v4.1.4), self": the backends this build contains and
 * the libraries behind them, for --version. */
void dl_comm_libraries(char *buf, size_t size);
/* Comma-separated list of the backends this build contains. */
const char *dl_comm_backends(void);

/* Helpers built on the table. */
/* Sends sbytes to dst while receiving rbytes from src (no deadlock). */
int dl_comm_sendrecv(struct dl_comm *c, const void *sbuf, size_t sbytes, int dst,
                     void *rbuf, size_t rbytes, int src, int tag, struct dl_error *err);
/* Waits for reqs[0..n) (inactive ones are skipped). */
int dl_comm_waitall(struct dl_comm *c, struct dl_comm_req *reqs, int n, struct dl_error *err);
/* Work space of at least bytes owned by c, valid until the next call or close. */
void *dl_comm_scratch(struct dl_comm *c, size_t bytes, struct dl_error *err);
/* *buf grown to at least bytes (64-byte aligned; *cap its size), what of
 * `what` to name in the out-of-memory message; NULL on failure. */
void *dl_comm_grow(void **buf, size_t *cap, size_t bytes, const char *what, struct dl_error *err);

/* widen.c: sums of bf16 values through an f32 sum.  An f32 sum of n floats
 * in place (ctx: the caller's). */
typedef int (*dl_comm_f32_sum)(struct dl_comm *c, float *buf, size_t n, void *ctx, struct dl_error *err);
/* Sums n values of dtype at buf over the ranks with sum: f32 as they are;
 * bf16 widened (exactly) into f32 in c's widened buffer, summed there and
 * rounded once back to bf16 (to nearest even), so that the result is the
 * f32 sum rounded once whatever the algorithm.  Other dtypes are
 * DL_ERR_INTERNAL. */
int dl_comm_sum_as_f32(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, dl_comm_f32_sum sum, void *ctx,
                       struct dl_error *err);
/* An f32 reduce-scatter (comm_ops' contract with floats). */
typedef int (*dl_comm_f32_scatter)(struct dl_comm *c, const float *send, float *recv, size_t count,
                                   struct dl_error *err);
/* reduce_scatter of dtype through an f32 one, as dl_comm_sum_as_f32. */
int dl_comm_scatter_as_f32(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                           dl_comm_f32_scatter scatter, struct dl_error *err);
/* DL_OK for the dtypes the reductions sum (f32, bf16), else DL_ERR_INTERNAL. */
int dl_comm_sum_dtype_ok(enum dl_dtype dtype, struct dl_error *err);
/* Allocates and zeroes a struct dl_comm for a backend constructor. */
struct dl_comm *dl_comm_new(const struct dl_comm_ops *ops, int rank, int size,
                            struct dl_error *err);

/* Backend constructors, called by dl_comm_open (not by users). */
int dl_comm_self_open(struct dl_comm **out, struct dl_error *err);
int dl_comm_mpi_open(int *argc, char ***argv, struct dl_comm **out, struct dl_error *err);
/* The library behind a backend, for --version ("Open MPI v4.1.4", "NCCL 2.21.5"). */
void dl_comm_mpi_library(char *buf, size_t size);
void dl_comm_nccl_library(char *buf, size_t size);
int dl_comm_nccl_open(int *argc, char ***argv, struct dl_comm **out, struct dl_error *err);
int dl_comm_nccl_open_over(struct dl_comm *host, struct dl_comm **out, struct dl_error *err);
/* Rank `rank` of a group of `size` with no peers (comm/standin.c): for
 * timing one rank's compute; collectives act as if every rank held this
 * rank's values, and nothing moves. */
int dl_comm_standin_open(int rank, int size, struct dl_comm **out, struct dl_error *err);

#endif
