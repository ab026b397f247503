/* cuda/gemm.h: cuBLAS's matrix products in the dtypes of the GPU's
 * kernels (fc.c, attention.c), with a failure recorded in the call's
 * fault (fault.h).  A and B share one dtype (cuBLAS takes two operands of
 * one type), f32 or bf16; C is f32 or bf16; the compute type is FP32
 * either way.  All-f32 products are cublasSgemm and
 * cublasSgemmStridedBatched, what the f32 kernels always called; the
 * others cublasGemmEx and cublasGemmStridedBatchedEx with
 * CUBLAS_COMPUTE_32F (a product of two bf16 values is exact in f32, the
 * sums are f32, and a bf16 C is rounded once from them; tensor cores may
 * run them, which round nothing more for bf16 operands). */
#ifndef DL_BACKENDS_CUDA_GEMM_H
#define DL_BACKENDS_CUDA_GEMM_H

#include <cublas_v2.h>

#include "backends/kernel.h"

/* One product, or a strided batch of them, in cuBLAS's column-major terms:
 * C = alpha op(A) op(B) + beta C with op(A) m x k, op(B) k x n, C m x n.
 * The fields up to ldc are in cuBLAS's argument order, so that an
 * initializer reads as the call. */
struct dl_gemm {
    cublasOperation_t ta, tb;
    int m, n, k;
    float alpha;
    const void *A;
    int lda;
    const void *B;
    int ldb;
    float beta;
    void *C;
    int ldc;
    enum dl_dtype ab;                  /* A's and B's dtype */
    enum dl_dtype c;                   /* C's dtype */
    int batch;                         /* 0 or 1: one product; more: a strided batch */
    long stride_a, stride_b, stride_c; /* values between a batch's consecutive operands */
};

/* Runs g on h for kernel `kernel`; 1, or 0 with the failure recorded. */
int dl_cublas_gemm(cublasHandle_t h, const struct dl_kernel_args *a, const char *kernel, const struct dl_gemm *g);

#endif
