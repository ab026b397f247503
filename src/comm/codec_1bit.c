/* codec_1bit.c: 1-bit SGD (Seide et al., Interspeech 2014).  Each element is
 * sent as its sign; the receiver puts back the mean of the positive elements
 * where the bit is 1 and the mean of the others where it is 0.  As in the
 * paper (which keeps one pair of means per matrix column), the means are kept
 * per group of DL_1BIT_GROUP consecutive elements: one pair for a whole
 * gradient bucket mixes layers whose scales differ by orders of magnitude,
 * and training with it diverged.  Layout: ceil(n/G) pairs of floats (mean of
 * positives, mean of the rest), then one bit per element. */
#include <string.h>

#include "comm/codec.h"

#define DL_1BIT_GROUP 512

static size_t groups(size_t n)
{
    return (n + DL_1BIT_GROUP - 1) / DL_1BIT_GROUP;
}

static size_t bytes_1bit(const struct dl_codec_spec *s, size_t n)
{
    return groups(n) * 2 * sizeof(float) + (n + 7) / 8;
}

static void encode_1bit(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    float *means = out;
    unsigned char *bits = (unsigned char *)out + groups(n) * 2 * sizeof(float);
    memset(bits, 0, (n + 7) / 8);
    for (size_t g = 0; g < groups(n); g++) {
        size_t lo = g * DL_1BIT_GROUP, hi = lo + DL_1BIT_GROUP < n ? lo + DL_1BIT_GROUP : n;
        double pos = 0, neg = 0;
        size_t npos = 0;
        for (size_t i = lo; i < hi; i++) {
            if (v[i] > 0) {
                bits[i / 8] |= (unsigned char)(1u << (i % 8));
                pos += v[i];
                npos++;
            } else {
                neg += v[i];
            }
        }
        float m[2] = {npos ? (float)(pos / (double)npos) : 0.0f,
                      hi - lo > npos ? (float)(neg / (double)(hi - lo - npos)) : 0.0f};
        memcpy(means + 2 * g, m, sizeof m);
    }
}

static void decode_add_1bit(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    const float *means = in;
    const unsigned char *bits = (const unsigned char *)in + groups(n) * 2 * sizeof(float);
    for (size_t i = 0; i < n; i++) {
        float m[2];
        memcpy(m, means + 2 * (i / DL_1BIT_GROUP), sizeof m);
        out[i] += bits[i / 8] >> (i % 8) & 1u ? m[0] : m[1];
    }
}

const struct dl_codec_ops dl_codec_1bit = {
    .name = "1bit",
    .encoded_bytes = bytes_1bit,
    .encode = encode_1bit,
    .decode_add = decode_add_1bit,
};
