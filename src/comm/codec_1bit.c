/* codec_1bit.c: 1-bit SGD (Seide et al., Interspeech 2014).  Each element is
 * sent as its sign; the receiver puts back the mean of the positive elements
 * where the bit is 1 and the mean of the others where it is 0.  Layout: two
 * floats (mean of positives, mean of the rest), then one bit per element. */
#include <string.h>

#include "comm/codec.h"

static size_t bytes_1bit(const struct dl_codec_spec *s, size_t n)
{
    return 2 * sizeof(float) + (n + 7) / 8;
}

static void encode_1bit(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    unsigned char *bits = (unsigned char *)out + 2 * sizeof(float);
    double pos = 0, neg = 0;
    size_t npos = 0;
    memset(bits, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++) {
        if (v[i] > 0) {
            bits[i / 8] |= (unsigned char)(1u << (i % 8));
            pos += v[i];
            npos++;
        } else {
            neg += v[i];
        }
    }
    float means[2] = {npos ? (float)(pos / (double)npos) : 0.0f,
                      n > npos ? (float)(neg / (double)(n - npos)) : 0.0f};
    memcpy(out, means, sizeof means);
}

static void decode_add_1bit(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    float means[2];
    memcpy(means, in, sizeof means);
    const unsigned char *bits = (const unsigned char *)in + sizeof means;
    for (size_t i = 0; i < n; i++)
        out[i] += bits[i / 8] >> (i % 8) & 1u ? means[0] : means[1];
}

const struct dl_codec_ops dl_codec_1bit = {
    .name = "1bit",
    .encoded_bytes = bytes_1bit,
    .encode = encode_1bit,
    .decode_add = decode_add_1bit,
};
