/* token_file.c: llm.c's token files (see token_file.h). */
#include "data/token_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/atomic_file.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int grow(struct dl_token_stream *s, long more, const char *path, struct dl_error *err)
{
    if (s->n + more <= s->cap)
        return DL_OK;
    long cap = s->cap ? s->cap : 1 << 16;
    while (cap < s->n + more)
        cap *= 2;
    int32_t *grown = realloc(s->id, sizeof *grown * (size_t)cap);
    if (!grown)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory for %ld tokens", path, s->n + more);
    s->id = grown, s->cap = cap;
    return DL_OK;
}

int dl_token_stream_reserve(struct dl_token_stream *s, long more, struct dl_error *err)
{
    return grow(s, more, "token stream", err);
}

/* Reads and checks f's header against its size: *count tokens of *w bytes. */
static int read_header(FILE *f, const char *path, int64_t *count, int *w, struct dl_error *err)
{
    unsigned char head[4 * DL_TOKEN_FILE_HEADER_INTS];
    size_t got = fread(head, 1, sizeof head, f);
    uint32_t magic = got >= 4 ? le32(head) : 0, version = got >= 8 ? le32(head + 4) : 0;
    *count = got >= 12 ? (int32_t)le32(head + 8) : -1;
    *w = 0;
    if (got < sizeof head)
        return dl_errorf(err, DL_ERR_DATA, "%s: %zu bytes, shorter than a token file's header of %zu (256 int32: "
                         "magic, version, token count)", path, got, sizeof head);
    if (magic == DL_TOKEN_FILE_MAGIC16 && version == DL_TOKEN_FILE_VERSION16)
        *w = 2;
    else if (magic == DL_TOKEN_FILE_MAGIC32 && version == DL_TOKEN_FILE_VERSION32)
        *w = 4;
    else if (magic == DL_TOKEN_FILE_MAGIC16 || magic == DL_TOKEN_FILE_MAGIC32)
        return dl_errorf(err, DL_ERR_DATA, "%s: token file version %u with magic %u: expected version %d (magic %d, "
                         "uint16 tokens) or %d (magic %d, uint32 tokens)", path, version, magic,
                         DL_TOKEN_FILE_VERSION16, DL_TOKEN_FILE_MAGIC16, DL_TOKEN_FILE_VERSION32,
                         DL_TOKEN_FILE_MAGIC32);
    else
        return dl_errorf(err, DL_ERR_DATA, "%s: not a token file: its first int32 is %u, expected the magic %d "
                         "(GPT-2, uint16 tokens) or %d (LLaMA 3, uint32 tokens), as llm.c and dltrain tokenize "
                         "write", path, magic, DL_TOKEN_FILE_MAGIC16, DL_TOKEN_FILE_MAGIC32);
    if (*count < 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: the header's token count is %lld: expected >= 0", path,
                         (long long)*count);
    struct stat st;
    long long want = (long long)sizeof head + (long long)*count * *w;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (long long)st.st_size != want)
        return dl_errorf(err, DL_ERR_DATA, "%s: %s: the header says %lld tokens of %d bytes (%lld bytes with the "
                         "header), the file has %lld bytes", path,
                         (long long)st.st_size < want ? "truncated" : "longer than its header says",
                         (long long)*count, *w, want, (long long)st.st_size);
    return DL_OK;
}

int dl_token_file_header(const char *path, long *count, int *width, struct dl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int64_t n;
    int rc = read_header(f, path, &n, width, err);
    fclose(f);
    *count = (long)n;
    return rc;
}

int dl_token_file_read(const char *path, struct dl_token_stream *s, int *width, struct dl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int64_t count;
    int w, rc = read_header(f, path, &count, &w, err);
    if (!rc)
        rc = grow(s, (long)count, path, err);
    size_t got;
    unsigned char buf[1 << 16];
    long done = 0;
    while (!rc && done < count) {
        size_t want = (size_t)(count - done) * (size_t)w;
        if (want > sizeof buf)
            want = sizeof buf;
        got = fread(buf, 1, want, f);
        for (size_t i = 0; !rc && i + (size_t)w <= got; i += (size_t)w) {
            uint32_t id = w == 2 ? (uint32_t)buf[i] | (uint32_t)buf[i + 1] << 8 : le32(buf + i);
            if (id > INT32_MAX)
                rc = dl_errorf(err, DL_ERR_DATA, "%s: token %ld is %u, above the largest id %d", path,
                               done + (long)(i / (size_t)w), id, INT32_MAX);
            s->id[s->n + done + (long)(i / (size_t)w)] = (int32_t)id;
        }
        done += (long)(got / (size_t)w);
        if (!rc && got < want)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: truncated: the header says %lld tokens of %d bytes, the file "
                           "holds %ld", path, (long long)count, w, done);
    }
    if (!rc && fgetc(f) != EOF) {
        long extra = 1;
        while (fgetc(f) != EOF)
            extra++;
        rc = dl_errorf(err, DL_ERR_DATA, "%s: %ld bytes after the %lld tokens its header counts (a wrong count in "
                       "the header?)", path, extra, (long long)count);
    }
    if (!rc && ferror(f))
        rc = dl_errorf(err, DL_ERR_IO, "%s: read error", path);
    fclose(f);
    if (!rc) {
        s->n += (long)count;
        if (width)
            *width = w;
    }
    return rc;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16),
    p[3] = (unsigned char)(v >> 24);
}

int dl_token_file_write(const char *path, const int32_t *ids, long n, struct dl_error *err)
{
    if (n > INT32_MAX)
        return dl_errorf(err, DL_ERR_SPEC, "%s: %ld tokens: a token file holds at most %d (split the text into "
                         "shards)", path, n, INT32_MAX);
    int w = 2;
    for (long i = 0; i < n; i++) {
        if (ids[i] < 0)
            return dl_errorf(err, DL_ERR_INTERNAL, "%s: token %ld is %d", path, i, ids[i]);
        if (ids[i] > 65535)
            w = 4;
    }
    unsigned char head[4 * DL_TOKEN_FILE_HEADER_INTS] = {0};
    put32(head, w == 2 ? DL_TOKEN_FILE_MAGIC16 : DL_TOKEN_FILE_MAGIC32);
    put32(head + 4, w == 2 ? DL_TOKEN_FILE_VERSION16 : DL_TOKEN_FILE_VERSION32);
    put32(head + 8, (uint32_t)n);
    struct dl_atomic_file a;
    int rc = dl_atomic_open(&a, path, NULL, err);
    if (rc)
        return rc;
    dl_atomic_write(&a, head, sizeof head, err);
    unsigned char buf[1 << 16];
    size_t k = 0;
    for (long i = 0; i < n; i++) {
        if (w == 2)
            buf[k] = (unsigned char)ids[i], buf[k + 1] = (unsigned char)(ids[i] >> 8);
        else
            put32(buf + k, (uint32_t)ids[i]);
        k += (size_t)w;
        if (k == sizeof buf || i + 1 == n) {
            dl_atomic_write(&a, buf, k, err);
            k = 0;
        }
    }
    return dl_atomic_commit(&a, err);
}

void dl_token_stream_free(struct dl_token_stream *s)
{
    free(s->id);
    memset(s, 0, sizeof *s);
}
