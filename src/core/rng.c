/* rng.c: xoshiro256** (Blackman and Vigna) seeded through splitmix64. */
#include "core/rng.h"

#include <math.h>

#include "core/rng_hash.h"

void dl_rng_seed(struct dl_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = dl_splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t dl_rng_u64(struct dl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float dl_rng_uniform(struct dl_rng *r)
{
    return (float)(dl_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

uint64_t dl_rng_below(struct dl_rng *r, uint64_t n)
{
    /* Rejection sampling: discard the top partial range. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = dl_rng_u64(r);
    while (x >= limit);
    return x % n;
}

double dl_rng_normal(struct dl_rng *r)
{
    /* u1 in (0, 1] so that log(u1) is finite. */
    double u1 = ((dl_rng_u64(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
    double u2 = (dl_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void dl_rng_shuffle(struct dl_rng *r, int *idx, long n)
{
    for (long i = n - 1; i > 0; i--) {
        long j = (long)dl_rng_below(r, (uint64_t)i + 1);
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

uint64_t dl_rng_hash(uint64_t key, uint64_t index)
{
    return dl_rng_hash_of(key, index);
}

float dl_rng_hash_uniform(uint64_t key, uint64_t index)
{
    return dl_rng_hash_uniform_of(key, index);
}
