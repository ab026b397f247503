/* rng_hash.h: the counter-based draws of rng.h (dl_rng_hash,
 * dl_rng_hash_uniform) as inline functions, written once for the host
 * (rng.c) and for CUDA kernels compiled by nvcc (dropout's mask on a GPU),
 * so that a mask drawn on either is the same bits.  splitmix64's step is
 * also rng.c's seeding. */
#ifndef DL_CORE_RNG_HASH_H
#define DL_CORE_RNG_HASH_H

#include <stdint.h>

#include "core/host_device.h"

/* One step of splitmix64 on state *x. */
static inline DL_HOST_DEVICE uint64_t dl_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* dl_rng_hash: two rounds of splitmix64's finaliser over key and index. */
static inline DL_HOST_DEVICE uint64_t dl_rng_hash_of(uint64_t key, uint64_t index)
{
    uint64_t x = key ^ (index * 0xd1b54a32d192ed03ULL);
    (void)dl_splitmix64(&x);
    return dl_splitmix64(&x);
}

/* dl_rng_hash_uniform: its top 24 bits as a float in [0, 1). */
static inline DL_HOST_DEVICE float dl_rng_hash_uniform_of(uint64_t key, uint64_t index)
{
    return (float)(dl_rng_hash_of(key, index) >> 40) * (1.0f / 16777216.0f);
}

#endif
