/* parse.c: option-value parsers (see parse.h).  Sizes are read with integer
 * arithmetic, so that every byte count up to 2^64 - 1 is exact and an
 * overflow is an error rather than a wrapped value. */
#include "core/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int digit(char c)
{
    return isdigit((unsigned char)c);
}

int dl_parse_long(const char *opt, const char *text, long min, long max, long *out, struct dl_error *err)
{
    int ok = digit(text[0]) || (text[0] == '-' && digit(text[1]));
    long v = 0;
    if (ok) {
        char *end;
        errno = 0;
        v = strtol(text, &end, 10);
        ok = !*end && !errno && v >= min && v <= max;
    }
    if (!ok)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected an integer in [%ld, %ld], found '%s'", opt, min, max,
                         dl_short(text).s);
    *out = v;
    return DL_OK;
}

int dl_parse_int(const char *opt, const char *text, int min, int max, int *out, struct dl_error *err)
{
    long v;
    int rc = dl_parse_long(opt, text, min, max, &v, err);
    if (!rc)
        *out = (int)v;
    return rc;
}

/* Reads a decimal number at the start of text: digits, '.', an exponent and
 * a leading '-' only (strtod alone would also take spaces, "inf", "nan" and
 * hexadecimal).  Returns 0 and sets *end past it, or -1. */
static int read_number(const char *text, double *v, const char **end)
{
    const char *s = text[0] == '-' ? text + 1 : text;
    if (!digit(s[0]) && !(s[0] == '.' && digit(s[1])))
        return -1;
    char *e;
    errno = 0;
    *v = strtod(text, &e);
    if (errno || !isfinite(*v) || strspn(text, "0123456789.eE+-") < (size_t)(e - text))
        return -1;
    *end = e;
    return 0;
}

int dl_parse_double(const char *opt, const char *text, double min, double max, double *out,
                    struct dl_error *err)
{
    double v;
    const char *end;
    if (read_number(text, &v, &end) || *end || v < min || v > max)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a number in [%g, %g], found '%s'", opt, min, max,
                         dl_short(text).s);
    *out = v;
    return DL_OK;
}

int dl_parse_seconds(const char *opt, const char *text, double max, double *out, struct dl_error *err)
{
    double v, unit = -1;
    const char *end;
    if (!read_number(text, &v, &end))
        unit = !strcmp(end, "") || !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : -1;
    if (unit < 0 || !(v > 0) || v * unit > max)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a time such as 90, 90s, 15m or 2h, above 0 and at most "
                         "%g s, found '%s'", opt, max, dl_short(text).s);
    *out = v * unit;
    return DL_OK;
}

int dl_parse_duration(const char *opt, const char *text, double max, double *out, struct dl_error *err)
{
    static const struct { const char *name; double seconds; } units[] = {
        {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
    double v, unit = -1;
    const char *end;
    if (!read_number(text, &v, &end)) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(end, units[i].name))
                unit = units[i].seconds;
        if (!*end && v == 0)
            unit = 1;
    }
    if (unit < 0 || v < 0 || v * unit > max)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a time with its unit such as 20us, 5ms or 0.1s (ns, us, "
                         "ms, s), from 0 to %g s, found '%s'", opt, max, dl_short(text).s);
    *out = v * unit;
    return DL_OK;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The multiplier of a unit ("", "B", "K", "KiB", "KB", ... in any case), or
 * 0 when it is none. */
static uint64_t unit_multiplier(const char *u)
{
    static const char prefixes[] = "kmgt";
    if (!*u || !strcasecmp(u, "b"))
        return 1;
    const char *p = strchr(prefixes, tolower((unsigned char)*u));
    if (!p)
        return 0;
    int power = (int)(p - prefixes) + 1;
    uint64_t base = !strcmp(u + 1, "") || !strcasecmp(u + 1, "ib") ? 1024 : !strcasecmp(u + 1, "b") ? 1000 : 0;
    uint64_t m = base;
    for (int i = 1; i < power; i++)
        m *= base;
    return m;
}

int dl_parse_bytes(const char *opt, const char *text, size_t min, size_t max, size_t *out,
                   struct dl_error *err)
{
    const char *s = text;
    uint64_t whole = 0, frac = 0, frac_den = 1;
    int overflow = 0, inexact = 0;
    if (!digit(*s))
        goto syntax;
    for (; digit(*s); s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (whole > (UINT64_MAX - d) / 10)
            overflow = 1;
        else
            whole = 10 * whole + d;
    }
    if (*s == '.') {
        if (!digit(*++s))
            goto syntax;
        for (; digit(*s); s++) {
            if (frac_den <= UINT64_MAX / 10) {
                frac = 10 * frac + (uint64_t)(*s - '0');
                frac_den *= 10;
            } else if (*s != '0') {
                inexact = 1; /* beyond 19 decimals: no unit makes that whole */
            }
        }
    }
    uint64_t mult = unit_multiplier(s);
    if (!mult)
        goto syntax;
    uint64_t g = gcd(frac, frac_den), num = frac / g, den = frac_den / g;
    if (inexact || (frac && mult % den))
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a whole number of bytes, found '%s'", opt,
                         dl_short(text).s);
    /* num / den < 1, so num * (mult / den) < mult: no overflow there. */
    uint64_t bytes = whole * mult, part = frac ? num * (mult / den) : 0;
    if (overflow || whole > UINT64_MAX / mult || bytes > UINT64_MAX - part || bytes + part < min ||
        bytes + part > max)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a size from %zu to %zu bytes, found '%s'", opt, min, max,
                         dl_short(text).s);
    *out = (size_t)(bytes + part);
    return DL_OK;
