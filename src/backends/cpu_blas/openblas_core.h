/* openblas_core.h: choosing OpenBLAS's kernels from CPUID when its own
 * detection falls short (see openblas_core.c). */
#ifndef DL_BACKENDS_OPENBLAS_CORE_H
#define DL_BACKENDS_OPENBLAS_CORE_H

#include <stddef.h>

/* The OPENBLAS_CORETYPE to use on a CPU with these features when OpenBLAS
 * detected `detected`, or NULL when its choice already uses them. */
const char *dl_openblas_core_for(int avx512f, int avx2, int amd, const char *detected);

/* Call first thing in main(): when OPENBLAS_CORETYPE is unset and OpenBLAS
 * misdetected this CPU, sets it and re-executes the program with argv. */
void dl_openblas_core_fix(char **argv);

/* The core OpenBLAS runs and why, e.g. "SkylakeX (OPENBLAS_CORETYPE=SkylakeX
 * set by dltrain: OpenBLAS took this CPU for a Prescott)", for --version. */
void dl_openblas_core_describe(char *buf, size_t n);

#endif
