/* codec_qsgd.c: QSGD (Alistarh et al., NeurIPS 2017) with buckets.  Each
 * bucket of 512 elements is sent as its norm plus, per element, a sign and a
 * level l in 0..s (s = 2^(bits-1)-1) chosen by stochastic rounding of
 * s|v_i|/norm, so that the decoded value norm sign(v_i) l/s equals v_i in
 * expectation.  The norm is the bucket's largest magnitude (the max-norm):
 * as unbiased as the 2-norm, with far less variance at few bits.  Layout:
 * one float norm per bucket, then `bits`-bit codes (sign in the top bit). */
#include <math.h>
#include <string.h>

#include "comm/codec.h"

#define QSGD_BUCKET 512

static size_t nbuckets(size_t n)
{
    return (n + QSGD_BUCKET - 1) / QSGD_BUCKET;
}

static size_t bytes_qsgd(const struct dl_codec_spec *s, size_t n)
{
    return nbuckets(n) * dl_dtype_size(DL_F32) + (n * (size_t)s->bits + 7) / 8;
}

static void encode_qsgd(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    unsigned char *codes = (unsigned char *)out + nbuckets(n) * dl_dtype_size(DL_F32);
    uint32_t levels = (1u << (s->bits - 1)) - 1, sign = 1u << (s->bits - 1);
    for (size_t b = 0; b * QSGD_BUCKET < n; b++) {
        size_t lo = b * QSGD_BUCKET, hi = lo + QSGD_BUCKET < n ? lo + QSGD_BUCKET : n;
        float norm = 0;
        for (size_t i = lo; i < hi; i++)
            norm = fabsf(v[i]) > norm ? fabsf(v[i]) : norm;
        memcpy((float *)out + b, &norm, sizeof norm);
        for (size_t i = lo; i < hi; i++) {
            double x = norm > 0 ? fabs((double)v[i]) / norm * levels : 0;
            double l = floor(x);
            uint32_t q = (uint32_t)l + (dl_rng_uniform(rng) < x - l);
            if (q > levels)
                q = levels;
            dl_bits_put(codes, i, s->bits, q | (v[i] < 0 ? sign : 0));
        }
    }
}

static void decode_add_qsgd(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    const unsigned char *codes = (const unsigned char *)in + nbuckets(n) * dl_dtype_size(DL_F32);
    uint32_t levels = (1u << (s->bits - 1)) - 1, sign = 1u << (s->bits - 1);
    for (size_t b = 0; b * QSGD_BUCKET < n; b++) {
        size_t lo = b * QSGD_BUCKET, hi = lo + QSGD_BUCKET < n ? lo + QSGD_BUCKET : n;
        float norm;
        memcpy(&norm, (const float *)in + b, sizeof norm);
        float unit = norm / (float)levels;
        for (size_t i = lo; i < hi; i++) {
            uint32_t q = dl_bits_get(codes, i, s->bits);
            float mag = unit * (float)(q & ~sign);
            out[i] += q & sign ? -mag : mag;
        }
    }
}

const struct dl_codec_ops dl_codec_qsgd = {
    .name = "qsgd",
    .encoded_bytes = bytes_qsgd,
    .encode = encode_qsgd,
    .decode_add = decode_add_qsgd,
};
