/* openblas_core.c: makes OpenBLAS run the kernels of the CPU it is on.
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels when the
 * library loads and does not know recent CPUs: on an AVX-512 Xeon such as
 * Emerald Rapids or Ice Lake it falls back to its SSE3 "Prescott" kernels,
 * about 7x slower (cblas_sgemm 4096^3 on 2 cores of an Emerald Rapids Xeon:
 * 43 GFLOP/s as a Prescott, 300 as a SkylakeX).  It honours OPENBLAS_CORETYPE, but only
 * at load time, so when the user has not set it and the detected core lacks
 * vector units this CPU has (CPUID, via __builtin_cpu_supports), the process
 * sets it and executes itself again, once (before MPI starts, with the same
 * arguments and pid).  It says nothing on a normal run: the choice and its
 * reason travel in DLTRAIN_OPENBLAS_FIXED to the new image, where
 * `dltrain --version` reports them (dl_openblas_core_describe).
 * DLTRAIN_TEST_OPENBLAS_DETECTED stands in for OpenBLAS's detection, so that
 * tests take the fix path on any CPU.  dnnl_sgemm, the default GEMM,
 * dispatches on the CPU by itself; this matters for --kernel ...=openblas and
 * the tuner. */
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
    const char *detected = getenv("DLTRAIN_TEST_OPENBLAS_DETECTED");
    if (!detected || !*detected)
        detected = openblas_get_corename();
    const char *want = dl_openblas_core_for(__builtin_cpu_supports("avx512f"), __builtin_cpu_supports("avx2"),
                                            __builtin_cpu_is("amd"), detected);
    if (!want)
        return;
    setenv("DLTRAIN_OPENBLAS_FIXED", detected, 1);
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    /* A warning to act on: the run goes on, several times slower where OpenBLAS's GEMM is used. */
    fprintf(stderr, "dltrain: warning: could not run again with OPENBLAS_CORETYPE=%s "
            "(continuing with OpenBLAS's %s kernels; set OPENBLAS_CORETYPE yourself)\n", want, detected);
    unsetenv("DLTRAIN_OPENBLAS_FIXED");
    unsetenv("OPENBLAS_CORETYPE");
#else
    (void)argv;
#endif
}

void dl_openblas_core_describe(char *buf, size_t n)
{
#ifdef DL_HAVE_OPENBLAS
    const char *core = openblas_get_corename();
    const char *fixed = getenv("DLTRAIN_OPENBLAS_FIXED");
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (fixed && set)
        snprintf(buf, n, "%s (OPENBLAS_CORETYPE=%s set by dltrain: OpenBLAS took this CPU for a %s)",
                 core, set, fixed);
    else if (set)
        snprintf(buf, n, "%s (OPENBLAS_CORETYPE=%s from the environment)", core, set);
    else
        snprintf(buf, n, "%s (detected by OpenBLAS)", core);
#else
    snprintf(buf, n, "none (built without OpenBLAS)");
#endif
}
