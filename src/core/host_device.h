/* host_device.h: DL_HOST_DEVICE marks an inline function written once for
 * the host and for CUDA kernels: __host__ __device__ under nvcc, nothing
 * for the C compiler (core/rng_hash.h, optim/update_rules.h). */
#ifndef DL_CORE_HOST_DEVICE_H
#define DL_CORE_HOST_DEVICE_H

#ifdef __CUDACC__
#define DL_HOST_DEVICE __host__ __device__
#else
#define DL_HOST_DEVICE
#endif

#endif
