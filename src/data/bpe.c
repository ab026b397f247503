/* bpe.c: GPT-2's byte-level BPE (see bpe.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/bpe.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/shipped.h"
#include "data/imagefolder.h"

/* GPT-2's pre-tokenizer, as tiktoken writes it for r50k_base: `$` is the end
 * of the text only (PCRE2_DOLLAR_ENDONLY), \s and \p{..} are Unicode's
 * (PCRE2_UCP). */
static const char pattern[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s";

#define NO_RANK INT32_MAX

struct entry {
    uint32_t off, len; /* bytes in pool */
    int32_t rank;      /* -1: empty slot */
};

struct dl_bpe {
    unsigned char *pool; /* every token's bytes */
    size_t pool_len;
    uint32_t *off, *len; /* by rank */
    int32_t n;           /* ranks 0..n-1 */
    struct entry *slot;  /* open addressing on the bytes */
    size_t mask;
    pcre2_code *re;
};

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int32_t rank_of(const struct dl_bpe *b, const unsigned char *p, size_t n)
{
    for (size_t i = (size_t)hash(p, n) & b->mask;; i = (i + 1) & b->mask) {
        const struct entry *e = &b->slot[i];
        if (e->rank < 0)
            return NO_RANK;
        if (e->len == n && memcmp(b->pool + e->off, p, n) == 0)
            return e->rank;
    }
}

static int b64(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 text[0..n) into out; returns the length or -1. */
static long unbase64(const char *text, size_t n, unsigned char *out)
{
    long o = 0;
    unsigned bits = 0, have = 0;
    size_t i = 0;
    for (; i < n && text[i] != '='; i++) {
        int v = b64((unsigned char)text[i]);
        if (v < 0)
            return -1;
        bits = bits << 6 | (unsigned)v;
        have += 6;
        if (have >= 8) {
            have -= 8;
            out[o++] = (unsigned char)(bits >> have);
            bits &= (1u << have) - 1;
        }
    }
    for (; i < n; i++)
        if (text[i] != '=')
            return -1;
    return n % 4 == 0 && o > 0 ? o : -1;
}

static int add(struct dl_bpe *b, const unsigned char *p, size_t n, int32_t rank, const char *path, long line,
               struct dl_error *err)
{
    size_t i = (size_t)hash(p, n) & b->mask;
    for (; b->slot[i].rank >= 0; i = (i + 1) & b->mask)
        if (b->slot[i].len == n && memcmp(b->pool + b->slot[i].off, p, n) == 0)
            return dl_errorf(err, DL_ERR_DATA, "%s:%ld: the bytes of rank %d already have rank %d", path, line, rank,
                             b->slot[i].rank);
    b->slot[i] = (struct entry){(uint32_t)(p - b->pool), (uint32_t)n, rank};
    b->off[rank] = (uint32_t)(p - b->pool);
    b->len[rank] = (uint32_t)n;
    return DL_OK;
}

/* path's bytes, terminated (strtol reads the last rank). */
static int read_text(const char *path, char **text, size_t *n, struct dl_error *err)
{
    unsigned char *buf;
    int rc = dl_read_file(path, &buf, n, err);
    if (rc)
        return rc;
    char *t = realloc(buf, *n + 1);
    if (!t) {
        free(buf);
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    }
    t[*n] = '\0';
    *text = t;
    return DL_OK;
}

/* An empty vocabulary for up to `ranks` tokens of `bytes` bytes in all. */
static struct dl_bpe *vocabulary(size_t ranks, size_t bytes)
{
    struct dl_bpe *b = calloc(1, sizeof *b);
    size_t slots = 1024;
    while (slots < 2 * ranks + 2)
        slots *= 2;
    if (b) {
        b->mask = slots - 1;
        b->pool = malloc(bytes + 1);
        b->off = calloc(ranks + 1, sizeof *b->off);
        b->len = calloc(ranks + 1, sizeof *b->len);
        b->slot = malloc(slots * sizeof *b->slot);
    }
    if (!b || !b->pool || !b->off || !b->len || !b->slot) {
        dl_bpe_free(b);
        return NULL;
    }
    for (size_t i = 0; i < slots; i++)
        b->slot[i].rank = -1;
    return b;
}

/* Checks that name's n ranks hold every byte and compiles the pre-tokenizer;
 * frees b on an error. */
static int finish(struct dl_bpe *b, int32_t n, const char *name, struct dl_bpe **out, struct dl_error *err)
{
    int rc = DL_OK;
    b->n = n;
    for (int c = 0; !rc && c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        if (rank_of(b, &byte, 1) == NO_RANK)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: byte %d has no rank: a byte-level vocabulary ranks all 256", name,
                           c);
    }
    int code;
    PCRE2_SIZE at;
    if (!rc && !(b->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                        PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL))) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        rc = dl_errorf(err, DL_ERR_INTERNAL, "the pre-tokenizer pattern at %zu: %s", (size_t)at, (char *)msg);
    }
    if (!rc)
        pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE); /* without JIT it still matches, slower */
    if (rc) {
        dl_bpe_free(b);
        return rc;
    }
    *out = b;
    return DL_OK;
}

