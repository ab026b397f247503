/* openblas_core.c: makes OpenBLAS run the kernels of the CPU it is on.
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels when the
 * library loads and does not know recent CPUs: on an AVX-512 Xeon such as
 * Emerald Rapids it falls back to its SSE3 "Prescott" kernels, about 7x
 * slower (/work/shared/MEASUREMENTS.md).  It honours OPENBLAS_CORETYPE, but
 * only at load time, so when the user has not set it and the detected core
 * lacks vector units this CPU has (CPUID, via __builtin_cpu_supports), the
 * process sets it and executes itself again, once (before MPI starts, with
 * the same arguments and pid).  dnnl_sgemm, the default GEMM, dispatches on
 * the CPU by itself; this matters for --kernel ...=openblas and the tuner. */
#include "backends/cpu_blas/openblas_core.h"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef DL_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* OpenBLAS core names with AVX-512 and with (at least) AVX2 kernels. */
static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
static const char *const avx2_cores[] = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake",
                                         "SapphireRapids", NULL};

static int listed(const char *name, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (strcasecmp(name, list[i]) == 0)
            return 1;
    return 0;
}

const char *dl_openblas_core_for(int avx512f, int avx2, int amd, const char *detected)
{
    if (!detected || strcmp(detected, "none") == 0)
        return NULL;
    if (avx512f && !listed(detected, avx512_cores))
        return "SkylakeX";
    if (avx2 && !listed(detected, avx2_cores))
        return amd ? "Zen" : "Haswell";
    return NULL;
}

void dl_openblas_core_fix(char **argv)
{
#if defined(DL_HAVE_OPENBLAS) && (defined(__x86_64__) || defined(__i386__))
    if (getenv("OPENBLAS_CORETYPE") || getenv("DLTRAIN_OPENBLAS_CHECKED"))
        return;
    setenv("DLTRAIN_OPENBLAS_CHECKED", "1", 1); /* never twice, whatever happens below */
    __builtin_cpu_init();
    const char *detected = openblas_get_corename();
    const char *want = dl_openblas_core_for(__builtin_cpu_supports("avx512f"), __builtin_cpu_supports("avx2"),
                                            __builtin_cpu_is("amd"), detected);
    if (!want)
        return;
    fprintf(stderr, "dltrain: OpenBLAS took this CPU for a %s; running again with OPENBLAS_CORETYPE=%s\n",
            detected, want);
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "dltrain: could not run again (continuing with OpenBLAS's %s kernels)\n", detected);
#else
    (void)argv;
#endif
}
