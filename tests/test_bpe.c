/* test_bpe.c: GPT-2's byte-level BPE (data/bpe.h): the heap merge of long
 * pieces against the plain scan (its reference) on random text (random
 * bytes, a small alphabet that many merges apply to, runs of one letter,
 * base64-like runs, digits, with spaces between), under random
 * vocabularies (every rank, the bytes' too, in any order) and under
 * gpt2.tiktoken when vocab/ has it; both give the text back; the leftmost
 * of equal ranks merges first; dl_bpe_make's refusals.
 * tests/test_tokenizer.sh compares dltrain tokenize with tiktoken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "data/bpe.h"
#include "data/utf8.h"

/* A vocabulary of the 256 bytes and `merges` distinct strings of 2 to 6
 * characters of abc, ranked in a random order. */
static struct dl_bpe *random_vocabulary(uint64_t seed, int merges)
{
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    int n = 256 + merges, *order = malloc(sizeof *order * (size_t)n);
    unsigned char(*text)[8] = calloc((size_t)n, sizeof *text);
    const unsigned char **bytes = malloc(sizeof *bytes * (size_t)n);
    size_t *len = malloc(sizeof *len * (size_t)n);
    assert_true(order && text && bytes && len);
    for (int i = 0; i < n; i++) {
        order[i] = i;
        len[i] = 1;
        text[i][0] = (unsigned char)i;
        while (i >= 256) { /* a string not drawn before */
            len[i] = 2 + dl_rng_below(&r, 5);
            for (size_t k = 0; k < len[i]; k++)
                text[i][k] = (unsigned char)"abc"[dl_rng_below(&r, 3)];
            int seen = 0;
            for (int j = 256; j < i && !seen; j++)
                seen = len[j] == len[i] && memcmp(text[j], text[i], len[i]) == 0;
            if (!seen)
                break;
        }
    }
    dl_rng_shuffle(&r, order, n);
    for (int i = 0; i < n; i++)
        bytes[i] = text[order[i]];
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    assert_non_null(lens);
    for (int i = 0; i < n; i++)
        lens[i] = len[order[i]];
    struct dl_bpe *b;
    struct dl_error err = {0};
    assert_int_equal(dl_bpe_make(bytes, lens, n, &b, &err), DL_OK);
    free(order), free(text), free(bytes), free(len), free(lens);
    return b;
}

/* gpt2.tiktoken from the source tree, or NULL when it is not there. */
static struct dl_bpe *gpt2(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/gpt2.tiktoken", top ? top : ".");
    if (access(path, R_OK) != 0)
        return NULL;
    struct dl_bpe *b;
    struct dl_error err = {0};
    assert_int_equal(dl_bpe_load(path, &b, &err), DL_OK);
    return b;
}

/* The tokens of text[0..n) merged as how says. */
static struct dl_token_stream encode(const struct dl_bpe *b, const char *text, size_t n, enum dl_bpe_merge how)
{
    struct dl_token_stream s = {0};
    struct dl_error err = {0};
    int rc = dl_bpe_encode_with(b, text, n, how, &s, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    return s;
}

/* The heap, the scan and dl_bpe_encode give the same tokens, and they are
 * the text's bytes. */
static void check_text(const struct dl_bpe *b, const char *text, size_t n, const char *what)
{
    struct dl_token_stream scan = encode(b, text, n, DL_BPE_MERGE_SCAN), heap = encode(b, text, n, DL_BPE_MERGE_HEAP);
    struct dl_token_stream aut = {0};
    struct dl_error err = {0};
    assert_int_equal(dl_bpe_encode(b, text, n, &aut, &err), DL_OK);
    long differs = -1;
    for (long i = 0; differs < 0 && i < scan.n && i < heap.n; i++)
        if (scan.id[i] != heap.id[i] || aut.id[i] != scan.id[i])
            differs = i;
    if (differs >= 0 || scan.n != heap.n || aut.n != scan.n)
        fail_msg("%s of %zu bytes: the heap's %ld tokens and dl_bpe_encode's %ld differ from the scan's %ld at "
                 "token %ld", what, n, heap.n, aut.n, scan.n, differs);
    size_t at = 0;
    for (long i = 0; i < heap.n; i++) {
        size_t len;
        const unsigned char *p = dl_bpe_bytes(b, heap.id[i], &len);
        assert_non_null(p);
        assert_true(at + len <= n);
        assert_memory_equal(p, text + at, len);
        at += len;
    }
    assert_int_equal(at, n);
    dl_token_stream_free(&scan);
    dl_token_stream_free(&heap);
    dl_token_stream_free(&aut);
}

/* Random texts of each kind, of up to `most` bytes (valid UTF-8). */
static void check_random_texts(const struct dl_bpe *b, uint64_t seed, int count, size_t most)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char *const kinds[] = {"random bytes", "abc", "one letter", "base64", "digits", "words"};
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    unsigned char *raw = malloc(most + 1);
    char *text = malloc(3 * most + 1);
    assert_true(raw && text);
    for (int t = 0; t < count; t++) {
        int kind = t % 6;
        size_t n = 1 + dl_rng_below(&r, t / 6 % 2 == 0 ? most : 64); /* short pieces too */
        for (size_t i = 0; i < n; i++) {
            uint64_t u = dl_rng_u64(&r);
            raw[i] = kind == 0 ? (unsigned char)u
                     : kind == 1 ? (unsigned char)"abc"[u % 3]
                     : kind == 2 ? 'a'
                     : kind == 3 ? (unsigned char)b64[u % 64]
                     : kind == 4 ? (unsigned char)('0' + u % 10)
                                 : (unsigned char)"aab   bc1"[u % 9];
        }
        size_t len;
        dl_utf8_repair(raw, n, (unsigned char *)text, &len);
        check_text(b, text, len, kinds[kind]);
    }
    free(raw);
    free(text);
}

