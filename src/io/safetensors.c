/* safetensors.c: the safetensors writer and its strict reader (see
 * safetensors.h).  The JSON header is built and parsed with jansson; every
 * number taken from a file is range-checked before it sizes or offsets
 * anything, so a hostile file yields an error, never a crash. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/atomic_file.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes host-order data: add byte swapping for big-endian hosts"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[DL_ST_N_DTYPES] = {
    [DL_ST_BOOL] = {"BOOL", 1}, [DL_ST_U8] = {"U8", 1},     [DL_ST_I8] = {"I8", 1},
    [DL_ST_F8_E4M3] = {"F8_E4M3", 1}, [DL_ST_F8_E5M2] = {"F8_E5M2", 1},
    [DL_ST_U16] = {"U16", 2},   [DL_ST_I16] = {"I16", 2},   [DL_ST_F16] = {"F16", 2},
    [DL_ST_BF16] = {"BF16", 2}, [DL_ST_U32] = {"U32", 4},   [DL_ST_I32] = {"I32", 4},
    [DL_ST_F32] = {"F32", 4},   [DL_ST_U64] = {"U64", 8},   [DL_ST_I64] = {"I64", 8},
    [DL_ST_F64] = {"F64", 8},
};

const char *dl_st_dtype_name(enum dl_st_dtype t)
{
    return (unsigned)t < DL_ST_N_DTYPES ? dtypes[t].name : "?";
}

size_t dl_st_dtype_size(enum dl_st_dtype t)
{
    return (unsigned)t < DL_ST_N_DTYPES ? dtypes[t].size : 0;
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    return (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), p, n);
}

/* Number of elements, or -1 when a dimension is negative or the product
 * overflows 2^62 (no real tensor is that big). */
static int64_t element_count(int ndim, const int64_t *shape)
{
    int64_t c = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && c > (INT64_C(1) << 62) / shape[d]))
            return -1;
        c *= shape[d];
    }
    return c;
}

/* ================================================================ writing */

static int build_header(const char *path, const struct dl_st_tensor *t, int n, const struct dl_st_meta *meta,
                        int n_meta, uint32_t crc, char **out, struct dl_error *err)
{
    json_t *root = json_object(), *md = json_object();
    int rc = DL_OK;
    uint64_t off = 0;
    if (!root || !md) {
        rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory building the header", path);
        goto done;
    }
    for (int i = 0; i < n && !rc; i++) {
        int64_t count = element_count(t[i].ndim, t[i].shape);
        if (!t[i].name || !t[i].name[0] || !strcmp(t[i].name, "__metadata__"))
            rc = dl_errorf(err, DL_ERR_INTERNAL, "%s: tensor %d: empty or reserved name", path, i);
        else if (json_object_get(root, t[i].name))
            rc = dl_errorf(err, DL_ERR_INTERNAL, "%s: tensor '%s' given twice", path, t[i].name);
        else if ((unsigned)t[i].dtype >= DL_ST_N_DTYPES || t[i].ndim < 0 || t[i].ndim > DL_ST_MAX_DIMS ||
                 count < 0)
            rc = dl_errorf(err, DL_ERR_INTERNAL, "%s: tensor '%s': bad dtype or shape", path, t[i].name);
        if (rc)
            break;
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++)
            json_array_append_new(shape, json_integer(t[i].shape[d]));
        uint64_t end = off + (uint64_t)count * dtypes[t[i].dtype].size;
        json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", dtypes[t[i].dtype].name, "shape", shape,
                              "data_offsets", (json_int_t)off, (json_int_t)end);
        if (!e || json_object_set_new(root, t[i].name, e))
            rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory building the header", path);
        off = end;
    }
    for (int i = 0; i < n_meta && !rc; i++)
        if (json_object_set_new(md, meta[i].key, json_string(meta[i].value)))
            rc = dl_errorf(err, DL_ERR_INTERNAL, "%s: metadata '%s' is not valid UTF-8", path, meta[i].key);
    char sum[32];
    snprintf(sum, sizeof sum, "crc32:%08" PRIx32, crc);
    if (!rc && json_object_set_new(md, DL_ST_CHECKSUM_KEY, json_string(sum)))
        rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory building the header", path);
    if (!rc) {
        /* __metadata__ first, so that `head -c` shows the run's step and epoch. */
        json_t *ordered = json_pack("{s:O}", "__metadata__", md);
        json_object_update(ordered, root);
        *out = ordered ? json_dumps(ordered, JSON_COMPACT) : NULL;
        json_decref(ordered);
        if (!*out)
            rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory building the header", path);
    }
