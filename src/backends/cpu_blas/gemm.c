/* gemm.c: the GEMM dispatch of the BLAS kernels (see gemm.h). */
#include "backends/cpu_blas/gemm.h"

#include "config.h"

#include <dnnl.h>
#ifdef DL_HAVE_OPENBLAS
#include <cblas.h>
#endif

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
