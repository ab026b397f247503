/* threads.c: applies the --threads setting to OpenMP (the project's loops
 * and oneDNN, which Debian builds on OpenMP) and to OpenBLAS's own pthread
 * pool. */
#include "core/threads.h"

#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef DL_HAVE_OPENBLAS
#include <cblas.h>
#endif

static int current = 1; /* set once at start-up by the CLI */

int dl_threads_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return 1;
}

int dl_threads_node_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n <= 1 << 20 ? (int)n : dl_threads_available();
}

/* Processes of this job on this node, from the launcher's environment
 * (Open MPI's mpirun, MPICH's Hydra, Slurm's srun); 1 when none says. */
int dl_threads_local_ranks(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "SLURM_STEP_TASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        /* Slurm writes "4" or "4(x3)" or "4,2": this node's count leads only in the
         * first form, and the others are heterogeneous jobs; take the first number. */
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n > 0 && n <= 1 << 20)
            return (int)n;
    }
    return 1;
}

int dl_threads_local_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : -1;
        if (v && end != v && *end == '\0' && n >= 0 && n < 1 << 20)
            return (int)n;
    }
    return -1;
}

int dl_threads_default(void)
{
    int cpus = dl_threads_available(), ranks = dl_threads_local_ranks();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    /* A launcher that binds each rank to its own cores leaves it fewer CPUs
     * than the node has: they are its own.  One that does not (mpirun
     * --oversubscribe, or --bind-to none) leaves every rank all of them. */
    if (ranks <= 1 || cpus < online)
        return cpus;
    return cpus > ranks ? cpus / ranks : 1;
}

void dl_threads_set(int n)
{
    if (n <= 0)
        n = dl_threads_default();
    current = n;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef DL_HAVE_OPENBLAS
    openblas_set_num_threads(n);
#endif
}

int dl_threads_get(void)
{
    return current;
}