done:
    json_decref(root);
    json_decref(md);
    return rc;
}

int dl_st_write(const char *path, const struct dl_st_tensor *t, int n, const struct dl_st_meta *meta,
                int n_meta, struct dl_error *err)
{
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        int64_t count = element_count(t[i].ndim, t[i].shape);
        if (count > 0 && (unsigned)t[i].dtype < DL_ST_N_DTYPES)
            crc = crc32_z(crc, t[i].data, (size_t)count * dtypes[t[i].dtype].size);
    }
    char *header = NULL;
    int rc = build_header(path, t, n, meta, n_meta, (uint32_t)crc, &header, err);
    if (rc)
        return rc;
    /* Pad the header with spaces so that the data start 8-byte aligned, as the
     * reference writer does (readers may then map tensors in place). */
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;
    unsigned char lenbytes[8];
    for (int b = 0; b < 8; b++)
        lenbytes[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    struct dl_atomic_file a;
    rc = dl_atomic_open(&a, path, NULL, err);
    if (!rc)
        rc = dl_atomic_write(&a, lenbytes, 8, err);
    if (!rc)
        rc = dl_atomic_write(&a, header, len, err);
    if (!rc)
        rc = dl_atomic_write(&a, "        ", padded - len, err);
    for (int i = 0; i < n && !rc; i++)
        rc = dl_atomic_write(&a, t[i].data, (size_t)element_count(t[i].ndim, t[i].shape) *
                             dtypes[t[i].dtype].size, err);
    free(header);
    if (rc) {
        dl_atomic_abort(&a);
        return rc;
    }
    return dl_atomic_commit(&a, err);
}

/* ================================================================ reading */

/* "FILE: tensor 'NAME': what" (or "FILE: what" when tensor is NULL). */
static int bad(const struct dl_st_file *f, struct dl_error *err, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const struct dl_st_file *f, struct dl_error *err, const char *tensor, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (tensor)
        return dl_errorf(err, DL_ERR_DATA, "%s: tensor '%.200s': %s", f->name, tensor, what);
    return dl_errorf(err, DL_ERR_DATA, "%s: %s", f->name, what);
}

static int parse_dtype(const char *s, enum dl_st_dtype *out)
{
    for (int i = 0; i < DL_ST_N_DTYPES; i++)
        if (!strcmp(s, dtypes[i].name)) {
            *out = (enum dl_st_dtype)i;
            return 1;
        }
    return 0;
}