int dl_bpe_load(const char *path, struct dl_bpe **out, struct dl_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t n = 0;
    int rc = read_text(path, &text, &n, err);
    if (rc)
        return rc;
    long lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    lines += n && text[n - 1] != '\n';
    struct dl_bpe *b = vocabulary((size_t)lines, n);
    if (!b) {
        free(text);
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    }
    long line = 0;
    for (char *p = text, *end = text + n; !rc && p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end, *space = memchr(p, ' ', (size_t)(stop - p));
        char *tail;
        long rank = space ? strtol(space + 1, &tail, 10) : -1;
        long len = space ? unbase64(p, (size_t)(space - p), b->pool + b->pool_len) : -1;
        if (len < 0 || space + 1 == tail || (tail != stop && !(tail + 1 == stop && *tail == '\r')))
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%ld: expected \"BASE64 RANK\" (a .tiktoken vocabulary)", path,
                           line + 1);
        else if (rank != line)
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%ld: rank %ld, expected %ld (ranks count up from 0, one per line)",
                           path, line + 1, rank, line);
        else
            rc = add(b, b->pool + b->pool_len, (size_t)len, (int32_t)rank, path, line + 1, err);
        b->pool_len += len > 0 ? (size_t)len : 0;
        p = stop + 1;
    }
    free(text);
    if (rc) {
        dl_bpe_free(b);
        return rc;
    }
    return finish(b, (int32_t)line, path, out, err);
}

int dl_bpe_make(const unsigned char *const *bytes, const size_t *len, int32_t n, struct dl_bpe **out,
                struct dl_error *err)
{
    *out = NULL;
    size_t all = 0;
    for (int32_t r = 0; r < n; r++)
        all += len[r];
    struct dl_bpe *b = vocabulary((size_t)n, all);
    if (!b)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for a vocabulary of %d tokens", n);
    int rc = DL_OK;
    for (int32_t r = 0; !rc && r < n; r++) {
        memcpy(b->pool + b->pool_len, bytes[r], len[r]);
        rc = add(b, b->pool + b->pool_len, len[r], r, "the vocabulary", r + 1, err);
        b->pool_len += len[r];
    }
    if (rc) {
        dl_bpe_free(b);
        return rc;
    }
    return finish(b, n, "the vocabulary", out, err);
}

int dl_bpe_open(const char *name, struct dl_bpe **out, struct dl_error *err)
{
    char rel[1024], path[4096], looked[4096] = "";
    if (strchr(name, '/') || access(name, R_OK) == 0)
        return dl_bpe_load(name, out, err);
    snprintf(rel, sizeof rel, "vocab/%s.tiktoken", name);
    if (dl_shipped_find(rel, path, sizeof path, looked, sizeof looked))
        return dl_bpe_load(path, out, err);
    *out = NULL;
    return dl_errorf(err, DL_ERR_IO, "vocabulary '%s': no %s.tiktoken (looked in %s): tools/deps fetches gpt2.tiktoken "
                     "(from the openai-whisper source distribution on PyPI) into vocab/; or give a .tiktoken file's "
                     "path", name, name, looked[0] ? looked : "nowhere");
}

void dl_bpe_free(struct dl_bpe *b)
{
    if (!b)
        return;
    pcre2_code_free(b->re);
    free(b->pool);
    free(b->off);
    free(b->len);
    free(b->slot);
    free(b);
}

/* Merges piece p[0..n) (n >= 2) and appends its tokens: the plain merge.
 * After each merge every pair is scanned again for the lowest rank (the
 * leftmost of equal ranks), so a piece of n bytes costs O(n^2): the
 * reference merge_heap is tested against, and the merge of short pieces
 * (on the stack up to DL_BPE_SCAN_MAX bytes). */
