/* test_dtype.c: core/dtype.h's casts against a plain formula.  f32 -> bf16
 * must give the bf16 value nearest to the float, ties to the even one, found
 * here by comparing the two bf16 neighbours in double (exact for these
 * values; a value past bf16's largest rounds to infinity as if the next
 * value were 2^128), on a million random bit patterns (every class: zeros,
 * denormals, normals, infinities, NaNs), every halfway case at a spread of
 * exponents, the denormal range and the overflow boundary; a NaN stays a
 * NaN with its sign, even one whose payload is only in the low 16 bits.
 * bf16 -> f32 is exact (every one of the 65536 values round-trips);
 * dl_cast's loops give the scalar casts' bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/rng.h"

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The value of the bf16 whose bits are the top half of u (as a double), with
 * 0x7f80 (infinity) taken as 2^128 for the rounding decision. */
static double bf16_value(uint32_t top, int sign)
{
    if ((top & 0x7fff) == 0x7f80)
        return sign ? -ldexp(1, 128) : ldexp(1, 128);
    return (double)f32_of(top << 16);
}

/* The formula: the nearer of the two bf16 values around f, ties to even. */
static uint16_t reference(float f)
{
    uint32_t u = bits_of(f);
    int sign = (int)(u >> 31);
    if (isnan(f))
        return 0xffff; /* checked separately: any NaN of f's sign */
    if (isinf(f))
        return (uint16_t)(u >> 16);
    uint32_t lo = u >> 16, hi = lo + 1; /* toward zero, and one further out */
    double x = f, a = bf16_value(lo, sign), b = bf16_value(hi, sign);
    double da = fabs(x - a), db = fabs(x - b);
    if (da < db)
        return (uint16_t)lo;
    if (db < da)
        return (uint16_t)hi;
    return (uint16_t)((lo & 1) ? hi : lo);
}

static void check_one(float f)
{
    uint16_t got = dl_f32_to_bf16(f);
    if (isnan(f)) {
        float back = dl_bf16_to_f32(got);
        if (!isnan(back) || (got >> 15) != (bits_of(f) >> 31))
            fail_msg("NaN 0x%08x cast to 0x%04x, not a NaN of its sign", bits_of(f), got);
        return;
    }
    uint16_t want = reference(f);
    if (got != want)
        fail_msg("%a (0x%08x): cast 0x%04x, nearest-even 0x%04x", (double)f, bits_of(f), got, want);
}

static void random_patterns(void **state)
{
    (void)state;
    struct dl_rng r;
    dl_rng_seed(&r, 7);
    for (int i = 0; i < 1000000; i++)
        check_one(f32_of((uint32_t)dl_rng_u64(&r)));
}

static void halfway_and_edges(void **state)
{
    (void)state;
    /* every exponent, both signs, both parities of the kept part, exactly halfway and one ulp either side */
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t top = 0; top < 4; top++)
            for (uint32_t s = 0; s < 2; s++) {
                uint32_t base = s << 31 | e << 23 | top << 16;
                uint32_t lows[] = {0x8000, 0x7fff, 0x8001, 0x0000, 0xffff, 0x0001};
                for (size_t k = 0; k < sizeof lows / sizeof *lows; k++)
                    check_one(f32_of(base | lows[k]));
            }
    /* the denormals' whole range at a stride, the largest floats, the infinities */
    for (uint32_t u = 0; u < 0x00800000u; u += 97)
        check_one(f32_of(u)), check_one(f32_of(u | 0x80000000u));
    for (uint32_t u = 0x7f7f0000u; u <= 0x7f7fffffu; u++)
        check_one(f32_of(u));
    check_one(INFINITY);
    check_one(-INFINITY);
    assert_int_equal(dl_f32_to_bf16(f32_of(0x7f7fffffu)), 0x7f80); /* past the largest bf16: infinity */
    assert_int_equal(dl_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* halfway, ties to even (down) */
    assert_int_equal(dl_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);      /* halfway, ties to even (up) */
}

static void nans(void **state)
{
    (void)state;
    uint32_t payloads[] = {0x7f800001u, 0x7fc00000u, 0x7f80ffffu, 0x7fbfffffu, 0xff800001u, 0xffc00001u};
    for (size_t i = 0; i < sizeof payloads / sizeof *payloads; i++)
        check_one(f32_of(payloads[i]));
}

