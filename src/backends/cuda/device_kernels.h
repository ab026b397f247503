/* cuda/device_kernels.h: the CUDA device's own arithmetic (device.h's
 * accumulate, scale and cast) in f32 and bf16, behind plain C functions so that
 * device.c needs no CUDA compiler.  Each returns the launch's cudaError_t
 * as an int (0 when queued). */
#ifndef DL_BACKENDS_CUDA_DEVICE_KERNELS_H
#define DL_BACKENDS_CUDA_DEVICE_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* dst += src element by element: n floats (bf16 = 0) or n bf16 values
 * (bf16 = 1, each sum taken in f32 and rounded once as the host does). */
int dl_cuda_accumulate(void *dst, const void *src, long n, int bf16);
/* x *= f element by element, in f32 or bf16 (the product rounded once). */
int dl_cuda_scale(void *x, long n, float f, int bf16);
/* n values of src (core/dtype.h's enum dl_dtype from) into dst (dtype to),
 * or added into dst when add (the sum in f32, rounded once), as dl_cast
 * and dl_cast_add do on the host: f32 <-> bf16, i32 -> f32 or bf16, any
 * dtype to itself.  Returns -1 for a pair they lack, else the launch's
 * error (0 when queued). */
int dl_cuda_cast(void *dst, int to, const void *src, int from, long n, int add);

#ifdef __cplusplus
}
#endif

#endif
