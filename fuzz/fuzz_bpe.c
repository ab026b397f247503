/* fuzz_bpe.c: fuzz target for GPT-2's tokenizer (data/utf8.h, data/bpe.h):
 * any bytes are repaired to UTF-8, cut by the pre-tokenizer and merged with
 * a small vocabulary (the 256 bytes and some merges, written to memory at the
 * first call: the real gpt2.tiktoken is fetched at set-up, not shipped); the
 * tokens' bytes must give the repaired text back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/bpe.h"
#include "data/utf8.h"
#include "fuzz/fuzz.h"

static const char *const merges[] = {"  ", "th", "the", " the", "in", "ing", "12", "123", "  \n", "\xc3\xa9", "'s",
                                     " a", "aa", "aaaa", "\xe2\x80", NULL};

static void base64(const unsigned char *p, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[o] = '\0';
}

static struct dl_bpe *vocabulary(void)
{
    static struct dl_bpe *b;
    if (b)
        return b;
    int fd = memfd_create("fuzz-bpe", MFD_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;
    if (!f)
        abort();
    char line[64];
    int rank = 0;
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        base64(&byte, 1, line);
        fprintf(f, "%s %d\n", line, rank++);
    }
    for (int i = 0; merges[i]; i++) {
        base64((const unsigned char *)merges[i], strlen(merges[i]), line);
        fprintf(f, "%s %d\n", line, rank++);
    }
    fflush(f);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct dl_error err = {0};
    if (dl_bpe_load(path, &b, &err) != DL_OK)
        abort();
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dl_bpe *b = vocabulary();
    unsigned char *text = malloc(3 * size + 1), *back = NULL;
    size_t len;
    dl_utf8_repair(data, size, text, &len);
    struct dl_token_stream s = {0};
    struct dl_error err = {0};
    if (dl_bpe_encode(b, (const char *)text, len, &s, &err) == DL_OK) {
        back = malloc(len + 1);
        size_t at = 0;
        for (long i = 0; i < s.n; i++) {
            size_t n;
            const unsigned char *p = dl_bpe_bytes(b, s.id[i], &n);
            if (!p || at + n > len)
                abort();
            memcpy(back + at, p, n);
            at += n;
        }
        if (at != len || memcmp(back, text, len) != 0)
            abort();
    }
    dl_token_stream_free(&s);
    free(back);
    free(text);
    return 0;
}
