/* test_parse.c: the option-value parsers of core/parse.h accept the forms
 * they document (integers, numbers, byte sizes with binary and decimal
 * units, times with units, latencies, rates), refuse garbage, negative values, overflow and
 * values out of range, and every message names the option and quotes the
 * value, a long value shortened (core/error.h's dl_short) so that the
 * reason stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/parse.h"

static void check_message(const struct dl_error *e, const char *opt, const char *text)
{
    if (!strstr(e->msg, opt) || !strstr(e->msg, text) || e->code != DL_ERR_SPEC)
        fail_msg("message for '%s' does not name %s and quote the value: %s", text, opt, e->msg);
}

static void integers(void **state)
{
    (void)state;
    struct dl_error err = {0};
    long v;
    int i;
    assert_int_equal(dl_parse_long("--keep", "42", 1, 100, &v, &err), DL_OK);
    assert_int_equal(v, 42);
    assert_int_equal(dl_parse_long("--x", "-3", -5, 5, &v, &err), DL_OK);
    assert_int_equal(v, -3);
    assert_int_equal(dl_parse_long("--x", "9223372036854775807", 0, LONG_MAX, &v, &err), DL_OK);
    assert_true(v == LONG_MAX);
    assert_int_equal(dl_parse_long("--x", "9223372036854775808", 0, LONG_MAX, &v, &err), DL_ERR_SPEC);
    assert_int_equal(dl_parse_long("--x", "-9223372036854775809", LONG_MIN, 0, &v, &err), DL_ERR_SPEC);
    assert_int_equal(dl_parse_int("--threads", "4096", 1, 4096, &i, &err), DL_OK);
    assert_int_equal(i, 4096);
    const char *bad[] = {"", "x", "12x", " 5", "5 ", "+5", "0x10", "1e3", "1.0", "-", "101", "0", "-1",
                         "9223372036854775808", "99999999999999999999"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        v = -77;
        assert_int_equal(dl_parse_long("--keep", bad[k], 1, 100, &v, &e), DL_ERR_SPEC);
        assert_int_equal(v, -77);
        check_message(&e, "--keep", bad[k]);
    }
    struct dl_error e = {0};
    dl_parse_long("--keep", "0", 1, 100, &v, &e);
    assert_string_equal(e.msg, "--keep: expected an integer in [1, 100], found '0'");
    i = -77;
    assert_int_equal(dl_parse_int("--threads", "4097", 1, 4096, &i, &e), DL_ERR_SPEC);
    assert_int_equal(i, -77);
}

static void numbers(void **state)
{
    (void)state;
    struct dl_error err = {0};
    double v;
    assert_int_equal(dl_parse_double("--lr", "0.5", 0, 1e6, &v, &err), DL_OK);
    assert_true(v == 0.5);
    assert_int_equal(dl_parse_double("--lr", "1e-3", 0, 1e6, &v, &err), DL_OK);
    assert_true(v == 1e-3);
    assert_int_equal(dl_parse_double("--lr", ".25", 0, 1e6, &v, &err), DL_OK);
    assert_true(v == 0.25);
    assert_int_equal(dl_parse_double("--x", "-2.5", -3, 0, &v, &err), DL_OK);
    assert_true(v == -2.5);
    const char *bad[] = {"", ".", "x", "1.5x", " 1", "inf", "nan", "-inf", "0x1p3", "1e999", "-0.5", "2e6"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        v = -77;
        assert_int_equal(dl_parse_double("--lr", bad[k], 0, 1e6, &v, &e), DL_ERR_SPEC);
        assert_true(v == -77);
        check_message(&e, "--lr", bad[k]);
    }
}

static void byte_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t bytes;
    } good[] = {
        {"4096", 4096}, {"0", 0}, {"4096B", 4096}, {"4096b", 4096},
        {"64K", 65536}, {"64k", 65536}, {"64KiB", 65536}, {"64kib", 65536}, {"64KB", 64000}, {"64kB", 64000},
        {"25M", 26214400}, {"25MiB", 26214400}, {"25MB", 25000000}, {"25mb", 25000000},
        {"1G", 1073741824}, {"1GiB", 1073741824}, {"1GB", 1000000000},
        {"2T", 2199023255552}, {"2TiB", 2199023255552}, {"2TB", 2000000000000},
        {"1.5K", 1536}, {"0.5KB", 500}, {"2.25M", 2359296}, {"0.0001220703125T", 134217728},
        {"1.000K", 1024}, {"18446744073709551615", SIZE_MAX},
    };
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        struct dl_error e = {0};
        size_t v = 77;
        if (dl_parse_bytes("--bucket-bytes", good[k].text, 0, SIZE_MAX, &v, &e) != DL_OK)
            fail_msg("'%s' refused: %s", good[k].text, e.msg);
        if (v != good[k].bytes)
            fail_msg("'%s' read as %zu bytes, expected %zu", good[k].text, v, good[k].bytes);
    }
    const char *bad[] = {"", "K", "B", "-1", "-1K", " 1", "1 ", "1 K", "+1", "1.", ".5K", "1e3", "0x10", "12X",
                         "1KiBB", "1Ki", "1iB", "1P", "1KK", "0.5", "0.1K", "1.1M", "1.00000000000000000001",
                         "18446744073709551616", "18446744073709551716", "17179869184G", "18014398509481985K", "99999999999999999999999T", "3", "1T"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        size_t v = 77;
        if (dl_parse_bytes("--bucket-bytes", bad[k], 4, (size_t)1 << 39, &v, &e) != DL_ERR_SPEC)
            fail_msg("'%s' was accepted as %zu bytes", bad[k], v);
        assert_int_equal(v, 77);
        check_message(&e, "--bucket-bytes", bad[k]);
    }
    struct dl_error e = {0};
    size_t v;
    dl_parse_bytes("--bucket-bytes", "3", 4, 1024, &v, &e);
    assert_string_equal(e.msg, "--bucket-bytes: expected a size from 4 to 1024 bytes, found '3'");
    dl_parse_bytes("--bucket-bytes", "0.1K", 4, 1024, &v, &e);
    assert_string_equal(e.msg, "--bucket-bytes: expected a whole number of bytes, found '0.1K'");
    dl_parse_bytes("--bucket-bytes", "25x", 4, 1024, &v, &e);
    assert_string_equal(e.msg, "--bucket-bytes: expected a size in bytes such as 4096, 64K, 25MiB or 1GB, "
                               "found '25x'");
}

static void times(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double seconds;
    } good[] = {{"90", 90}, {"90s", 90}, {"0.25", 0.25}, {"15m", 900}, {"1.5m", 90}, {"2h", 7200}, {"1e3", 1000}};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        struct dl_error e = {0};
        double v = 0;
        if (dl_parse_seconds("--stall-timeout", good[k].text, 1e7, &v, &e) != DL_OK || v != good[k].seconds)
            fail_msg("'%s' read as %g s (%s), expected %g", good[k].text, v, e.msg, good[k].seconds);
    }
    const char *bad[] = {"", "0", "0s", "-1", "-5m", "s", "10x", "10 s", "10S", "1d", "inf", "nan", "1e30",
                         "3000h"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        double v = -77;
        if (dl_parse_seconds("--stall-timeout", bad[k], 1e7, &v, &e) != DL_ERR_SPEC)
            fail_msg("'%s' was accepted as %g s", bad[k], v);
        assert_true(v == -77);
        check_message(&e, "--stall-timeout", bad[k]);
    }
}

/* Latencies need their unit (a bare 0 excepted); 0 is a latency. */
static void durations(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double seconds;
    } good[] = {{"20us", 20e-6}, {"5ms", 5e-3}, {"0.1s", 0.1}, {"250ns", 250e-9}, {"0", 0}, {"0us", 0},
                {"1.5ms", 1.5e-3}, {"10s", 10}};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        struct dl_error e = {0};
        double v = -1;
        if (dl_parse_duration("--comm-emulate alpha", good[k].text, 10, &v, &e) != DL_OK ||
            fabs(v - good[k].seconds) > 1e-12 * good[k].seconds)
            fail_msg("'%s' read as %g s (%s), expected %g", good[k].text, v, e.msg, good[k].seconds);
    }
    const char *bad[] = {"", "20", "1.5", "-1us", "us", "20 us", "20US", "20m", "20h", "20µs", "inf", "nan",
                         "11s", "20usx"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        double v = -77;
        if (dl_parse_duration("--comm-emulate alpha", bad[k], 10, &v, &e) != DL_ERR_SPEC)
            fail_msg("'%s' was accepted as %g s", bad[k], v);
        assert_true(v == -77);
        check_message(&e, "--comm-emulate alpha", bad[k]);
    }
}

