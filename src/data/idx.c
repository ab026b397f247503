/* idx.c: IDX reader.  zlib's gzread reads gzipped and plain files alike, so
 * there is one code path.  The payload buffer grows geometrically as bytes
 * actually arrive (never beyond what the header promises), so a 16-byte file
 * claiming 2^40 pixels fails after reading 0 bytes instead of asking malloc
 * for a terabyte. */
#include "data/idx.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Largest payload accepted: far above any real dataset, and small enough that
 * sizes in floats (x4) still fit in a long. */
#define DL_IDX_MAX_BYTES ((uint64_t)1 << 40)
#define DL_IDX_FIRST_CHUNK ((size_t)1 << 20)
#define DL_IDX_MAX_READ ((size_t)1 << 30) /* gzread takes an unsigned count */

/* Reads up to n bytes, stopping early only at end of stream.  Returns the
 * number of bytes read in *got, and 0, or -1 when zlib reports an error other
 * than a premature end (which gzread reports as end of file). */
static int read_some(gzFile f, unsigned char *buf, size_t n, size_t *got)
{
    size_t total = 0;
    while (total < n) {
        size_t want = n - total < DL_IDX_MAX_READ ? n - total : DL_IDX_MAX_READ;
        int r = gzread(f, buf + total, (unsigned)want);
        if (r < 0) {
            *got = total;
            return -1;
        }
        if (r == 0)
            break;
        total += (size_t)r;
    }
    *got = total;
    int errnum = Z_OK;
    gzerror(f, &errnum);
    return errnum == Z_OK || errnum == Z_BUF_ERROR ? 0 : -1;
}

static int gz_fail(gzFile f, const char *path, struct dl_error *err)
{
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    if (errnum == Z_ERRNO)
        return dl_errorf(err, DL_ERR_IO, "%s: read error: %s", path, strerror(errno));
    return dl_errorf(err, DL_ERR_DATA, "%s: corrupt gzip data: %s", path, msg);
}

/* Reads the whole payload of `expect` bytes, growing the buffer as data
 * arrives.  A short stream is an error that names expected vs found bytes. */
static int read_payload(gzFile f, const char *path, size_t expect, size_t header,
                        unsigned char **out, struct dl_error *err)
{
    size_t cap = expect < DL_IDX_FIRST_CHUNK ? expect : DL_IDX_FIRST_CHUNK;
    size_t have = 0;
    unsigned char *buf = NULL;
    for (;;) {
        unsigned char *nb = realloc(buf, cap ? cap : 1);
        if (!nb) {
            free(buf);
            return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory reading %zu bytes",
                             path, cap);
        }
        buf = nb;
        size_t got;
        if (read_some(f, buf + have, cap - have, &got) < 0) {
            free(buf);
            return gz_fail(f, path, err);
        }
        have += got;
        if (have < cap) {
            free(buf);
            return dl_errorf(err, DL_ERR_DATA,
                             "%s: truncated: the header promises %zu data bytes after its "
                             "%zu header bytes, found %zu",
                             path, expect, header, have);
        }
        if (cap == expect)
            break;
        cap = expect - cap < cap ? expect : 2 * cap;
    }
    /* Anything after the promised data means the header is wrong. */
    unsigned char extra[4096];
    size_t more = 0, got;
    do {
        if (read_some(f, extra, sizeof extra, &got) < 0) {
            free(buf);
            return gz_fail(f, path, err);
        }
        more += got;
    } while (got == sizeof extra);
    if (more) {
        free(buf);
        return dl_errorf(err, DL_ERR_DATA,
                         "%s: the header promises %zu data bytes but the file holds %zu "
                         "(%zu extra)",
                         path, expect, expect + more, more);
    }
    *out = buf;
    return DL_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int read_header(gzFile f, const char *path, int ndim, struct dl_idx *out,
                       struct dl_error *err)
{
    unsigned char h[4 + 4 * DL_IDX_MAX_DIMS];
    size_t hsize = 4 + 4 * (size_t)ndim, got;
    if (read_some(f, h, hsize, &got) < 0)
        return gz_fail(f, path, err);
    if (got < 4)
        return dl_errorf(err, DL_ERR_DATA,
                         "%s: truncated: expected a %zu-byte IDX header, found %zu bytes",
                         path, hsize, got);
    uint32_t magic = be32(h), want = 0x00000800u | (uint32_t)ndim;
    if (magic != want)
        return dl_errorf(err, DL_ERR_DATA,
                         "%s: bad magic number 0x%08x: expected 0x%08x (IDX of unsigned "
                         "bytes with %d dimension%s)",
                         path, (unsigned)magic, (unsigned)want, ndim, ndim == 1 ? "" : "s");
    if (got < hsize)
        return dl_errorf(err, DL_ERR_DATA,
                         "%s: truncated: expected a %zu-byte IDX header, found %zu bytes",
                         path, hsize, got);
    uint64_t total = 1;
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = be32(h + 4 + 4 * i);
        if (d == 0)
            return dl_errorf(err, DL_ERR_DATA, "%s: dimension %d is 0", path, i);
        out->dims[i] = (long)d;
        /* Each factor is < 2^32 and total stays <= 2^40 before multiplying,
         * so the product cannot wrap. */
        total *= d;
        if (total > DL_IDX_MAX_BYTES)
            return dl_errorf(err, DL_ERR_DATA,
                             "%s: the header's dimensions ask for more than %llu bytes "
                             "(dimension %d is %lu): not an IDX file of this program's scale",
                             path, (unsigned long long)DL_IDX_MAX_BYTES, i, (unsigned long)d);
    }
    if (total > SIZE_MAX)
        return dl_errorf(err, DL_ERR_DATA, "%s: %llu data bytes do not fit in memory", path,
                         (unsigned long long)total);
    out->size = (size_t)total;
    return DL_OK;
}

