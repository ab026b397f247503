/* test_codec.c: the gradient codecs on their own and through the compressed
 * allreduce on the self backend: --compress parsing, bit packing, QSGD is
 * unbiased (statistically), 1-bit sends at most 1/25 of the fp32 bytes and
 * its error feedback keeps the running sum on track, top-k keeps exactly the
 * largest magnitudes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/comm.h"
#include "core/rng.h"

static void parse_accepts_and_rejects(void **state)
{
    (void)state;
    struct dl_codec_spec s;
    struct dl_error err;
    assert_int_equal(dl_codec_parse("none", &s, &err), DL_OK);
    assert_null(s.ops);
    assert_int_equal(dl_codec_parse("1bit", &s, &err), DL_OK);
    assert_ptr_equal(s.ops, &dl_codec_1bit);
    assert_int_equal(dl_codec_parse("qsgd:4", &s, &err), DL_OK);
    assert_int_equal(s.bits, 4);
    assert_int_equal(dl_codec_parse("topk:0.01", &s, &err), DL_OK);
    assert_true(fabs(s.fraction - 0.01) < 1e-12);
    assert_int_equal(dl_codec_parse("topk:5%", &s, &err), DL_OK);
    assert_true(fabs(s.fraction - 0.05) < 1e-12);
    const char *bad[] = {"", "2bit", "qsgd", "qsgd:", "qsgd:1", "qsgd:17", "qsgd:4x",
                         "topk:0", "topk:1.5", "topk:-0.1", "topk:abc", "topk:", "none:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.msg[0] = 0;
        assert_int_equal(dl_codec_parse(bad[i], &s, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, bad[i])); /* the message quotes the input */
    }
    assert_non_null(strstr(err.msg, "expected"));
}

static void bits_round_trip(void **state)
{
    (void)state;
    unsigned char buf[64];
    memset(buf, 0xa5, sizeof buf);
    for (int bits = 1; bits <= 16; bits++) {
        for (size_t i = 0; i < 24; i++)
            dl_bits_put(buf, i, bits, (uint32_t)(i * 2654435761u) & ((1u << bits) - 1));
        for (size_t i = 0; i < 24; i++)
            assert_int_equal(dl_bits_get(buf, i, bits),
                             (uint32_t)(i * 2654435761u) & ((1u << bits) - 1));
    }
}

/* E[decode(encode(v))] = v: the mean of many independent quantisations is
 * within 5 standard errors of v for every element, and the rounding is
 * really random (single draws differ from v). */
static void qsgd_is_unbiased(void **state)
{
    (void)state;
    enum { N = 700, TRIALS = 3000 };
    struct dl_codec_spec s;
    assert_int_equal(dl_codec_parse("qsgd:3", &s, NULL), DL_OK);
    struct dl_rng r;
    dl_rng_seed(&r, 5);
    float v[N], dec[N];
    double mean[N] = {0};
    for (int i = 0; i < N; i++)
        v[i] = (float)dl_rng_normal(&r);
    size_t bytes = s.ops->encoded_bytes(&s, N);
    unsigned char *enc = malloc(bytes);
    int differs = 0;
    for (int t = 0; t < TRIALS; t++) {
        memset(dec, 0, sizeof dec);
        s.ops->encode(&s, v, N, enc, &r);
        s.ops->decode_add(&s, enc, N, dec);
        for (int i = 0; i < N; i++) {
            mean[i] += dec[i];
            differs += dec[i] != v[i];
        }
    }
    /* the largest level is 3, the unit norm/3; rounding noise <= unit/2 */
    float norm[2] = {0, 0};
    for (int i = 0; i < N; i++)
        norm[i / 512] = fabsf(v[i]) > norm[i / 512] ? fabsf(v[i]) : norm[i / 512];
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double se = norm[i / 512] / 3 / 2 / sqrt((double)TRIALS);
        double z = fabs(mean[i] / TRIALS - v[i]) / se;
        worst = z > worst ? z : worst;
    }
    assert_true(worst < 5.0);
    assert_true(differs > TRIALS * N / 2);
    free(enc);
}

