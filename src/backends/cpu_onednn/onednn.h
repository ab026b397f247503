/* onednn.h: the oneDNN (dnnl.h C API) kernels.  DL_ONEDNN_KERNELS_FIRST are
 * the defaults of their op kinds (registry order = preference); the Winograd
 * convolution comes first where it supports a layer (3x3, stride 1).
 * DL_ONEDNN_KERNELS_LAST come after the GEMM kernels of cpu_blas: the inner
 * product, slower than the fc on dnnl_sgemm (bench/README.md). */
#ifndef DL_BACKENDS_ONEDNN_H
#define DL_BACKENDS_ONEDNN_H

#include "backends/kernel.h"
#include "ops/kinds.h"

extern const struct dl_kernel dl_kernel_onednn_conv, dl_kernel_onednn_conv_wino, dl_kernel_onednn_maxpool,
    dl_kernel_onednn_avgpool, dl_kernel_onednn_global_avgpool, dl_kernel_onednn_batchnorm, dl_kernel_onednn_relu,
    dl_kernel_onednn_leaky_relu, dl_kernel_onednn_sigmoid, dl_kernel_onednn_tanh, dl_kernel_onednn_gelu,
    dl_kernel_onednn_add, dl_kernel_onednn_fc, dl_kernel_onednn_conv_bf16, dl_kernel_onednn_relu_bf16,
    dl_kernel_onednn_batchnorm_bf16, dl_kernel_onednn_add_bf16, dl_kernel_onednn_maxpool_bf16,
    dl_kernel_onednn_avgpool_bf16, dl_kernel_onednn_global_avgpool_bf16, dl_kernel_onednn_fc_bf16,
    dl_kernel_onednn_attention_bf16;

#define DL_ONEDNN_KERNELS_FIRST                                                                   \
    &dl_kernel_onednn_conv_bf16, &dl_kernel_onednn_relu_bf16, &dl_kernel_onednn_batchnorm_bf16, \
    &dl_kernel_onednn_add_bf16, &dl_kernel_onednn_maxpool_bf16, &dl_kernel_onednn_avgpool_bf16,  \
    &dl_kernel_onednn_global_avgpool_bf16, &dl_kernel_onednn_fc_bf16, &dl_kernel_onednn_attention_bf16, \
    &dl_kernel_onednn_conv_wino, &dl_kernel_onednn_conv, &dl_kernel_onednn_maxpool,              \
    &dl_kernel_onednn_avgpool, &dl_kernel_onednn_global_avgpool, &dl_kernel_onednn_batchnorm,    \
    &dl_kernel_onednn_relu, &dl_kernel_onednn_leaky_relu, &dl_kernel_onednn_sigmoid,             \
    &dl_kernel_onednn_tanh, &dl_kernel_onednn_gelu, &dl_kernel_onednn_add,
#define DL_ONEDNN_KERNELS_LAST &dl_kernel_onednn_fc,

#endif