static int parse_entry(struct dl_st_file *f, const char *name, json_t *v, struct dl_st_entry *e,
                       struct dl_error *err)
{
    if (!json_is_object(v))
        return bad(f, err, name, "expected an object with dtype, shape and data_offsets");
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_object_size(v) != 3)
        return bad(f, err, name, "expected exactly the keys dtype (string), shape (array) and data_offsets "
                   "(array)");
    if (!parse_dtype(json_string_value(dt), &e->dtype)) {
        return dl_errorf(err, DL_ERR_DATA, "%s: tensor '%.200s': unknown dtype '%.40s' (expected one of "
                         "BOOL, U8, I8, F8_E4M3, F8_E5M2, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64)",
                         f->name, name, json_string_value(dt));
    }
    if (json_array_size(sh) > DL_ST_MAX_DIMS)
        return bad(f, err, name, "%" PRIu64 " dimensions: expected at most %" PRIu64, (uint64_t)json_array_size(sh), (uint64_t)DL_ST_MAX_DIMS);
    e->ndim = (int)json_array_size(sh);
    for (int d = 0; d < e->ndim; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return bad(f, err, name, "shape[%" PRIu64 "]: expected a non-negative integer", (uint64_t)d);
        e->shape[d] = json_integer_value(x);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < 0)
        return bad(f, err, name, "data_offsets: expected [begin, end] with non-negative integers");
    e->begin = (uint64_t)json_integer_value(b);
    e->end = (uint64_t)json_integer_value(en);
    int64_t count = element_count(e->ndim, e->shape);
    if (count < 0)
        return bad(f, err, name, "shape too large");
    e->count = (uint64_t)count;
    if (e->end < e->begin)
        return bad(f, err, name, "data_offsets [%" PRIu64 ", %" PRIu64 "]: end before begin", e->begin, e->end);
    if (e->end > f->data_size)
        return bad(f, err, name, "data ends at byte %" PRIu64 " of the data section: outside the %" PRIu64
                   " bytes the file holds (truncated, or a bad offset)", e->end, (uint64_t)f->data_size);
    uint64_t want = e->count * dtypes[e->dtype].size;
    if (e->end - e->begin != want)
        return dl_errorf(err, DL_ERR_DATA, "%s: tensor '%.200s': shape and dtype %s need %" PRIu64
                         " bytes, data_offsets give %" PRIu64, f->name, name, dtypes[e->dtype].name, want,
                         e->end - e->begin);
    e->data = f->data + e->begin;
    e->name = strdup(name);
    return e->name ? DL_OK : dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", f->name);
}

static int parse_metadata(struct dl_st_file *f, json_t *md, struct dl_error *err)
{
    if (!json_is_object(md))
        return bad(f, err, NULL, "__metadata__: expected an object of strings");
    size_t n = json_object_size(md);
    f->meta_key = calloc(n + 1, sizeof *f->meta_key);
    f->meta_value = calloc(n + 1, sizeof *f->meta_value);
    if (!f->meta_key || !f->meta_value)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", f->name);
    const char *key;
    json_t *v;
    json_object_foreach(md, key, v) {
        if (!json_is_string(v))
            return dl_errorf(err, DL_ERR_DATA, "%s: __metadata__ '%.200s': expected a string value", f->name,
                             key);
        f->meta_key[f->n_meta] = strdup(key);
        f->meta_value[f->n_meta] = strdup(json_string_value(v));
        if (!f->meta_key[f->n_meta] || !f->meta_value[f->n_meta])
            return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", f->name);
        f->n_meta++;
    }
    return DL_OK;
}

static int by_begin(const void *a, const void *b)
{
    const struct dl_st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors must tile [0, data_size) exactly, as the reference reader
 * demands: an overlap would alias two tensors, a gap or a tail hides bytes. */
static int check_layout(struct dl_st_file *f, struct dl_error *err)
{
    qsort(f->t, (size_t)f->n, sizeof *f->t, by_begin);
    uint64_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        const struct dl_st_entry *e = &f->t[i];
        if (e->begin < pos)
            return dl_errorf(err, DL_ERR_DATA, "%s: tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64
                             "] overlap tensor '%.200s' (which ends at %" PRIu64 ")", f->name, e->name, e->begin,
                             e->end, f->t[i - 1].name, pos);
        if (e->begin > pos)
            return bad(f, err, e->name, "data begins at byte %" PRIu64 ": expected %" PRIu64 " (no gap between tensors)", e->begin, pos);
        pos = e->end;
    }
    if (pos != f->data_size)
        return bad(f, err, NULL, "the tensors cover %" PRIu64 " bytes of data but the file holds %" PRIu64, pos,
                   (uint64_t)f->data_size);
    return DL_OK;
}

