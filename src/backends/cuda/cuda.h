/* cuda/cuda.h: the CUDA backend's entry points that the rest of the
 * program reaches through tables (device.h's dl_device_open, the kernel
 * registry); outside src/backends/ only optim/cuda/ (the optimizers' loops
 * on the GPU) includes it, and only builds --with-cuda compile the files
 * that define them. */
#ifndef DL_BACKENDS_CUDA_H
#define DL_BACKENDS_CUDA_H

#include "backends/device.h"
#include "backends/kernel.h"

/* The CUDA device of device.h. */
extern const struct dl_device dl_device_cuda;

/* Kernels (one file per op family), all with device DL_DEVICE_CUDA; the
 * registry lists DL_CUDA_KERNELS first (kernel choice only takes them for
 * an executor on the GPU).  Creation reports cuDNN's, cuBLAS's and CUDA's
 * errors; a failed launch or library call inside forward or backward is
 * recorded in the call's fault (kernel.h's dl_kernel_fail, through
 * cuda/fault.h), which the executor, the tuner and the kernel tests turn
 * into an error naming the layer and the call.  Launches are asynchronous:
 * a fault found only when the GPU runs the work surfaces at the next
 * synchronising copy or device sync, not in the call.  The convolution comes as one kernel per rank
 * in cuDNN's algorithm ranking (conv.c), cuDNN's first choice first.  A
 * transformer's layers (GPT-2's) have theirs too: layer norm, GELU, the
 * token and position embeddings, attention, fc and the loss at every
 * position of a sequence.  In bf16 (kernel.h "Dtypes", --precision bf16):
 * the convolution (again one kernel per rank), fc and attention. */
extern const struct dl_kernel dl_kernel_cudnn_conv, dl_kernel_cudnn_conv_r2, dl_kernel_cudnn_conv_r3,
    dl_kernel_cudnn_conv_r4, dl_kernel_cudnn_conv_r5, dl_kernel_cudnn_conv_r6, dl_kernel_cudnn_conv_r7,
    dl_kernel_cudnn_conv_r8;
extern const struct dl_kernel dl_kernel_cudnn_conv_bf16, dl_kernel_cudnn_conv_bf16_r2, dl_kernel_cudnn_conv_bf16_r3,
    dl_kernel_cudnn_conv_bf16_r4, dl_kernel_cudnn_conv_bf16_r5, dl_kernel_cudnn_conv_bf16_r6,
    dl_kernel_cudnn_conv_bf16_r7, dl_kernel_cudnn_conv_bf16_r8;
extern const struct dl_kernel dl_kernel_cublas_fc, dl_kernel_cudnn_relu,
    dl_kernel_cudnn_sigmoid, dl_kernel_cudnn_tanh, dl_kernel_cudnn_maxpool, dl_kernel_cudnn_avgpool,
    dl_kernel_cudnn_global_avgpool, dl_kernel_cudnn_batchnorm, dl_kernel_cuda_softmax_xent,
    dl_kernel_cuda_leaky_relu, dl_kernel_cuda_dropout, dl_kernel_cuda_flatten, dl_kernel_cudnn_add,
    dl_kernel_cuda_concat, dl_kernel_cuda_layernorm, dl_kernel_cuda_gelu, dl_kernel_cuda_embedding,
    dl_kernel_cuda_position_embedding, dl_kernel_cublas_attention;
extern const struct dl_kernel dl_kernel_cublas_fc_bf16, dl_kernel_cublas_attention_bf16;
#define DL_CUDA_KERNELS                                                                          \
    &dl_kernel_cudnn_conv, &dl_kernel_cudnn_conv_r2, &dl_kernel_cudnn_conv_r3, &dl_kernel_cudnn_conv_r4,    \
    &dl_kernel_cudnn_conv_r5, &dl_kernel_cudnn_conv_r6, &dl_kernel_cudnn_conv_r7, &dl_kernel_cudnn_conv_r8,    \
    &dl_kernel_cudnn_conv_bf16, &dl_kernel_cudnn_conv_bf16_r2, &dl_kernel_cudnn_conv_bf16_r3, \
    &dl_kernel_cudnn_conv_bf16_r4, &dl_kernel_cudnn_conv_bf16_r5, &dl_kernel_cudnn_conv_bf16_r6, \
    &dl_kernel_cudnn_conv_bf16_r7, &dl_kernel_cudnn_conv_bf16_r8, \
    &dl_kernel_cublas_fc, &dl_kernel_cublas_fc_bf16, &dl_kernel_cudnn_relu, &dl_kernel_cudnn_sigmoid,   \
    &dl_kernel_cudnn_tanh, &dl_kernel_cudnn_maxpool, &dl_kernel_cudnn_avgpool, &dl_kernel_cudnn_global_avgpool, \
    &dl_kernel_cudnn_batchnorm, &dl_kernel_cuda_softmax_xent, &dl_kernel_cuda_leaky_relu, &dl_kernel_cuda_dropout, \
    &dl_kernel_cuda_flatten, \
    &dl_kernel_cudnn_add, &dl_kernel_cuda_concat, &dl_kernel_cuda_layernorm, &dl_kernel_cuda_gelu, \
    &dl_kernel_cuda_embedding, &dl_kernel_cuda_position_embedding, &dl_kernel_cublas_attention, \
    &dl_kernel_cublas_attention_bf16,

/* GPUs on this node into *count; DL_ERR_SPEC with a message saying whether
 * the driver is missing, too old for this build, or finds no device. */
int dl_cuda_device_count(int *count, struct dl_error *err);

/* What cudaGetDeviceCount's status (a cudaError_t), the driver version
 * (cudaDriverGetVersion: 0 without a driver) and the count found mean:
 * DL_OK with at least one GPU, else DL_ERR_SPEC saying "no CUDA driver",
 * that the driver cannot run this build, or "no CUDA device". */
int dl_cuda_count_verdict(int status, int driver, int count, struct dl_error *err);

/* dl_device_open() for CUDA: checks driver and devices, makes GPU
 * local_rank modulo the count current, and names it (with the cuDNN
 * version) for describe(). */
int dl_cuda_device_open(int local_rank, const struct dl_device **out, struct dl_error *err);

/* "CUDA runtime X.Y, cuDNN X.Y.Z, cuBLAS X.Y.Z (driver: X.Y or none)": the
 * libraries linked, asked without a GPU (backends/device.h). */
void dl_cuda_libraries(char *buf, size_t size);

#endif