static int merge_scan(const struct dl_bpe *b, const unsigned char *p, size_t n, struct dl_token_stream *out,
                      struct dl_error *err)
{
    size_t small_pos[DL_BPE_SCAN_MAX + 1];
    int32_t small_rank[DL_BPE_SCAN_MAX + 1];
    size_t *pos = n <= DL_BPE_SCAN_MAX ? small_pos : malloc((n + 1) * sizeof *pos);
    int32_t *rank = n <= DL_BPE_SCAN_MAX ? small_rank : malloc((n + 1) * sizeof *rank);
    if (!pos || !rank) {
        if (pos != small_pos)
            free(pos);
        if (rank != small_rank)
            free(rank);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory encoding a piece of %zu bytes", n);
    }
    size_t m = n + 1; /* boundaries; rank[i]: of the bytes pos[i]..pos[i+2] */
    for (size_t i = 0; i < m; i++)
        pos[i] = i;
    for (size_t i = 0; i + 2 < m; i++)
        rank[i] = rank_of(b, p + pos[i], pos[i + 2] - pos[i]);
    while (m > 2) {
        size_t best = 0;
        int32_t r = NO_RANK;
        for (size_t i = 0; i + 2 < m; i++)
            if (rank[i] < r)
                r = rank[i], best = i;
        if (r == NO_RANK)
            break;
        /* drop boundary best + 1: pieces best and best + 1 become one */
        memmove(pos + best + 1, pos + best + 2, (m - best - 2) * sizeof *pos);
        memmove(rank + best + 1, rank + best + 2, (m >= best + 4 ? m - best - 4 : 0) * sizeof *rank);
        m--;
        if (best + 2 < m)
            rank[best] = rank_of(b, p + pos[best], pos[best + 2] - pos[best]);
        if (best > 0)
            rank[best - 1] = rank_of(b, p + pos[best - 1], pos[best + 1] - pos[best - 1]);
    }
    int rc = dl_token_stream_reserve(out, (long)(m - 1), err);
    for (size_t i = 0; !rc && i + 1 < m; i++)
        out->id[out->n++] = rank_of(b, p + pos[i], pos[i + 1] - pos[i]);
    if (pos != small_pos)
        free(pos);
    if (rank != small_rank)
        free(rank);
    return rc;
}

/* merge_heap's parts and pairs, by the first byte of a part: next[s] and
 * prev[s] link the parts; rank[s] is the rank of part s and the next
 * (NO_RANK for the last); heap holds every part but the last, ordered by
 * (rank, first byte): merge_scan's order; at[s] is s's place in heap. */
struct pairs {
    uint32_t n, size;
    uint32_t *next, *prev, *heap, *at;
    int32_t *rank;
};

static int before(const struct pairs *h, uint32_t a, uint32_t b)
{
    return h->rank[a] < h->rank[b] || (h->rank[a] == h->rank[b] && a < b);
}

static void place(struct pairs *h, uint32_t i, uint32_t s)
{
    h->heap[i] = s;
    h->at[s] = i;
}

/* Moves the part at heap place i down below the parts that go before it. */
static void sift_down(struct pairs *h, uint32_t i)
{
    uint32_t s = h->heap[i];
    for (uint32_t c; (c = 2 * i + 1) < h->size; i = c) {
        if (c + 1 < h->size && before(h, h->heap[c + 1], h->heap[c]))
            c++;
        if (!before(h, h->heap[c], s))
            break;
        place(h, i, h->heap[c]);
    }
    place(h, i, s);
}

/* Moves the part at heap place i, whose rank changed, up or down to where
 * its rank puts it. */
static void sift(struct pairs *h, uint32_t i)
{
    uint32_t s = h->heap[i];
    for (; i > 0 && before(h, s, h->heap[(i - 1) / 2]); i = (i - 1) / 2)
        place(h, i, h->heap[(i - 1) / 2]);
    place(h, i, s);
    sift_down(h, i);
}

static void unheap(struct pairs *h, uint32_t s)
{
    uint32_t i = h->at[s], last = h->heap[--h->size];
    if (i < h->size) {
        place(h, i, last);
        sift(h, i);
    }
}

/* merge_scan's merges in O(n log n): the pair of lowest rank (the leftmost
 * of equal ranks) is the heap's top; a merge removes the right part's pair
 * and ranks again the two pairs the merged part is in. */
