/* permutation.c: a permutation computed position by position (see
 * permutation.h). */
#include "data/permutation.h"

#include "core/rng.h"

void dl_permutation_init(struct dl_permutation *p, uint64_t n, uint64_t seed)
{
    p->n = n;
    p->half_bits = 1;
    while (p->half_bits < 32 && (1ULL << (2 * p->half_bits)) < n)
        p->half_bits++;
    for (int r = 0; r < 4; r++)
        p->key[r] = dl_rng_hash(seed, (uint64_t)r);
}

/* One pass of the network: a bijection of [0, 2^(2 half_bits)). */
static uint64_t feistel(const struct dl_permutation *p, uint64_t x)
{
    uint64_t mask = (1ULL << p->half_bits) - 1, left = x >> p->half_bits, right = x & mask;
    for (int r = 0; r < 4; r++) {
        uint64_t next = left ^ (dl_rng_hash(p->key[r], right) & mask);
        left = right;
        right = next;
    }
    return left << p->half_bits | right;
}

uint64_t dl_permutation_at(const struct dl_permutation *p, uint64_t i)
{
    uint64_t x = feistel(p, i);
    while (x >= p->n) /* cycle walking: the next element of x's cycle until one is below n */
        x = feistel(p, x);
    return x;
}
