/* test_dtype.c: core/dtype.h's table of dtype facts and its casts.  The
 * table: each size is its C type's, each name and precision spelling parses
 * back to its dtype (an unknown one refused, naming every accepted one),
 * float or integer as the type is, dl_precision_names its precision
 * spellings in enum order (and train.precision's values the same, then
 * auto), and each row's conversions to and from f32 give
 * the scalar casts' bits (random values, NaNs, infinities, ties).  The
 * casts against a plain formula: f32 -> bf16
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
    /* i32 -> bf16 goes through f32 a block at a time: N is no multiple of the block; ids up to 2^31 round */
    for (int i = 0; i < N; i += 3)
        k[i] = (int32_t)(uint32_t)dl_rng_u64(&r);
    assert_int_equal(dl_cast(k, DL_I32, h, DL_BF16, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(h[i], dl_f32_to_bf16((float)k[i]));
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

/* A lookup among some dtypes (a network's input.dtype: f32 or i32): the
 * others refused by name, the message listing those allowed only. */
static void parse_among(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum dl_dtype t = DL_F32;
    unsigned inputs = DL_DTYPE_BIT(DL_F32) | DL_DTYPE_BIT(DL_I32);
    assert_int_equal(dl_dtype_parse_among("input.dtype", "i32", inputs, &t, &err), DL_OK);
    assert_int_equal(t, DL_I32);
    assert_int_equal(dl_dtype_parse_among("input.dtype", "bf16", inputs, &t, &err), DL_ERR_SPEC);
    assert_string_equal(err.msg, "input.dtype: expected one of f32, i32, found 'bf16'");
    assert_int_equal(t, DL_I32);
    assert_int_equal(dl_dtype_parse("dtype", "x", &t, &err), DL_ERR_SPEC);
    assert_string_equal(err.msg, "dtype: expected one of f32, bf16, i32, i64, found 'x'");
}

/* The table's facts: sizes, names, kinds, precision spellings. */
static void table_facts(void **state)
{
    (void)state;
    size_t sizes[DL_DTYPE_COUNT] = {[DL_F32] = sizeof(float), [DL_BF16] = sizeof(dl_bf16),
                                    [DL_I32] = sizeof(int32_t), [DL_I64] = sizeof(int64_t)};
    int floats[DL_DTYPE_COUNT] = {[DL_F32] = 1, [DL_BF16] = 1};
    const char *names[DL_DTYPE_COUNT] = {[DL_F32] = "f32", [DL_BF16] = "bf16", [DL_I32] = "i32", [DL_I64] = "i64"};
    const char *precisions[DL_DTYPE_COUNT] = {[DL_F32] = "fp32", [DL_BF16] = "bf16"};
    struct dl_error err = {0};
    int n_precisions = 0;
    for (int i = 0; i < DL_DTYPE_COUNT; i++) {
        enum dl_dtype t = (enum dl_dtype)i, back = DL_DTYPE_COUNT;
        const struct dl_dtype_traits *tr = dl_dtype_traits(t);
        assert_ptr_equal(tr, &dl_dtype_table[t]);
        assert_int_equal(tr->size, sizes[t]);
        assert_int_equal(dl_dtype_size(t), sizes[t]);
        assert_int_equal(tr->is_float, floats[t]);
        assert_string_equal(tr->name, names[t]);
        assert_ptr_equal(dl_dtype_name(t), tr->name);
        assert_int_equal(dl_dtype_parse("dtype", tr->name, &back, &err), DL_OK);
        assert_int_equal(back, t);
        if (!precisions[t]) {
            assert_null(tr->precision);
            continue;
        }
        assert_string_equal(tr->precision, precisions[t]);
        back = DL_DTYPE_COUNT;
        assert_int_equal(dl_precision_parse("--precision", tr->precision, &back, &err), DL_OK);
        assert_int_equal(back, t);
        /* train.precision's index i is dtype i: the precisions come first */
        assert_int_equal(i, n_precisions);
        assert_ptr_equal(dl_precision_names[n_precisions++], tr->precision);
    }
    assert_null(dl_precision_names[n_precisions]);
    /* train.precision's values: the same spellings in the same order, then auto */
    for (int i = 0; i < n_precisions; i++)
        assert_ptr_equal(dl_train_precision_names[i], dl_precision_names[i]);
    assert_int_equal(n_precisions, DL_PRECISION_AUTO);
    assert_string_equal(dl_train_precision_names[DL_PRECISION_AUTO], "auto");
    assert_null(dl_train_precision_names[DL_PRECISION_AUTO + 1]);
    assert_int_equal(dl_dtype_value_size(DL_F32), sizeof(dl_real));
    assert_int_equal(dl_dtype_value_size(DL_BF16), 2);

    /* an unknown name or spelling is refused, naming every accepted one; each list is the other's refusal */
    enum dl_dtype t = DL_BF16;
    const char *bad[] = {"fp16", "F32", "", "fp32", "f32 ", "int32"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dl_dtype_parse("dtype", bad[i], &t, &err), DL_ERR_SPEC);
        assert_int_equal(t, DL_BF16);
        for (int d = 0; d < DL_DTYPE_COUNT; d++)
            assert_non_null(strstr(err.msg, names[d]));
    }
    assert_string_equal(err.msg, "dtype: expected one of f32, bf16, i32, i64, found 'int32'");
    const char *bad_precision[] = {"f32", "i32", "fp16", "BF16", ""};
    for (size_t i = 0; i < sizeof bad_precision / sizeof *bad_precision; i++)
        assert_int_equal(dl_precision_parse("--precision", bad_precision[i], &t, &err), DL_ERR_SPEC);
    assert_int_equal(t, DL_BF16);
    assert_string_equal(err.msg, "--precision: expected fp32 or bf16, found ''");
    assert_int_equal(dl_precision_parse("--save-dtype", "f32", &t, &err), DL_ERR_SPEC);
    assert_string_equal(err.msg, "--save-dtype: expected fp32 or bf16, found 'f32'");
}

/* Each row's conversions against the scalar casts, bit for bit, on random
 * patterns and the edges (NaNs, infinities, halfway cases); the ones a row
 * lacks are the casts dl_cast refuses. */
static void table_conversions(void **state)
{
    (void)state;
    enum { N = 4099 };
    float *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
    dl_bf16 *h = malloc(sizeof *h * N);
    int32_t *k = malloc(sizeof *k * N);
    struct dl_rng r;
    dl_rng_seed(&r, 11);
    uint32_t edges[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x3f808000u,
                        0x3f818000u, 0xbf808000u, 0x7f7fffffu, 0x00000001u, 0x80000000u, 0x3f807fffu};
    for (int i = 0; i < N; i++) {
        x[i] = f32_of(i < (int)(sizeof edges / sizeof *edges) ? edges[i] : (uint32_t)dl_rng_u64(&r));
        k[i] = (int32_t)(uint32_t)dl_rng_u64(&r);
    }
    const struct dl_dtype_traits *f = dl_dtype_traits(DL_F32), *b = dl_dtype_traits(DL_BF16);
    const struct dl_dtype_traits *i32 = dl_dtype_traits(DL_I32), *i64 = dl_dtype_traits(DL_I64);
    b->from_f32(x, h, N);
    for (int i = 0; i < N; i++) {
        if (isnan(x[i]))
            assert_true(isnan(dl_bf16_to_f32(h[i])) && (h[i] >> 15) == (bits_of(x[i]) >> 31));
        assert_int_equal(h[i], dl_f32_to_bf16(x[i]));
    }
    for (uint32_t lo = 0; lo < 65536; lo += N) { /* every bf16 widened */
        long n = 65536 - lo < N ? 65536 - lo : N;
        for (long i = 0; i < n; i++)
            h[i] = (dl_bf16)(lo + i);
        b->to_f32(h, y, n);
        for (long i = 0; i < n; i++)
            assert_int_equal(bits_of(y[i]), (lo + (uint32_t)i) << 16);
    }
    f->to_f32(x, y, N);
    assert_memory_equal(x, y, sizeof *x * N);
    memset(y, 0, sizeof *y * N);
    f->from_f32(x, y, N);
    assert_memory_equal(x, y, sizeof *x * N);
    f->to_f32(y, y, N); /* the same memory: left as it is */
    assert_memory_equal(x, y, sizeof *x * N);
    i32->to_f32(k, y, N);
    for (int i = 0; i < N; i++)
        assert_true(bits_of(y[i]) == bits_of((float)k[i]));
    assert_null(i32->from_f32);
    assert_null(i64->to_f32);
    assert_null(i64->from_f32);
    /* dl_cast is the rows' conversions */
    struct dl_error err = {0};
    b->from_f32(x, h, N);
    assert_int_equal(dl_cast(h, DL_BF16, y, DL_F32, N, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(bits_of(y[i]), (uint32_t)h[i] << 16);
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
        cmocka_unit_test(table_facts), cmocka_unit_test(table_conversions), cmocka_unit_test(parse_among),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
