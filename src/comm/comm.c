/* comm.c: the backend registry (dl_comm_open picks mpi, nccl or self) and the
 * small helpers every algorithm shares (sendrecv, waitall, scratch space, the
 * sum of a few values).
 * This is the only file that knows which backends the build contains. */
#include "config.h"

#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*dl_comm_ctor)(int *argc, char ***argv, struct dl_comm **out,
                            struct dl_error *err);

static int self_ctor(int *argc, char ***argv, struct dl_comm **out, struct dl_error *err)
{
    (void)argc;
    (void)argv;
    return dl_comm_self_open(out, err);
}

static const struct {
    const char *name;
    dl_comm_ctor open;
    void (*library)(char *buf, size_t size); /* NULL: none */
} backends[] = {
#ifdef DL_HAVE_MPI
    {"mpi", dl_comm_mpi_open, dl_comm_mpi_library},
#endif
#ifdef DL_HAVE_CUDA
    {"nccl", dl_comm_nccl_open, dl_comm_nccl_library},
#endif
    {"self", self_ctor, NULL},
};
enum { n_backends = sizeof backends / sizeof backends[0] };

int dl_comm_open_over(const char *name, struct dl_comm *host, struct dl_comm **out, struct dl_error *err)
{
    *out = NULL;
#ifdef DL_HAVE_CUDA
    if (strcmp(name, "nccl") == 0)
        return dl_comm_nccl_open_over(host, out, err);
#endif
    (void)host;
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "no '%s' communicator over another in this build", name);
}

int dl_comm_available(const char *name)
{
    for (int i = 0; i < n_backends; i++)
        if (strcmp(backends[i].name, name) == 0)
            return 1;
    return 0;
}

void dl_comm_libraries(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n_backends && used < size; i++) {
        char lib[256] = "";
        if (backends[i].library)
            backends[i].library(lib, sizeof lib);
        used += (size_t)snprintf(buf + used, size - used, "%s%s%s%s%s", i ? ", " : "", backends[i].name,
                                 *lib ? " (" : "", lib, *lib ? ")" : "");
    }
}

const char *dl_comm_backends(void)
{
#if defined(DL_HAVE_MPI) && defined(DL_HAVE_CUDA)
    return "mpi,nccl,self";
#elif defined(DL_HAVE_MPI)
    return "mpi,self";
#elif defined(DL_HAVE_CUDA)
    return "nccl,self";
#else
    return "self";
#endif
}

int dl_comm_launched_in_parallel(void)
{
    const char *s;
    if ((s = getenv("OMPI_COMM_WORLD_SIZE")) && atoi(s) > 1)
        return 1;
    if ((s = getenv("PMI_SIZE")) && atoi(s) > 1)
        return 1;
    if (getenv("PMIX_RANK"))
        return 1;
    /* srun sets SLURM_STEP_ID for the tasks of a step; a batch script alone
     * also has SLURM_NTASKS but no step of several tasks. */
    if (getenv("SLURM_STEP_ID") && (s = getenv("SLURM_STEP_NUM_TASKS")) && atoi(s) > 1)
        return 1;
    return 0;
}

int dl_comm_open(const char *name, int *argc, char ***argv, struct dl_comm **out,
                 struct dl_error *err)
{
    *out = NULL;
    if (!name || strcmp(name, "auto") == 0) {
        const char *env = getenv("DLTRAIN_COMM");
        if (env && *env && strcmp(env, "auto") != 0)
            name = env;
        else
            name = dl_comm_launched_in_parallel() && dl_comm_available("mpi") ? "mpi" : "self";
    }
    for (int i = 0; i < n_backends; i++)
        if (strcmp(backends[i].name, name) == 0)
            return backends[i].open(argc, argv, out, err);
    if (strcmp(name, "mpi") == 0 || strcmp(name, "nccl") == 0)
        return dl_errorf(err, DL_ERR_UNSUPPORTED,
                         "communication backend '%s' is not in this build (built: %s;"
                         " reconfigure %s)", name, dl_comm_backends(),
                         strcmp(name, "mpi") == 0 ? "with Open MPI installed" : "--with-cuda");
    return dl_errorf(err, DL_ERR_SPEC,
                     "unknown communication backend '%s' (expected auto, mpi, nccl or self)",
                     name);
}

void dl_comm_close(struct dl_comm *c)
{
    if (!c)
        return;
    free(c->scratch);
    free(c->widened);
    if (c->ops->destroy)
        c->ops->destroy(c);
    free(c);
}

struct dl_comm *dl_comm_new(const struct dl_comm_ops *ops, int rank, int size,
                            struct dl_error *err)
{
    struct dl_comm *c = dl_calloc(1, sizeof *c, err);
    if (c) {
        c->ops = ops;
        c->rank = rank;
        c->size = size;
    }
    return c;
}

int dl_comm_sendrecv(struct dl_comm *c, const void *sbuf, size_t sbytes, int dst,
                     void *rbuf, size_t rbytes, int src, int tag, struct dl_error *err)
{
    struct dl_comm_req r[2] = {{.active = 0}, {.active = 0}};
    int rc = c->ops->irecv(c, rbuf, rbytes, src, tag, &r[0], err);
    if (rc == DL_OK)
        rc = c->ops->isend(c, sbuf, sbytes, dst, tag, &r[1], err);
    int rc2 = dl_comm_waitall(c, r, 2, err);
    return rc != DL_OK ? rc : rc2;
}

int dl_comm_waitall(struct dl_comm *c, struct dl_comm_req *reqs, int n, struct dl_error *err)
{
    int first = DL_OK;
    for (int i = 0; i < n; i++) {
        if (!reqs[i].active)
            continue;
        int rc = c->ops->wait(c, &reqs[i], first == DL_OK ? err : NULL);
        if (rc != DL_OK && first == DL_OK)
            first = rc;
    }
    return first;
}

void *dl_comm_grow(void **buf, size_t *cap, size_t bytes, const char *what, struct dl_error *err)
{
    if (bytes <= *cap && *buf)
        return *buf;
    free(*buf);
    *buf = NULL;
    *cap = 0;
    /* 64-byte aligned so that the reduction loops vectorise cleanly. */
    size_t rounded = (bytes + 63) / 64 * 64;
    if (posix_memalign(buf, 64, rounded ? rounded : 64) != 0) {
        *buf = NULL;
        dl_errorf(err, DL_ERR_NOMEM, "out of memory allocating %zu bytes of %s", bytes, what);
        return NULL;
    }
    *cap = rounded;
    return *buf;
}

void *dl_comm_scratch(struct dl_comm *c, size_t bytes, struct dl_error *err)
{
    return dl_comm_grow(&c->scratch, &c->scratch_bytes, bytes, "comm scratch", err);
}

int dl_comm_sum_small(struct dl_comm *c, double *v, int n, struct dl_error *err)
{
    if (n < 0 || n > DL_COMM_SMALL_SUM_MAX)
        return dl_errorf(err, DL_ERR_INTERNAL, "dl_comm_sum_small: %d values, at most %d", n, DL_COMM_SMALL_SUM_MAX);
    if (c->size == 1)
        return DL_OK;
    float staged[DL_COMM_SMALL_SUM_MAX];
    for (int i = 0; i < n; i++)
        staged[i] = (float)v[i];
    int rc = c->ops->allreduce(c, staged, DL_F32, (size_t)n, err);
    for (int i = 0; !rc && i < n; i++)
        v[i] = staged[i];
    return rc;
}
