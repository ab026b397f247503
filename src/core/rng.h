/* rng.h: the project's only source of randomness (xoshiro256** with splitmix64
 * seeding).  Same seed, same sequence on every machine: this is what makes
 * training runs reproducible bit for bit. */
#ifndef DL_RNG_H
#define DL_RNG_H

#include <stdint.h>

struct dl_rng {
    uint64_t s[4];
};

void dl_rng_seed(struct dl_rng *r, uint64_t seed);
uint64_t dl_rng_u64(struct dl_rng *r);
/* Uniform in [0, 1) with 24 random bits (exactly representable as float). */
float dl_rng_uniform(struct dl_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t dl_rng_below(struct dl_rng *r, uint64_t n);
/* Standard normal (Box-Muller; no cached second value, so the state alone
 * determines the sequence). */
double dl_rng_normal(struct dl_rng *r);
/* Fisher-Yates shuffle of idx[0..n). */
void dl_rng_shuffle(struct dl_rng *r, int *idx, long n);

/* Counter-based draws: a pure function of (key, index), for random choices
 * that must not depend on how the work is split (dropout masks are the
 * same whatever the ranks, chunks, micro-batches or threads). */
uint64_t dl_rng_hash(uint64_t key, uint64_t index);
/* Uniform in [0, 1) with 24 random bits, from dl_rng_hash. */
float dl_rng_hash_uniform(uint64_t key, uint64_t index);

#endif
