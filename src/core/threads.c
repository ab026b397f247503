/* threads.c: applies the --threads setting to OpenMP (the project's loops
 * and oneDNN, which Debian builds on OpenMP) and to OpenBLAS's own pthread
 * pool. */
#include "core/threads.h"

#include "config.h"

#include <sched.h>
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

void dl_threads_set(int n)
{
    if (n <= 0)
        n = dl_threads_available();
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
