/* token_windows.c: a split's windows read from open files (see
 * token_windows.h). */
#include "data/token_windows.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The id at byte p of a file of width-byte ids (little-endian). */
static int64_t id_at(const unsigned char *p, int width)
{
    switch (width) {
    case 1:
        return p[0];
    case 2:
        return (int64_t)p[0] | (int64_t)p[1] << 8;
    default:
        return (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    }
}

/* ids [j, j + n) of file f into buf; 0, or -1 when they cannot be read. */
static int read_ids(const struct dl_token_windows_file *f, long j, long n, unsigned char *buf)
{
    size_t want = (size_t)n * (size_t)f->width, got = 0;
    off_t at = (off_t)(f->header_bytes + (size_t)j * (size_t)f->width);
    while (got < want) {
        ssize_t r = pread(f->fd, buf + got, want - got, at + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int dl_token_windows_add(struct dl_token_windows *w, const char *path, size_t header_bytes, int width, long count,
                         struct dl_error *err)
{
    struct dl_token_windows_file *files = realloc(w->file, sizeof *files * (size_t)(w->n_files + 1));
    if (files)
        w->file = files;
    long *start = files ? realloc(w->start, sizeof *start * (size_t)(w->n_files + 2)) : NULL;
    if (!start)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory opening %s", path);
    w->start = start;
    if (w->n_files == 0)
        w->start[0] = 0;
    struct dl_token_windows_file *f = &w->file[w->n_files];
    *f = (struct dl_token_windows_file){.path = strdup(path), .fd = -1, .header_bytes = header_bytes, .width = width};
    if (!f->path)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory opening %s", path);
    w->n_files++;
    w->start[w->n_files] = w->start[w->n_files - 1];
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(f->fd, &st) == 0 ? DL_OK : dl_errorf(err, DL_ERR_IO, "%s: %s", path, strerror(errno));
    if (!rc && count < 0) /* a text file: every byte */
        count = (long)st.st_size;
    size_t bytes = header_bytes + (size_t)count * (size_t)width;
    if (!rc && (size_t)st.st_size < bytes) /* changed since its header was read */
        rc = dl_errorf(err, DL_ERR_DATA, "%s: %lld bytes, expected %zu (the file changed while it was read?)", path,
                       (long long)st.st_size, bytes);
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

int dl_token_windows_check(const struct dl_token_windows *w, int below, const char *limit_is, struct dl_error *err)
{
    enum { CHUNK = 1 << 20 }; /* bytes a read */
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory checking the token ids");
    int rc = DL_OK;
    for (int f = 0; !rc && f < w->n_files; f++) {
        const struct dl_token_windows_file *file = &w->file[f];
        long per = CHUNK / file->width;
        for (long j0 = 0; !rc && j0 < file->count; j0 += per) {
            long n = file->count - j0 < per ? file->count - j0 : per;
            errno = 0;
            if (read_ids(file, j0, n, buf) != 0) {
                rc = dl_errorf(err, DL_ERR_IO, "%s: cannot read ids %ld to %ld: %s", file->path, j0, j0 + n,
                               errno ? strerror(errno) : "the file is shorter than its header says");
                break;
            }
            for (long j = 0; j < n; j++) {
                int64_t id = id_at(buf + (size_t)j * (size_t)file->width, file->width);
                if (id < below)
                    continue;
                rc = file->width == 1 ? dl_errorf(err, DL_ERR_DATA, "%s: byte %u at offset %ld is not a token id "
                                                  "below %d (%s)", file->path, (unsigned)id, j0 + j, below, limit_is)
                                      : dl_errorf(err, DL_ERR_DATA, "%s: token %ld is %lld, not an id below %d (%s)",
                                                  file->path, j0 + j, (long long)id, below, limit_is);
                break;
            }
        }
    }
    free(buf);
    return rc;
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
    static int warned; /* a file that went away: said once */
    long k = w->lo + i * w->T, end = k + w->T + 1;
    unsigned char small[4 * 4096], *buf = (size_t)(w->T + 1) * 4 <= sizeof small ? small : malloc(4 * (size_t)(w->T + 1));
    int t = 0;
    int32_t prev = 0;
    if (!buf) { /* no memory for a long window's bytes: zeros, said as a file that cannot be read is */
        for (t = 0; t <= w->T; t++) {
            if (t < w->T && ids)
                ids[t] = 0;
            if (t > 0)
                y[t - 1] = 0;
        }
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "dltrain: warning: out of memory reading a window of %d ids: it reads as 0\n", w->T + 1);
        return;
    }
    for (int f = file_of(w, k); k < end; f++) {
        const struct dl_token_windows_file *file = &w->file[f];
        long j = k - w->start[f], n = w->start[f + 1] - k < end - k ? w->start[f + 1] - k : end - k;
        if (n <= 0)
            continue;
        int bad = read_ids(file, j, n, buf) != 0;
        if (bad && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "dltrain: warning: %s: cannot read ids %ld to %ld any more (changed or removed while "
                            "training?): they read as 0\n", file->path, j, j + n);
        for (long q = 0; q < n; q++, t++) {
            int32_t id = bad ? 0 : (int32_t)id_at(buf + (size_t)q * (size_t)file->width, file->width);
            if (t < w->T && ids)
                ids[t] = id;
            if (t > 0) /* the target across a document boundary is no target */
                y[t - 1] = w->doc_mask && prev == w->doc_separator ? w->doc_ignored : id;
            prev = id;
        }
        k += n;
    }
    if (buf != small)
        free(buf);
}

void dl_token_windows_free(struct dl_token_windows *w)
{
    if (!w)
        return;
    for (int f = 0; f < w->n_files; f++) {
        if (w->file[f].fd >= 0)
            close(w->file[f].fd);
        free(w->file[f].path);
    }
    free(w->file);
    free(w->start);
    free(w);
}
