/* codec_1bit.c: 1-bit SGD (Seide et al., Interspeech 2014).  Each element is
 * sent as its sign; the receiver puts back the mean of the positive elements
 * where the bit is 1 and the mean of the others where it is 0.  As in the
 * paper (which keeps one pair of means per matrix column), the means are kept
 * per small group of elements: one pair for a whole bucket mixes layers whose
 * scales differ by orders of magnitude.  Smaller groups train better: LeNet-5
 * on 4 ranks, 3 epochs, ended at 86.9% with groups of 128 (bfloat16 means)
 * and at 88.3% with the scheme below, uncompressed 89.2%.  A pair of bfloat16
 * means per group of 32 would cost another bit per element, so each mean is
 * a 4-bit code on a log scale: magnitude ref * 2^(-c/2) for c = 0..14
 * (half-octave steps, at most 19% off), 15 for zero, where ref is one
 * bfloat16 per super-group of 1024 elements (its largest mean).  Error
 * feedback (codec.c) absorbs the rounding.
 * Layout for n elements: ceil(n/1024) bfloat16 refs, then ceil(n/32) bytes
 * (low nibble: code of the positive mean, high nibble: of the other mean's
 * magnitude), then one bit per element: 1/8 + 1/32 + 2/1024 bytes per
 * element, 1/25.3 of fp32. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "comm/codec.h"

#define GROUP 32          /* elements per pair of means */
#define SUPER 1024        /* elements per bfloat16 reference (a multiple of GROUP) */
#define STEPS_PER_OCTAVE 2
#define ZERO_CODE 15u     /* 4-bit codes: 0..14 are levels, 15 is zero */

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static size_t bytes_1bit(const struct dl_codec_spec *s, size_t n)
{
    return ceil_div(n, SUPER) * sizeof(uint16_t) + ceil_div(n, GROUP) + ceil_div(n, 8);
}

/* float -> bfloat16 (the upper half of the IEEE bits), rounding to nearest even. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + (u >> 16 & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float level(float ref, unsigned c)
{
    return c >= ZERO_CODE ? 0.0f : ref * exp2f(-(float)c / (float)STEPS_PER_OCTAVE);
}

/* The code of magnitude m >= 0 under ref: the nearest level, or zero when m is
 * closer to 0 than to the smallest level. */
static unsigned code(float ref, float m)
{
    if (!(m > 0) || !(ref > 0))
        return ZERO_CODE;
    float c = roundf(-log2f(m / ref) * (float)STEPS_PER_OCTAVE);
    if (c < 0)
        c = 0;
    if (c >= (float)ZERO_CODE) {
        float lowest = level(ref, ZERO_CODE - 1);
        return m > lowest / 2 ? ZERO_CODE - 1 : ZERO_CODE;
    }
    return (unsigned)c;
}

/* One group of m <= GROUP values: their sign bits (a byte per 8 values, the
 * first value in bit 0), the sum of the positive ones, the magnitude of the
 * sum of the others, and how many are positive.  Arithmetic instead of
 * branches on the sign (a coin toss on gradients), so that it vectorizes. */
static void group_sums(const float *v, size_t m, unsigned char *bits, float *pos, float *neg, size_t *npos)
{
    float p = 0, all = 0;
    unsigned count = 0;
    #pragma omp simd reduction(+ : p, all, count)
    for (size_t i = 0; i < m; i++) {
        p += fmaxf(v[i], 0.0f);
        all += v[i];
        count += v[i] > 0.0f;
    }
    for (size_t i = 0; i < m; i += 8) {
        unsigned byte = 0;
        for (size_t j = 0; j < 8 && i + j < m; j++)
            byte |= (unsigned)(v[i + j] > 0.0f) << j;
        bits[i / 8] = (unsigned char)byte;
    }
    *pos = p;
    *neg = p - all;
    *npos = count;
}

static void encode_1bit(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    unsigned char *refs = out;
    unsigned char *codes = refs + ceil_div(n, SUPER) * sizeof(uint16_t);
    unsigned char *bits = codes + ceil_div(n, GROUP);
    float mean[2 * (SUPER / GROUP)];
    for (size_t lo = 0; lo < n; lo += SUPER) {
        size_t hi = lo + SUPER < n ? lo + SUPER : n, ng = ceil_div(hi - lo, GROUP);
        float top = 0, pos, neg;
        size_t npos;
        for (size_t g = 0; g < ng; g++) {
            size_t a = lo + g * GROUP, b = a + GROUP < hi ? a + GROUP : hi;
            group_sums(v + a, b - a, bits + a / 8, &pos, &neg, &npos);
            mean[2 * g] = npos ? pos / (float)npos : 0.0f;
            mean[2 * g + 1] = b - a > npos ? neg / (float)(b - a - npos) : 0.0f;
            top = fmaxf(top, fmaxf(mean[2 * g], mean[2 * g + 1]));
        }
        uint16_t r = to_bf16(top);
        memcpy(refs + lo / SUPER * sizeof r, &r, sizeof r);
        float ref = from_bf16(r);
        for (size_t g = 0; g < ng; g++)
            codes[lo / GROUP + g] =
                (unsigned char)(code(ref, mean[2 * g]) | code(ref, mean[2 * g + 1]) << 4);
    }
}

static void decode_add_1bit(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    const unsigned char *refs = in;
    const unsigned char *codes = refs + ceil_div(n, SUPER) * sizeof(uint16_t);
    const unsigned char *bits = codes + ceil_div(n, GROUP);
    for (size_t lo = 0; lo < n; lo += SUPER) {
        uint16_t r;
        memcpy(&r, refs + lo / SUPER * sizeof r, sizeof r);
        float ref = from_bf16(r);
        size_t hi = lo + SUPER < n ? lo + SUPER : n;
        for (size_t a = lo; a < hi; a += GROUP) {
            unsigned char c = codes[a / GROUP];
            float pos = level(ref, c & 15u), neg = -level(ref, c >> 4), step = pos - neg;
            size_t b = a + GROUP < hi ? a + GROUP : hi;
            /* neg + bit * (pos - neg): no branch, and a byte's 8 values at once */
            for (size_t i = a; i < b; i += 8) {
                unsigned byte = bits[i / 8];
                if (b - i >= 8)
                    for (size_t j = 0; j < 8; j++)
                        out[i + j] += neg + (float)(byte >> j & 1u) * step;
                else
                    for (size_t j = 0; j < b - i; j++)
                        out[i + j] += neg + (float)(byte >> j & 1u) * step;
            }
        }
    }
}

const struct dl_codec_ops dl_codec_1bit = {
    .name = "1bit",
    .encoded_bytes = bytes_1bit,
    .encode = encode_1bit,
    .decode_add = decode_add_1bit,
};