static void onebit_sends_under_a_25th(void **state)
{
    (void)state;
    struct dl_codec_spec s;
    assert_int_equal(dl_codec_parse("1bit", &s, NULL), DL_OK);
    for (size_t n = 1000; n <= 1000000; n *= 10)
        assert_true(s.ops->encoded_bytes(&s, n) * 25 <= n * sizeof(float));
    /* decoding puts back the two means of each group of 32, each rounded to
     * the nearest half octave below the super-group's largest mean (here 100):
     * at most 2^(1/4) - 1 < 19% off, and exact on those levels (50 = 100/2) */
    float v[200], dec[200] = {0}, want[200];
    for (int i = 0; i < 200; i++)
        v[i] = i < 128 ? (float[]){3, -1, 5, -3, 0, 1, 1, -4}[i % 8] : (float)(i % 2 ? 100 : -50);
    unsigned char enc[64];
    assert_true(s.ops->encoded_bytes(&s, 200) <= sizeof enc);
    s.ops->encode(&s, v, 200, enc, NULL);
    s.ops->decode_add(&s, enc, 200, dec);
    for (int i = 0; i < 200; i++)
        want[i] = i < 128 ? (v[i] > 0 ? 2.5f : -2.0f) : (v[i] > 0 ? 100.0f : -50.0f);
    for (int i = 0; i < 200; i++) {
        assert_true(fabsf(dec[i] - want[i]) <= fabsf(want[i]) * 0.19f);
        if (i >= 128)
            assert_true(fabsf(dec[i] - want[i]) <= fabsf(want[i]) / 256);
    }
    /* a mean far below the largest one (2^-20 of it) decodes as zero */
    float w[64] = {0}, wdec[64] = {0};
    for (int i = 0; i < 64; i++)
        w[i] = i < 32 ? (i % 2 ? 1.0f : -1.0f) : (i % 2 ? 1e-6f : -1e-6f);
    s.ops->encode(&s, w, 64, enc, NULL);
    s.ops->decode_add(&s, enc, 64, wdec);
    for (int i = 0; i < 64; i++)
        assert_true(i < 32 ? fabsf(wdec[i] - w[i]) <= 1.0f / 256 : wdec[i] == 0.0f);
}

/* Error feedback: what one step leaves out is sent later, so the sum of the
 * outputs over T steps stays within a bounded distance of the sum of the
 * inputs (it does not drift with T), while a step alone is far off. */
static void error_feedback_tracks_the_sum(void **state)
{
    (void)state;
    enum { N = 257, T = 400 };
    const char *codecs[] = {"1bit", "qsgd:2", "topk:0.05"};
    struct dl_comm *self;
    struct dl_error err;
    assert_int_equal(dl_comm_open("self", NULL, NULL, &self, &err), DL_OK);
    for (size_t k = 0; k < 3; k++) {
        struct dl_codec_spec s;
        struct dl_codec_state *st;
        assert_int_equal(dl_codec_parse(codecs[k], &s, &err), DL_OK);
        assert_int_equal(dl_codec_state_create(&s, N, 9, &st, &err), DL_OK);
        struct dl_rng r;
        dl_rng_seed(&r, 11 + k);
        double in_sum[N] = {0}, out_sum[N] = {0}, drift50 = 0;
        float g[N];
        for (int t = 0; t < T; t++) {
            for (int i = 0; i < N; i++) {
                g[i] = (float)(dl_rng_normal(&r) + 0.3 * sin(i));
                in_sum[i] += g[i];
            }
            assert_int_equal(dl_compressed_allreduce(self, st, g, N, NULL, &err), DL_OK);
            for (int i = 0; i < N; i++)
                out_sum[i] += g[i];
            double drift = 0;
            for (int i = 0; i < N; i++)
                drift = fmax(drift, fabs(out_sum[i] - in_sum[i]));
            if (t == 49)
                drift50 = drift;
            if (t == T - 1) {
                /* bounded: no worse after 400 steps than after 50 (without
                 * feedback the error is a random walk, sqrt(8) times larger) */
                printf("# %s: drift %.3g after %d steps, %.3g after 50\n", codecs[k], drift, T,
                       drift50);
                assert_true(drift < 2 * drift50 + 2.0);
            }
        }
        /* and the running mean converges to the mean input */
        double worst = 0;
        for (int i = 0; i < N; i++)
            worst = fmax(worst, fabs(out_sum[i] - in_sum[i]) / T);
        assert_true(worst < 0.05);
        dl_codec_state_free(st);
    }
    dl_comm_close(self);
}

