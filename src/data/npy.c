/* npy.c: NumPy's .npy format, read by hand (float_table.h).  A file is the
 * magic "\x93NUMPY", the format's major and minor version, the header's
 * length (2 bytes little-endian in version 1, 4 in versions 2 and 3), the
 * header (a Python dict literal: {'descr': '<f4', 'fortran_order': False,
 * 'shape': (N, F), } padded with blanks and a newline), then the array's
 * bytes.  Only float32 and float64, little-endian, C order are taken; the
 * data must fill the rest of the file exactly. */
#include "data/float_table.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_DIMS 8
#define NPY_MAX_HEADER 65536 /* NumPy writes a few hundred bytes */

void dl_float_table_free(struct dl_float_table *t)
{
    if (t) {
        free(t->v);
        t->v = NULL;
        t->rows = t->cols = 0;
    }
}

/* The header being parsed: text [p, end). */
struct header {
    const char *start, *p, *end;
    const char *path;
    struct dl_error *err;
};

static void blanks(struct header *h)
{
    while (h->p < h->end && isspace((unsigned char)*h->p))
        h->p++;
}

static int expect(struct header *h, char c)
{
    blanks(h);
    if (h->p >= h->end || *h->p != c)
        return dl_errorf(h->err, DL_ERR_SPEC, "%s: not a .npy header: expected '%c' at its character %ld", h->path, c,
                         (long)(h->p - h->start) + 1);
    h->p++;
    return DL_OK;
}

/* A quoted string ('...' or "...") into buf. */
static int quoted(struct header *h, char *buf, size_t n)
{
    blanks(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return dl_errorf(h->err, DL_ERR_SPEC, "%s: not a .npy header: expected a quoted string", h->path);
    char q = *h->p++;
    size_t k = 0;
    while (h->p < h->end && *h->p != q) {
        if (k + 1 >= n)
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: a string longer than %zu characters", h->path,
                             n - 1);
        buf[k++] = *h->p++;
    }
    if (h->p >= h->end)
        return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: an unterminated string", h->path);
    h->p++;
    buf[k] = '\0';
    return DL_OK;
}

/* A tuple of non-negative integers, (N,) or (N, F, ...). */
static int shape(struct header *h, long *dims, int *ndim)
{
    if (expect(h, '('))
        return DL_ERR_SPEC;
    *ndim = 0;
    for (;;) {
        blanks(h);
        if (h->p < h->end && *h->p == ')') {
            h->p++;
            return DL_OK;
        }
        if (h->p >= h->end || !isdigit((unsigned char)*h->p))
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: 'shape' is not a tuple of sizes", h->path);
        errno = 0;
        char *e;
        long v = strtol(h->p, &e, 10);
        if (errno || e > h->end)
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: a size in 'shape' is too large", h->path);
        if (*ndim == NPY_MAX_DIMS)
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: more than %d dimensions", h->path, NPY_MAX_DIMS);
        dims[(*ndim)++] = v;
        h->p = e;
        blanks(h);
        if (h->p < h->end && *h->p == ',')
            h->p++;
        else if (h->p >= h->end || *h->p != ')')
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: 'shape' is not a tuple of sizes", h->path);
    }
}

