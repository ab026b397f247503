/* blas.h: the GEMM-based kernels (fully connected, im2col convolution,
 * attention, mixture of experts, recurrent layers) on OpenBLAS or oneDNN's JIT sgemm.  DL_BLAS_KERNELS lists them
 * in preference order for the registry (measurements in bench/README.md). */
#ifndef DL_BACKENDS_BLAS_H
#define DL_BACKENDS_BLAS_H

#include "backends/kernel.h"

extern const struct dl_kernel dl_kernel_openblas_fc, dl_kernel_dnnl_gemm_fc, dl_kernel_openblas_conv,
    dl_kernel_dnnl_gemm_conv, dl_kernel_dnnl_gemm_attention, dl_kernel_dnnl_gemm_fc_rows, dl_kernel_openblas_fc_rows,
    dl_kernel_dnnl_gemm_moe, dl_kernel_dnnl_gemm_lstm, dl_kernel_dnnl_gemm_gru, dl_kernel_dnnl_gemm_rnn;

#define DL_BLAS_KERNELS                                                                          \
    &dl_kernel_dnnl_gemm_fc_rows, &dl_kernel_dnnl_gemm_fc, &dl_kernel_openblas_fc, &dl_kernel_openblas_fc_rows, \
    &dl_kernel_dnnl_gemm_conv, &dl_kernel_openblas_conv, &dl_kernel_dnnl_gemm_attention, &dl_kernel_dnnl_gemm_moe, \
    &dl_kernel_dnnl_gemm_lstm, &dl_kernel_dnnl_gemm_gru, &dl_kernel_dnnl_gemm_rnn,

#endif