/* Opens path and reads its header into out (payload: 1 also reads the data). */
static int read_idx(const char *path, int ndim, int payload, struct dl_idx *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    if (ndim < 1 || ndim > DL_IDX_MAX_DIMS)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: cannot read IDX with %d dimensions", path,
                         ndim);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path,
                         errno ? strerror(errno) : "out of memory");
    int rc = read_header(f, path, ndim, out, err);
    if (rc == DL_OK && payload)
        rc = read_payload(f, path, out->size, 4 + 4 * (size_t)ndim, &out->data, err);
    gzclose(f);
    if (rc != DL_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

int dl_idx_read(const char *path, int ndim, struct dl_idx *out, struct dl_error *err)
{
    return read_idx(path, ndim, 1, out, err);
}

int dl_idx_read_header(const char *path, int ndim, struct dl_idx *out, struct dl_error *err)
{
    return read_idx(path, ndim, 0, out, err);
}

int dl_idx_read_pair(const char *images_path, const char *labels_path, int classes,
                     struct dl_idx *images, struct dl_idx *labels, struct dl_error *err)
{
    memset(images, 0, sizeof *images);
    memset(labels, 0, sizeof *labels);
    if (classes < 1)
        return dl_errorf(err, DL_ERR_SPEC, "%s: cannot check labels against %d classes",
                         labels_path, classes);
    int rc = dl_idx_read(images_path, 3, images, err);
    if (rc != DL_OK)
        return rc;
    rc = dl_idx_read(labels_path, 1, labels, err);
    if (rc != DL_OK)
        goto fail;
    if (labels->dims[0] != images->dims[0]) {
        rc = dl_errorf(err, DL_ERR_DATA, "%s: %ld labels, but %s holds %ld images", labels_path,
                       labels->dims[0], images_path, images->dims[0]);
        goto fail;
    }
    for (size_t i = 0; i < labels->size; i++) {
        if (labels->data[i] >= classes) {
            rc = dl_errorf(err, DL_ERR_DATA,
                           "%s: label %d of sample %zu is out of range: expected 0..%d for "
                           "%d classes",
                           labels_path, labels->data[i], i, classes - 1, classes);
            goto fail;
        }
    }
    return DL_OK;
fail:
    dl_idx_free(images);
    dl_idx_free(labels);
    return rc;
}

void dl_idx_free(struct dl_idx *idx)
{
    if (!idx)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