/* The header dict: its three keys, each once. */
static int parse_header(struct header *h, char *descr, size_t descr_size, int *fortran, long *dims, int *ndim)
{
    int seen[3] = {0, 0, 0};
    if (expect(h, '{'))
        return DL_ERR_SPEC;
    for (;;) {
        blanks(h);
        if (h->p < h->end && *h->p == '}')
            break;
        char key[32];
        if (quoted(h, key, sizeof key) || expect(h, ':'))
            return DL_ERR_SPEC;
        blanks(h);
        int k = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 : !strcmp(key, "shape") ? 2 : -1;
        if (k < 0 || seen[k]++)
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: %s key '%s' (expected descr, fortran_order and "
                             "shape, once each)", h->path, k < 0 ? "unknown" : "repeated", key);
        if (k == 0 && quoted(h, descr, descr_size))
            return DL_ERR_SPEC;
        if (k == 1) {
            size_t left = (size_t)(h->end - h->p);
            if (left >= 4 && !strncmp(h->p, "True", 4))
                *fortran = 1, h->p += 4;
            else if (left >= 5 && !strncmp(h->p, "False", 5))
                *fortran = 0, h->p += 5;
            else
                return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: fortran_order is not True or False", h->path);
        }
        if (k == 2 && shape(h, dims, ndim))
            return DL_ERR_SPEC;
        blanks(h);
        if (h->p < h->end && *h->p == ',')
            h->p++;
        else if (h->p >= h->end || *h->p != '}')
            return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: expected ',' or '}' after '%s'", h->path, key);
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return dl_errorf(h->err, DL_ERR_SPEC, "%s: .npy header: missing '%s'", h->path,
                         !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
    return DL_OK;
}

/* The whole file into *buf (*size bytes). */
static int slurp(const char *path, unsigned char **buf, size_t *size, struct dl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: %s", dl_short(path).s, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *more = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
        if (!more) {
            free(b);
            b = NULL;
            break;
        }
        b = more, cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory reading the file", dl_short(path).s);
    if (bad) {
        free(b);
        return dl_errorf(err, DL_ERR_IO, "%s: read error", dl_short(path).s);
    }
    *buf = b, *size = n;
    return DL_OK;
}

static uint64_t le_bytes(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int dl_npy_read(const char *path, struct dl_float_table *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    unsigned char *b = NULL;
    size_t size = 0;
    int rc = slurp(path, &b, &size, err);
    if (rc)
        return rc;
    struct dl_short short_path = dl_short(path);
    const char *shown = short_path.s;
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    size_t at = 10;
    long hlen = 0;
    if (size < 10 || memcmp(b, magic, 6) != 0)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: not a .npy file (no \\x93NUMPY magic at its start)", shown);
    else if (b[6] < 1 || b[6] > 3)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy format version %d.%d: expected 1.0, 2.0 or 3.0", shown, b[6], b[7]);
    else {
        int wide = b[6] >= 2; /* versions 2 and 3: a 4-byte header length */
        at = wide ? 12 : 10;
        hlen = size >= at ? (long)le_bytes(b + 8, wide ? 4 : 2) : 0;
        if (hlen > NPY_MAX_HEADER)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy header of %ld bytes: expected at most %d", shown, hlen,
                           NPY_MAX_HEADER);
        else if (size < at || (size_t)hlen > size - at)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: truncated .npy file: its header is %ld bytes but the file holds %zu",
                           shown, hlen, size);
    }
    char descr[16] = "";
    int fortran = 0, ndim = 0;
    long dims[NPY_MAX_DIMS];
    if (!rc) {
        char text[hlen + 1];
        memcpy(text, b + at, (size_t)hlen);
        text[hlen] = '\0';
        if (strlen(text) != (size_t)hlen)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy header holds a NUL byte", shown);
        struct header h = {text, text, text + hlen, shown, err};
        if (!rc)
            rc = parse_header(&h, descr, sizeof descr, &fortran, dims, &ndim);
    }
    int item = !strcmp(descr, "<f4") ? 4 : !strcmp(descr, "<f8") ? 8 : 0;
    if (!rc && !item)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy dtype '%s': expected little-endian float32 ('<f4') or float64 "
                       "('<f8')", shown, descr);
    if (!rc && fortran)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy array in Fortran order: expected C order (numpy.ascontiguousarray)",
                       shown);
    if (!rc && ndim < 1)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy array of shape (): expected one row per sample", shown);
    long cols = 1;
    for (int d = 1; !rc && d < ndim; d++) {
        if (dims[d] > 0 && cols > LONG_MAX / 8 / dims[d])
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy shape too large", shown);
        cols *= dims[d];
    }
    size_t data = size - at - (size_t)hlen;
    if (!rc && (cols > 0 && dims[0] > (long)(SIZE_MAX / 8 / (size_t)cols)))
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: .npy shape too large", shown);
    if (!rc && (size_t)dims[0] * (size_t)cols * (size_t)item != data)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: %s .npy file: its header says %ld x %ld values of %d bytes (%zu bytes) "
                       "but %zu bytes follow the header", shown,
                       (size_t)dims[0] * (size_t)cols * (size_t)item > data ? "truncated" : "overlong", dims[0], cols,
                       item, (size_t)dims[0] * (size_t)cols * (size_t)item, data);
    if (!rc) {
        size_t n = (size_t)dims[0] * (size_t)cols;
        out->v = dl_calloc(n ? n : 1, sizeof *out->v, err);
        if (!out->v)
            rc = DL_ERR_NOMEM;
        const unsigned char *p = b + at + hlen;
        for (size_t i = 0; !rc && i < n; i++) {
            uint64_t bits = le_bytes(p + i * (size_t)item, item);
            if (item == 4) {
                uint32_t w = (uint32_t)bits;
                memcpy(&out->v[i], &w, 4);
            } else {
                double d;
                memcpy(&d, &bits, 8);
                out->v[i] = (float)d;
            }
        }
        out->rows = dims[0], out->cols = cols;
    }
    free(b);
    if (rc)
        dl_float_table_free(out);
    return rc;
}