/* Rates: a size of the byte grammar, then /s. */
static void rates(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double bytes_per_s;
    } good[] = {{"1GB/s", 1e9}, {"12.5GB/s", 12.5e9}, {"100MiB/s", 100.0 * 1048576}, {"1G/s", 1073741824.0},
                {"512/s", 512}, {"1.5K/s", 1536}};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        struct dl_error e = {0};
        double v = -1;
        if (dl_parse_rate("--comm-emulate bw", good[k].text, &v, &e) != DL_OK || v != good[k].bytes_per_s)
            fail_msg("'%s' read as %g B/s (%s), expected %g", good[k].text, v, e.msg, good[k].bytes_per_s);
    }
    const char *bad[] = {"", "/s", "1GB", "0GB/s", "0/s", "-1GB/s", "1GB/h", "1 GB/s", "1GBs", "1XB/s",
                         "0.1K/s", "1GB/s/s"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        struct dl_error e = {0};
        double v = -77;
        if (dl_parse_rate("--comm-emulate bw", bad[k], &v, &e) != DL_ERR_SPEC)
            fail_msg("'%s' was accepted as %g B/s", bad[k], v);
        assert_true(v == -77);
        check_message(&e, "--comm-emulate bw", bad[k]);
    }
}

/* dl_short: up to 100 characters as they are, then the first 60 (whole
 * UTF-8 characters) and the length; a long value leaves the reason whole. */
static void short_values(void **state)
{
    char text[5001];
    memset(text, 'x', 5000);
    text[100] = 0;
    assert_string_equal(dl_short(text).s, text);
    text[100] = 'x';
    text[101] = 0;
    char want[200];
    snprintf(want, sizeof want, "%.60s... (101 characters)", text);
    assert_string_equal(dl_short(text).s, want);
    for (int i = 0; i < 200; i++) /* 200 e-acutes, 400 bytes */
        memcpy(text + 2 * i, "\xc3\xa9", 2);
    text[400] = 0;
    snprintf(want, sizeof want, "%.120s... (200 characters)", text);
    assert_string_equal(dl_short(text).s, want);
    memset(text, '7', 5000);
    text[5000] = 0;
    struct dl_error e = {0};
    int v;
    assert_int_equal(dl_parse_int("--threads", text, 1, 4096, &v, &e), DL_ERR_SPEC);
    assert_non_null(strstr(e.msg, "--threads: expected an integer in [1, 4096], found '7777"));
    assert_non_null(strstr(e.msg, "7... (5000 characters)'"));
    assert_true(strlen(e.msg) < 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers),
        cmocka_unit_test(numbers),
        cmocka_unit_test(byte_sizes),
        cmocka_unit_test(times),
        cmocka_unit_test(durations),
        cmocka_unit_test(rates),
        cmocka_unit_test(short_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
