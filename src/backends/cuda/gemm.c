/* cuda/gemm.c: cuBLAS's products in f32 and bf16 (gemm.h). */
#include "backends/cuda/gemm.h"

#include "backends/cuda/fault.h"

static cudaDataType cuda_type(enum dl_dtype dt)
{
    return dt == DL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

int dl_cublas_gemm(cublasHandle_t h, const struct dl_kernel_args *a, const char *kernel, const struct dl_gemm *g)
{
    const float *alpha = &g->alpha, *beta = &g->beta;
    if (g->ab == DL_F32 && g->c == DL_F32) {
        if (g->batch <= 1)
            return dl_cublas_ok(a, kernel,
                                cublasSgemm(h, g->ta, g->tb, g->m, g->n, g->k, alpha, g->A, g->lda, g->B, g->ldb, beta,
                                            g->C, g->ldc),
                                "cublasSgemm");
        return dl_cublas_ok(a, kernel,
                            cublasSgemmStridedBatched(h, g->ta, g->tb, g->m, g->n, g->k, alpha, g->A, g->lda,
                                                      g->stride_a, g->B, g->ldb, g->stride_b, beta, g->C, g->ldc,
                                                      g->stride_c, g->batch),
                            "cublasSgemmStridedBatched");
    }
    cudaDataType ab = cuda_type(g->ab), c = cuda_type(g->c);
    if (g->batch <= 1)
        return dl_cublas_ok(a, kernel,
                            cublasGemmEx(h, g->ta, g->tb, g->m, g->n, g->k, alpha, g->A, ab, g->lda, g->B, ab, g->ldb,
                                         beta, g->C, c, g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                            "cublasGemmEx");
    return dl_cublas_ok(a, kernel,
                        cublasGemmStridedBatchedEx(h, g->ta, g->tb, g->m, g->n, g->k, alpha, g->A, ab, g->lda,
                                                   g->stride_a, g->B, ab, g->ldb, g->stride_b, beta, g->C, c, g->ldc,
                                                   g->stride_c, g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "cublasGemmStridedBatchedEx");
}