static void topk_keeps_the_largest(void **state)
{
    (void)state;
    enum { N = 1000 };
    float v[N], work[N];
    uint32_t idx[N];
    struct dl_rng r;
    dl_rng_seed(&r, 3);
    for (int i = 0; i < N; i++)
        v[i] = (float)dl_rng_normal(&r);
    v[17] = 0.0f;
    v[500] = 100.0f, v[501] = -100.0f; /* a tie in magnitude */
    for (size_t k = 1; k <= N; k = k * 3 + 1) {
        dl_topk_select(v, N, k, idx, work);
        float smallest_kept = INFINITY;
        char kept[N] = {0};
        for (size_t j = 0; j < k; j++) {
            if (j)
                assert_true(idx[j] > idx[j - 1]); /* ascending, no repeats */
            assert_true(idx[j] < N);
            kept[idx[j]] = 1;
            smallest_kept = fminf(smallest_kept, fabsf(v[idx[j]]));
        }
        for (int i = 0; i < N; i++)
            if (!kept[i])
                assert_true(fabsf(v[i]) <= smallest_kept);
    }
    dl_topk_select(v, N, 1, idx, work);
    assert_int_equal(idx[0], 500); /* ties: lower index first */
    dl_topk_select(v, N, 2, idx, work);
    assert_int_equal(idx[0], 500);
    assert_int_equal(idx[1], 501);
    struct dl_codec_spec s;
    assert_int_equal(dl_codec_parse("topk:0.001", &s, NULL), DL_OK);
    assert_int_equal(dl_topk_count(&s, N), 1);
    assert_int_equal(dl_topk_count(&s, 0), 0);
    assert_int_equal(dl_codec_parse("topk:0.5", &s, NULL), DL_OK);
    assert_int_equal(dl_topk_count(&s, 7), 4);
}

/* On one rank top-k returns the kept elements and zeros elsewhere; the
 * residual is exactly what was dropped. */
static void topk_allreduce_on_one_rank(void **state)
{
    (void)state;
    enum { N = 10 };
    struct dl_comm *self;
    struct dl_error err;
    struct dl_codec_spec s;
    struct dl_codec_state *st;
    struct dl_codec_stats stats;
    assert_int_equal(dl_comm_open("self", NULL, NULL, &self, &err), DL_OK);
    assert_int_equal(dl_codec_parse("topk:0.3", &s, &err), DL_OK);
    assert_int_equal(dl_codec_state_create(&s, N, 1, &st, &err), DL_OK);
    float g[N] = {1, -9, 2, 8, -3, 0, 7, 4, -5, 6}, orig[N];
    memcpy(orig, g, sizeof g);
    assert_int_equal(dl_compressed_allreduce(self, st, g, N, &stats, &err), DL_OK);
    const float *res = dl_codec_residual(st);
    for (int i = 0; i < N; i++) {
        int kept = i == 1 || i == 3 || i == 6;
        assert_true(g[i] == (kept ? orig[i] : 0.0f));
        assert_true(res[i] == (kept ? 0.0f : orig[i]));
    }
    assert_int_equal(stats.bytes_sent, 0);
    assert_int_equal(dl_compressed_allreduce(self, st, g, N - 1, &stats, &err), DL_ERR_INTERNAL);
    dl_codec_state_free(st);
    dl_comm_close(self);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_accepts_and_rejects),
        cmocka_unit_test(bits_round_trip),
        cmocka_unit_test(qsgd_is_unbiased),
        cmocka_unit_test(onebit_sends_under_a_25th),
        cmocka_unit_test(error_feedback_tracks_the_sum),
        cmocka_unit_test(topk_keeps_the_largest),
        cmocka_unit_test(topk_allreduce_on_one_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
