/* permutation.h: a seeded permutation of [0, n) computed one position at a
 * time, in constant memory: a 4-round Feistel network on the smallest
 * square power of two above n (its halves mixed by core/rng.h's hash of
 * the seed's round keys), walked until it lands below n (fewer than 4
 * steps on average).  The batcher's order for datasets too large for an
 * array of their indices (a corpus of a billion tokens has 15 million
 * windows of 64): the same order on any number of ranks, and any position
 * of an epoch found at once when a run resumes. */
#ifndef DL_DATA_PERMUTATION_H
#define DL_DATA_PERMUTATION_H

#include <stdint.h>

struct dl_permutation {
    uint64_t n;
    int half_bits;       /* the Feistel network's domain: 2^(2 half_bits) >= n */
    uint64_t key[4];     /* round keys */
};

void dl_permutation_init(struct dl_permutation *p, uint64_t n, uint64_t seed);

/* The element at position i of the permutation (i < n). */
uint64_t dl_permutation_at(const struct dl_permutation *p, uint64_t i);

#endif
