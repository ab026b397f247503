/* gemm.h: row-major single-precision GEMM on a chosen library, C =
 * alpha*op(A)*op(B) + beta*C.  OpenBLAS (fast only when it recognises the
 * CPU: see dl_gemm_openblas_core) or oneDNN's dnnl_sgemm, which JIT-dispatches
 * on the CPU it runs on. */
#ifndef DL_BACKENDS_GEMM_H
#define DL_BACKENDS_GEMM_H

enum dl_gemm_lib { DL_GEMM_OPENBLAS, DL_GEMM_DNNL };

void dl_sgemm(enum dl_gemm_lib lib, int trans_a, int trans_b, long M, long N, long K, float alpha, const float *A,
              long lda, const float *B, long ldb, float beta, float *C, long ldc);

/* Measured GFLOP/s of an n x n x n sgemm on lib (median of reps runs). */
double dl_gemm_gflops(enum dl_gemm_lib lib, int n, int reps);

/* OpenBLAS's name for the core it runs on ("SkylakeX", "Prescott", ...), or
 * "none" when the build has no OpenBLAS. */
const char *dl_gemm_openblas_core(void);

#endif
