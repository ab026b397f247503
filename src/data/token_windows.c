/* token_windows.c: a split's windows read from mapped files (see
 * token_windows.h). */
#include "data/token_windows.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The id at index j of file f (little-endian). */
static int64_t file_id(const struct dl_token_windows_file *f, long j)
{
    const unsigned char *p = f->ids + (size_t)j * (size_t)f->width;
    switch (f->width) {
    case 1:
        return p[0];
    case 2:
        return (int64_t)p[0] | (int64_t)p[1] << 8;
    default:
        return (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    }
}

int dl_token_windows_add(struct dl_token_windows *w, const char *path, size_t header_bytes, int width, long count,
                         struct dl_error *err)
{
    struct dl_token_windows_file *files = realloc(w->file, sizeof *files * (size_t)(w->n_files + 1));
    if (files)
        w->file = files;
    long *start = files ? realloc(w->start, sizeof *start * (size_t)(w->n_files + 2)) : NULL;
    if (!start)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory mapping %s", path);
    w->start = start;
    if (w->n_files == 0)
        w->start[0] = 0;
    struct dl_token_windows_file *f = &w->file[w->n_files];
    *f = (struct dl_token_windows_file){.path = strdup(path), .width = width, .map = MAP_FAILED};
    if (!f->path)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory mapping %s", path);
    w->n_files++;
    w->start[w->n_files] = w->start[w->n_files - 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? DL_OK : dl_errorf(err, DL_ERR_IO, "%s: %s", path, strerror(errno));
    if (!rc && count < 0) /* a text file: every byte */
        count = (long)st.st_size;
    size_t bytes = header_bytes + (size_t)count * (size_t)width;
    if (!rc && (size_t)st.st_size < bytes) /* changed since its header was read */
        rc = dl_errorf(err, DL_ERR_DATA, "%s: %lld bytes, expected %zu (the file changed while it was read?)", path,
                       (long long)st.st_size, bytes);
    if (!rc && count > 0) {
        f->map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED)
            rc = dl_errorf(err, DL_ERR_IO, "%s: cannot map %zu bytes: %s", path, bytes, strerror(errno));
        else
            f->map_bytes = bytes, f->ids = (const unsigned char *)f->map + header_bytes;
    }
    close(fd);
    if (!rc)
        f->count = count, w->start[w->n_files] += count;
    return rc;
}

/* The file holding stream index k (start[f] <= k < start[f + 1]). */
static int file_of(const struct dl_token_windows *w, long k)
{
    int lo = 0, hi = w->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (w->start[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (lo + 1 < w->n_files && w->start[lo + 1] <= k) /* past files of no ids */
        lo++;
    return lo;
}

int32_t dl_token_windows_id(const struct dl_token_windows *w, long k)
{
    int f = file_of(w, k);
    return (int32_t)file_id(&w->file[f], k - w->start[f]);
}

/* Drops the pages of f's mapping below its id j from the process (they
 * stay in the page cache): a pass over a large corpus leaves it no
 * bigger. */
static void release_below(const struct dl_token_windows_file *f, long j)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t upto = (size_t)(f->ids - (const unsigned char *)f->map) + (size_t)j * (size_t)f->width;
    upto -= upto % page;
    if (upto > 0)
        madvise(f->map, upto, MADV_DONTNEED);
}

int dl_token_windows_check(const struct dl_token_windows *w, int below, const char *limit_is, struct dl_error *err)
{
    enum { CHUNK = 1 << 24 }; /* ids between releases */
    for (int f = 0; f < w->n_files; f++) {
        const struct dl_token_windows_file *file = &w->file[f];
        for (long j = 0; j < file->count; j++) {
            if (j > 0 && j % CHUNK == 0)
                release_below(file, j);
            int64_t id = file_id(file, j);
            if (id < below)
                continue;
            if (file->width == 1)
                return dl_errorf(err, DL_ERR_DATA, "%s: byte %u at offset %ld is not a token id below %d (%s)",
                                 file->path, (unsigned)id, j, below, limit_is);
            return dl_errorf(err, DL_ERR_DATA, "%s: token %ld is %lld, not an id below %d (%s)", file->path, j,
                             (long long)id, below, limit_is);
        }
        if (file->count > 0)
            release_below(file, file->count);
    }
    return DL_OK;
}

int dl_token_windows_split(struct dl_token_windows *w, long lo, long hi, int T, long limit, const char *what,
                           const char *split, const char *path, struct dl_error *err)
{
    long len = hi - lo, n = len > T ? (len - 1) / T : 0;
    if (n == 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: the %s split of %s has %ld tokens, fewer than one window of %d + 1",
                         what, split, path, len, T);
    w->lo = lo, w->hi = hi, w->T = T;
    w->n = limit > 0 && limit < n ? limit : n;
    return DL_OK;
}

void dl_token_windows_get(const struct dl_token_windows *w, long i, int32_t *ids, int *y)
{
    long k = w->lo + i * w->T;
    int f = file_of(w, k);
    for (int t = 0; t <= w->T; t++, k++) {
        while (k >= w->start[f + 1]) /* into the next file */
            f++;
        int32_t id = (int32_t)file_id(&w->file[f], k - w->start[f]);
        if (t < w->T && ids)
            ids[t] = id;
        if (t > 0)
            y[t - 1] = id;
    }
}

void dl_token_windows_free(struct dl_token_windows *w)
{
    if (!w)
        return;
    for (int f = 0; f < w->n_files; f++) {
        if (w->file[f].map != MAP_FAILED)
            munmap(w->file[f].map, w->file[f].map_bytes);
        free(w->file[f].path);
    }
    free(w->file);
    free(w->start);
    free(w);
}
