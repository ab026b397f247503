/* gemm.c: the GEMM dispatch of the BLAS kernels (see gemm.h). */
#include "backends/cpu_blas/gemm.h"

#include "config.h"

#include <dnnl.h>
#include <stdlib.h>
#ifdef DL_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "core/clock.h"

void dl_sgemm(enum dl_gemm_lib lib, int trans_a, int trans_b, long M, long N, long K, float alpha, const float *A,
              long lda, const float *B, long ldb, float beta, float *C, long ldc)
{
#ifdef DL_HAVE_OPENBLAS
    if (lib == DL_GEMM_OPENBLAS) {
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C,
                    (blasint)ldc);
        return;
    }
#endif
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *dl_gemm_openblas_core(void)
{
#ifdef DL_HAVE_OPENBLAS
    return openblas_get_corename();
#else
    return "none";
#endif
}

double dl_gemm_gflops(enum dl_gemm_lib lib, int n, int reps)
{
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    double t[16], best = 0;
    if (a && b && c && reps > 0) {
        for (size_t i = 0; i < nn; i++)
            a[i] = b[i] = (float)(i % 7) * 0.25f;
        reps = reps > 16 ? 16 : reps;
        dl_sgemm(lib, 0, 0, n, n, n, 1, a, n, b, n, 0, c, n); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = dl_clock_now();
            dl_sgemm(lib, 0, 0, n, n, n, 1, a, n, b, n, 0, c, n);
            t[r] = dl_clock_now() - t0;
        }
        best = 2.0 * n * (double)n * n / dl_median(t, reps) / 1e9;
    }
    free(a);
    free(b);
    free(c);
    return best;
}