static int verify_checksum(struct dl_st_file *f, struct dl_error *err)
{
    const char *sum = dl_st_meta_get(f, DL_ST_CHECKSUM_KEY);
    if (!sum)
        return DL_OK;
    char *end;
    if (strncmp(sum, "crc32:", 6) != 0 || strlen(sum) != 14)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata %s: expected crc32:XXXXXXXX, found '%.40s'", f->name,
                         DL_ST_CHECKSUM_KEY, sum);
    unsigned long want = strtoul(sum + 6, &end, 16);
    if (*end)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata %s: expected crc32:XXXXXXXX, found '%.40s'", f->name,
                         DL_ST_CHECKSUM_KEY, sum);
    uint32_t got = crc32_of(f->data, f->data_size);
    if (got != (uint32_t)want)
        return dl_errorf(err, DL_ERR_DATA, "%s: checksum mismatch: the header says crc32 %08lx, the data "
                         "give %08" PRIx32 " (the file is damaged)", f->name, want, got);
    f->has_checksum = 1;
    return DL_OK;
}

static int parse(struct dl_st_file *f, struct dl_error *err)
{
    if (f->size < 8)
        return bad(f, err, NULL, "truncated: %" PRIu64 " bytes, expected at least %" PRIu64
                   " (the header length)", (uint64_t)f->size, (uint64_t)8);
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--)
        hlen = hlen << 8 | f->bytes[b];
    if (hlen > f->size - 8)
        return bad(f, err, NULL, "header length %" PRIu64 " goes beyond the end of the file (%" PRIu64
                   " bytes after the length field): truncated or not a safetensors file", hlen,
                   (uint64_t)(f->size - 8));
    if (hlen > DL_ST_MAX_HEADER)
        return bad(f, err, NULL, "header length %" PRIu64 ": expected at most %" PRIu64, hlen, (uint64_t)DL_ST_MAX_HEADER);
    if (hlen < 2 || f->bytes[8] != '{')
        return bad(f, err, NULL, "the header does not start with '{': not a safetensors file");
    f->data = f->bytes + 8 + hlen;
    f->data_size = f->size - 8 - hlen;
    json_error_t je;
    json_t *root = json_loadb((const char *)f->bytes + 8, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return dl_errorf(err, DL_ERR_DATA, "%s: header byte %d: %s", f->name, je.position, je.text);
    int rc = DL_OK;
    if (!json_is_object(root)) {
        rc = bad(f, err, NULL, "the header is not a JSON object");
        goto done;
    }
    size_t n = json_object_size(root);
    f->t = calloc(n + 1, sizeof *f->t);
    if (!f->t) {
        rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", f->name);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__"))
            rc = parse_metadata(f, v, err);
        else if (!(rc = parse_entry(f, key, v, &f->t[f->n], err)))
            f->n++;
        if (rc)
            goto done;
    }
    rc = check_layout(f, err);
    if (!rc)
        rc = verify_checksum(f, err);
done:
    json_decref(root);
    return rc;
}

int dl_st_open_memory(const char *name, const void *buf, size_t size, struct dl_st_file *f,
                      struct dl_error *err)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->bytes = buf;
    f->size = size;
    int rc = parse(f, err);
    if (rc)
        dl_st_close(f);
    return rc;
}

int dl_st_open(const char *path, struct dl_st_file *f, struct dl_error *err)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO is refused below, not waited on */
    if (fd < 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dl_errorf(err, DL_ERR_IO, "%s: not a regular file", path);
    }
    void *map = NULL;
    if (st.st_size > 0) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return dl_errorf(err, DL_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
    }
    close(fd);
    int rc = dl_st_open_memory(path, map ? map : "", (size_t)st.st_size, f, err);
    if (rc) {
        if (map)
            munmap(map, (size_t)st.st_size);
        return rc;
    }
    f->mapped = map != NULL;
    return DL_OK;
}

void dl_st_close(struct dl_st_file *f)
{
    for (int i = 0; f->t && i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_key[i]);
        free(f->meta_value[i]);
    }
    /* a half-filled metadata pair (allocation failure) */
    if (f->meta_key)
        free(f->meta_key[f->n_meta]);
    if (f->meta_value)
        free(f->meta_value[f->n_meta]);
    free(f->meta_key);
    free(f->meta_value);
    if (f->mapped)
        munmap((void *)f->bytes, f->size);
    memset(f, 0, sizeof *f);
}

const struct dl_st_entry *dl_st_find(const struct dl_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

const char *dl_st_meta_get(const struct dl_st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_key[i], key))
            return f->meta_value[i];
    return NULL;
}

void dl_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
}