static void exact_back(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dl_bf16_to_f32((dl_bf16)h);
        if (isnan(f))
            continue;
        assert_int_equal(bits_of(f), h << 16);
        assert_int_equal(dl_f32_to_bf16(f), h);
    }
}

static void bulk_equals_scalar(void **state)
{
    (void)state;
    enum { N = 100003 };
    float *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
    dl_bf16 *h = malloc(sizeof *h * N);
    int32_t *k = malloc(sizeof *k * N);
    struct dl_rng r;
    dl_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        x[i] = f32_of((uint32_t)dl_rng_u64(&r));
        k[i] = (int32_t)dl_rng_below(&r, 1u << 24) - (1 << 23);
    }
    struct dl_error err = {0};
    assert_int_equal(dl_cast(x, DL_F32, h, DL_BF16, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], dl_f32_to_bf16(x[i]));
    assert_int_equal(dl_cast(h, DL_BF16, y, DL_F32, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(bits_of(y[i]), (uint32_t)h[i] << 16);
    assert_int_equal(dl_cast(k, DL_I32, y, DL_F32, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == (float)k[i] && (double)y[i] == (double)k[i]);
    assert_int_equal(dl_cast(y, DL_F32, k, DL_I32, N, &err), DL_ERR_INTERNAL);
    /* i64 (a layer's counters): 8 bytes, copied to itself, cast to nothing else */
    int64_t c[3] = {1, (int64_t)1 << 40, -7}, d[3] = {0};
    assert_int_equal(dl_dtype_size(DL_I64), 8);
    assert_int_equal(dl_cast(c, DL_I64, d, DL_I64, 3, &err), DL_OK);
    assert_memory_equal(c, d, sizeof c);
    assert_int_equal(dl_cast(c, DL_I64, y, DL_F32, 3, &err), DL_ERR_INTERNAL);
    enum dl_dtype t;
    assert_int_equal(dl_dtype_parse("dtype", "i64", &t, &err), DL_OK);
    assert_int_equal(t, DL_I64);
    assert_int_equal(dl_dtype_parse("dtype", "bf16", &t, &err), DL_OK);
    assert_int_equal(t, DL_BF16);
    assert_int_equal(dl_dtype_parse("dtype", "fp16", &t, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "fp16"));
    free(x), free(y), free(h), free(k);
}

/* dl_cast_add for each pair of f32 and bf16, long enough to be split over
 * threads: dst[i] + src[i] summed in f32, a bf16 destination rounded once
 * (the scalar casts above, value by value). */
static void bulk_sum_equals_scalar(void **state)
{
    (void)state;
    enum { N = 70001 };
    float *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
    dl_bf16 *g = malloc(sizeof *g * N), *h = malloc(sizeof *h * N);
    struct dl_rng r;
    dl_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) { /* sums of mixed signs and magnitudes, most of them inexact in bf16 */
        x[i] = (float)(dl_rng_uniform(&r) * 8 - 4);
        g[i] = dl_f32_to_bf16((float)(dl_rng_uniform(&r) * 8 - 4));
    }
    struct dl_error err = {0};
    memcpy(y, x, sizeof *x * N);
    assert_int_equal(dl_cast_add(x, DL_F32, y, DL_F32, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == x[i] + x[i]);
    memcpy(y, x, sizeof *x * N);
    assert_int_equal(dl_cast_add(g, DL_BF16, y, DL_F32, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == x[i] + dl_bf16_to_f32(g[i]));
    memcpy(h, g, sizeof *g * N);
    assert_int_equal(dl_cast_add(x, DL_F32, h, DL_BF16, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], dl_f32_to_bf16(dl_bf16_to_f32(g[i]) + x[i]));
    for (int i = 0; i < N; i++)
        h[i] = dl_f32_to_bf16(x[i]);
    assert_int_equal(dl_cast_add(g, DL_BF16, h, DL_BF16, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], dl_f32_to_bf16(dl_bf16_to_f32(dl_f32_to_bf16(x[i])) + dl_bf16_to_f32(g[i])));
    assert_int_equal(dl_cast_add(x, DL_F32, y, DL_I32, N, &err), DL_ERR_INTERNAL);
    free(x), free(y), free(g), free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_patterns), cmocka_unit_test(halfway_and_edges), cmocka_unit_test(nans),
        cmocka_unit_test(exact_back), cmocka_unit_test(bulk_equals_scalar), cmocka_unit_test(bulk_sum_equals_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