static void heap_as_scan_random_vocabularies(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        struct dl_bpe *b = random_vocabulary(seed, seed < 4 ? 40 : 400);
        check_random_texts(b, 100 + seed, 120, 3000);
        dl_bpe_free(b);
    }
}

static void heap_as_scan_gpt2(void **state)
{
    (void)state;
    struct dl_bpe *b = gpt2();
    if (!b)
        skip(); /* tools/deps fetches vocab/gpt2.tiktoken */
    check_random_texts(b, 7, 240, 3000);
    static char run[20001];
    memset(run, 'a', sizeof run - 1);
    check_text(b, run, sizeof run - 1, "20,000 a's");
    dl_bpe_free(b);
}

/* The 256 one-byte tokens, ids 0..255, in token[] and len[] (bytes[] holds
 * their bytes). */
static void byte_tokens(unsigned char bytes[256], const unsigned char **token, size_t *len)
{
    for (int c = 0; c < 256; c++) {
        bytes[c] = (unsigned char)c;
        token[c] = bytes + c, len[c] = 1;
    }
}

/* Equal ranks merge leftmost first: with "aa", three a's are [aa][a] and
 * 101 are 50 [aa] then [a]. */
static void leftmost_first(void **state)
{
    (void)state;
    unsigned char bytes[256];
    const unsigned char *token[257];
    size_t len[257];
    byte_tokens(bytes, token, len);
    token[256] = (const unsigned char *)"aa", len[256] = 2;
    struct dl_bpe *b;
    struct dl_error err = {0};
    assert_int_equal(dl_bpe_make(token, len, 257, &b, &err), DL_OK);
    char run[101];
    memset(run, 'a', sizeof run);
    for (enum dl_bpe_merge how = DL_BPE_MERGE_AUTO; how <= DL_BPE_MERGE_HEAP; how++)
        for (size_t n = 3; n <= sizeof run; n += sizeof run - 3) {
            struct dl_token_stream s = encode(b, run, n, how);
            assert_int_equal(s.n, (long)n / 2 + 1);
            for (long i = 0; i + 1 < s.n; i++)
                assert_int_equal(s.id[i], 256);
            assert_int_equal(s.id[s.n - 1], 'a');
            dl_token_stream_free(&s);
        }
    dl_bpe_free(b);
}

static void make_refuses(void **state)
{
    (void)state;
    unsigned char bytes[256];
    const unsigned char *token[257];
    size_t len[257];
    byte_tokens(bytes, token, len);
    token[256] = bytes + 'x', len[256] = 1;
    struct dl_bpe *b = NULL;
    struct dl_error err = {0};
    assert_int_equal(dl_bpe_make(token, len, 257, &b, &err), DL_ERR_DATA);
    assert_null(b);
    assert_non_null(strstr(err.msg, "the bytes of token 256 are token 120's already"));
    assert_int_equal(dl_bpe_make(token + 1, len + 1, 255, &b, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "byte 0 has no token"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leftmost_first),
        cmocka_unit_test(heap_as_scan_random_vocabularies),
        cmocka_unit_test(heap_as_scan_gpt2),
        cmocka_unit_test(make_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
