/* cuda/launch.h: what the .cu files of the sequence kernels share (nvcc
 * only): the block size of a grid of one thread per element, the blocks
 * that cover n elements, a launch's error as the int their plain C
 * functions return (0 when it was queued), and a block's sum or maximum
 * over its threads, in a fixed order (so the same inputs give the same
 * bits on every run). */
#ifndef DL_BACKENDS_CUDA_LAUNCH_H
#define DL_BACKENDS_CUDA_LAUNCH_H

#include <cuda_runtime.h>

#define DL_CUDA_THREADS 256

/* Blocks of DL_CUDA_THREADS threads covering n elements. */
static inline unsigned dl_cuda_blocks(long n)
{
    return (unsigned)((n + DL_CUDA_THREADS - 1) / DL_CUDA_THREADS);
}

/* The last launch's error (0 when it was queued). */
static inline int dl_cuda_launched(void)
{
    return (int)cudaGetLastError();
}

/* The sum (most = false) or the maximum (most = true) of every thread's v
 * over the block, to every thread: a tree over scratch[blockDim.x] (shared
 * memory), blockDim.x a power of two.  Every thread of the block calls it. */
template <bool most, typename T> static __device__ T dl_cuda_block_reduce(T v, T *scratch)
{
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            T a = scratch[threadIdx.x], b = scratch[threadIdx.x + half];
            scratch[threadIdx.x] = most ? (b > a ? b : a) : a + b;
        }
        __syncthreads();
    }
    T all = scratch[0];
    __syncthreads(); /* scratch free again for the next call */
    return all;
}

#endif