syntax:
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected a size in bytes such as 4096, 64K, 25MiB or 1GB, found '%s'",
                     opt, dl_short(text).s);
}

/* bits per second: a number above 0, then bit, Kbit, Mbit, Gbit or Tbit
 * (powers of 1000), then /s; bytes per second into *out. */
static int bit_rate(const char *text, double *out)
{
    static const struct { const char *unit; double bits; } units[] = {
        {"bit/s", 1}, {"Kbit/s", 1e3}, {"Mbit/s", 1e6}, {"Gbit/s", 1e9}, {"Tbit/s", 1e12}};
    double v;
    const char *end;
    if (read_number(text, &v, &end) || !(v > 0))
        return 0;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (!strcasecmp(end, units[i].unit)) {
            *out = v * units[i].bits / 8;
            return isfinite(*out);
        }
    return 0;
}

int dl_parse_rate(const char *opt, const char *text, double *out, struct dl_error *err)
{
    char size[64];
    size_t n = strlen(text);
    size_t bytes = 0;
    if (bit_rate(text, out))
        return DL_OK;
    if (n < 3 || n - 2 >= sizeof size || strcmp(text + n - 2, "/s"))
        goto bad;
    memcpy(size, text, n - 2);
    size[n - 2] = 0;
    if (dl_parse_bytes(opt, size, 1, SIZE_MAX, &bytes, NULL))
        goto bad;
    *out = (double)bytes;
    return DL_OK;
bad:
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected a rate above 0 such as 1GB/s, 12.5GB/s, 100MiB/s (a size in "
                     "bytes, then /s) or 100Gbit/s (bit, Kbit, Mbit, Gbit, Tbit: powers of 1000), found '%s'", opt,
                     dl_short(text).s);
}

int dl_parse_link(const char *opt, const char *text, int allow_add, double max_alpha, struct dl_link *out,
                  struct dl_error *err)
{
    struct dl_link l = {0};
    char buf[256], what[96];
    const char *expected = allow_add ? "alpha=TIME,bw=RATE[,add=RATE]" : "alpha=TIME,bw=RATE";
    if (strlen(text) >= sizeof buf)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected %s (such as alpha=20us,bw=1GB/s), found a value of %zu "
                         "characters", opt, expected, strlen(text));
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq)
            *eq = 0;
        int key = !eq ? -1 : !strcmp(item, "alpha") ? 0 : !strcmp(item, "bw") ? 1
                : allow_add && !strcmp(item, "add") ? 2 : -1;
        int *given = key == 0 ? &l.has_alpha : key == 1 ? &l.has_bw : key == 2 ? &l.has_add : NULL;
        if (!given) {
            if (eq)
                *eq = '=';
            return dl_errorf(err, DL_ERR_SPEC, "%s: expected %s (such as alpha=20us,bw=1GB/s), found '%s' in '%s'",
                             opt, expected, item, dl_short(text).s);
        }
        if (*given)
            return dl_errorf(err, DL_ERR_SPEC, "%s: %s given twice in '%s'", opt, item, dl_short(text).s);
        snprintf(what, sizeof what, "%s %s", opt, item);
        int rc = key == 0 ? dl_parse_duration(what, eq + 1, max_alpha, &l.alpha, err)
                          : dl_parse_rate(what, eq + 1, key == 1 ? &l.bw : &l.add, err);
        if (rc)
            return rc;
        *given = 1;
    }
    if (!l.has_alpha && !l.has_bw)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected %s (such as alpha=20us,bw=1GB/s), found '%s'", opt, expected,
                         dl_short(text).s);
    *out = l;
    return DL_OK;
}

const char *dl_bytes_str(double bytes, char *buf, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%.0f bytes", bytes);
        return buf;
    }
    int u = 0;
    double v = bytes / 1024;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    snprintf(buf, size, "%.*f %s", v >= 100 ? 0 : v >= 10 ? 1 : 2, v, units[u]);
    return buf;
}