static int merge_heap(const struct dl_bpe *b, const unsigned char *p, size_t n, struct dl_token_stream *out,
                      struct dl_error *err)
{
    if (n >= UINT32_MAX)
        return dl_errorf(err, DL_ERR_DATA, "a piece of %zu bytes (a word, number, run of symbols or of white "
                         "space): pieces of 4 GiB or more are not encoded", n);
    struct pairs h = {.n = (uint32_t)n, .size = (uint32_t)n - 1};
    uint32_t *block = malloc(5 * n * sizeof *block);
    if (!block)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory encoding a piece of %zu bytes", n);
    h.next = block, h.prev = block + n, h.heap = block + 2 * n, h.at = block + 3 * n;
    h.rank = (int32_t *)(block + 4 * n);
    for (uint32_t s = 0; s < h.n; s++) {
        h.next[s] = s + 1;
        h.prev[s] = s - 1; /* unread for the first part */
        h.rank[s] = s + 1 < h.n ? rank_of(b, p + s, 2) : NO_RANK;
        if (s + 1 < h.n)
            place(&h, s, s);
    }
    for (uint32_t i = h.size / 2; i-- > 0;)
        sift_down(&h, i);
    long parts = (long)n;
    while (h.size > 0 && h.rank[h.heap[0]] != NO_RANK) {
        uint32_t s = h.heap[0], right = h.next[s], after = h.next[right];
        h.next[s] = after;
        if (after < h.n) {
            unheap(&h, right);
            h.prev[after] = s;
            h.rank[s] = rank_of(b, p + s, h.next[after] - s);
            sift(&h, h.at[s]);
        } else {
            h.rank[s] = NO_RANK;
            unheap(&h, s);
        }
        if (s > 0) {
            uint32_t q = h.prev[s];
            h.rank[q] = rank_of(b, p + q, after - q);
            sift(&h, h.at[q]);
        }
        parts--;
    }
    int rc = dl_token_stream_reserve(out, parts, err);
    for (uint32_t s = 0; !rc && s < h.n; s = h.next[s])
        out->id[out->n++] = rank_of(b, p + s, h.next[s] - s);
    free(block);
    return rc;
}

int dl_bpe_encode(const struct dl_bpe *b, const char *text, size_t n, struct dl_token_stream *out,
                  struct dl_error *err)
{
    return dl_bpe_encode_with(b, text, n, DL_BPE_MERGE_AUTO, out, err);
}

int dl_bpe_encode_with(const struct dl_bpe *b, const char *text, size_t n, enum dl_bpe_merge how,
                       struct dl_token_stream *out, struct dl_error *err)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(b->re, NULL);
    if (!md)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for the pre-tokenizer");
    int rc = DL_OK;
    for (size_t at = 0; !rc && at < n;) {
        int got = pcre2_match(b->re, (PCRE2_SPTR)text, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (got == PCRE2_ERROR_NOMATCH)
            break;
        if (got < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(got, msg, sizeof msg);
            rc = dl_errorf(err, DL_ERR_DATA, "the pre-tokenizer at byte %zu: %s", at, (char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        const unsigned char *piece = (const unsigned char *)text + ov[0];
        size_t len = ov[1] - ov[0];
        int32_t whole = rank_of(b, piece, len);
        if (whole != NO_RANK) {
            rc = dl_token_stream_reserve(out, 1, err);
            if (!rc)
                out->id[out->n++] = whole;
        } else if (how == DL_BPE_MERGE_SCAN || (how == DL_BPE_MERGE_AUTO && len <= DL_BPE_SCAN_MAX))
            rc = merge_scan(b, piece, len, out, err);
        else
            rc = merge_heap(b, piece, len, out, err);
        at = ov[1] > at ? ov[1] : at + 1;
    }
    pcre2_match_data_free(md);
    return rc;
}

const unsigned char *dl_bpe_bytes(const struct dl_bpe *b, int32_t id, size_t *len)
{
    static const unsigned char eot[] = "<|endoftext|>";
    if (id == b->n) {
        *len = sizeof eot - 1;
        return eot;
    }
    if (id < 0 || id > b->n) {
        *len = 0;
        return NULL;
    }
    *len = b->len[id];
    return b->pool + b->off[id];
}

int dl_bpe_vocab(const struct dl_bpe *b)
{
    return b->n + 1;
}

int32_t dl_bpe_end_of_text(const struct dl_bpe *b)
{
    return b->n;
}
