/* codec_qsgd.c: QSGD (Alistarh et al., NeurIPS 2017).  v is sent as its
 * 2-norm plus, per element, a sign and a level l in 0..s (s = 2^(bits-1)-1)
 * chosen by stochastic rounding of s|v_i|/|v|, so that the decoded value
 * |v| sign(v_i) l/s equals v_i in expectation.  Layout: the norm (float),
 * then `bits`-bit codes (sign in the top bit). */
#include <math.h>
#include <string.h>

#include "comm/codec.h"

static size_t bytes_qsgd(const struct dl_codec_spec *s, size_t n)
{
    return sizeof(float) + (n * (size_t)s->bits + 7) / 8;
}

static void encode_qsgd(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    double sq = 0;
    for (size_t i = 0; i < n; i++)
        sq += (double)v[i] * v[i];
    float norm = (float)sqrt(sq);
    memcpy(out, &norm, sizeof norm);
    unsigned char *codes = (unsigned char *)out + sizeof norm;
    uint32_t levels = (1u << (s->bits - 1)) - 1, sign = 1u << (s->bits - 1);
    for (size_t i = 0; i < n; i++) {
        double x = norm > 0 ? fabs((double)v[i]) / norm * levels : 0;
        double l = floor(x);
        uint32_t q = (uint32_t)l + (dl_rng_uniform(rng) < x - l);
        if (q > levels)
            q = levels;
        dl_bits_put(codes, i, s->bits, q | (v[i] < 0 ? sign : 0));
    }
}

static void decode_add_qsgd(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    float norm;
    memcpy(&norm, in, sizeof norm);
    const unsigned char *codes = (const unsigned char *)in + sizeof norm;
    uint32_t levels = (1u << (s->bits - 1)) - 1, sign = 1u << (s->bits - 1);
    float unit = norm / (float)levels;
    for (size_t i = 0; i < n; i++) {
        uint32_t q = dl_bits_get(codes, i, s->bits);
        float mag = unit * (float)(q & ~sign);
        out[i] += q & sign ? -mag : mag;
    }
}

const struct dl_codec_ops dl_codec_qsgd = {
    .name = "qsgd",
    .encoded_bytes = bytes_qsgd,
    .encode = encode_qsgd,
    .decode_add = decode_add_qsgd,
};
