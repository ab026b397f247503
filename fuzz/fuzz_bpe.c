/* fuzz_bpe.c: fuzz target for GPT-2's tokenizer (data/utf8.h, data/bpe.h):
 * any bytes are repaired to UTF-8, cut by the pre-tokenizer and merged with
 * a small vocabulary (the 256 bytes and some merges, made at the first call:
 * the real gpt2.tiktoken is fetched at set-up, not shipped); the tokens'
 * bytes must give the repaired text back, and the plain scan and the heap
 * merge every piece to the same tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"
#include "data/utf8.h"
#include "fuzz/fuzz.h"

/* ranks in this order after the bytes; some (aaa, aba) before a part of theirs */
static const char *const merges[] = {"  ", "th", "the", " the", "in", "ing", "12", "123", "  \n", "\xc3\xa9", "'s",
                                     " a", "aaa", "aa", "aaaa", "aba", "ab", "ba", "bab", "abab", "\xe2\x80", NULL};

static struct dl_bpe *vocabulary(void)
{
    static struct dl_bpe *b;
    if (b)
        return b;
    unsigned char bytes[256];
    const unsigned char *token[256 + sizeof merges / sizeof *merges];
    size_t len[256 + sizeof merges / sizeof *merges];
    int32_t n = 0;
    for (int c = 0; c < 256; c++, n++) {
        bytes[c] = (unsigned char)c;
        token[n] = bytes + c, len[n] = 1;
    }
    for (int i = 0; merges[i]; i++, n++)
        token[n] = (const unsigned char *)merges[i], len[n] = strlen(merges[i]);
    struct dl_error err = {0};
    if (dl_bpe_make(token, len, n, &b, &err) != DL_OK)
        abort();
    return b;
}

/* The tokens of text merged as how says in *s; 0 on the pre-tokenizer's error. */
static int encode(const unsigned char *text, size_t len, enum dl_bpe_merge how, struct dl_token_stream *s)
{
    struct dl_error err = {0};
    *s = (struct dl_token_stream){0};
    return dl_bpe_encode_with(vocabulary(), (const char *)text, len, how, s, &err) == DL_OK;
}

static int same(const struct dl_token_stream *a, const struct dl_token_stream *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->id, b->id, (size_t)a->n * sizeof *a->id) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dl_bpe *b = vocabulary();
    unsigned char *text = malloc(3 * size + 1), *back = NULL;
    size_t len;
    dl_utf8_repair(data, size, text, &len);
    struct dl_token_stream s, scan, heap;
    int ok = encode(text, len, DL_BPE_MERGE_AUTO, &s);
    /* the heap merges as the plain scan does, on every piece */
    if (encode(text, len, DL_BPE_MERGE_SCAN, &scan) != ok || encode(text, len, DL_BPE_MERGE_HEAP, &heap) != ok ||
        (ok && (!same(&scan, &s) || !same(&heap, &s))))
        abort();
    if (ok) {
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
    dl_token_stream_free(&scan);
    dl_token_stream_free(&heap);
    free(back);
    free(text);
    return 0;
}
