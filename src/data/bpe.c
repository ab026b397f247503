/* bpe.c: byte-level BPE's vocabulary and merges (see bpe.h). */
#include "data/bpe.h"

#include <stdlib.h>
#include <string.h>

#define NO_RANK INT32_MAX

struct entry {
    uint32_t off, len; /* bytes in pool */
    int32_t id;        /* -1: empty slot */
};

struct pair {
    int32_t left, right; /* -1: empty slot */
    int32_t rank;
};

struct dl_bpe {
    unsigned char *pool; /* every token's bytes */
    size_t pool_len;
    uint32_t *off, *len; /* by id */
    int32_t n, vocab;    /* the model's ids 0..n-1 (in slot); all ids */
    struct entry *slot;  /* open addressing on the model's bytes */
    size_t mask;
    struct pair *pair; /* open addressing on merges' ids; NULL: tiktoken's ranks */
    size_t pair_mask;
    int whole_first, match_added;
    struct dl_pretokenizer *pre;
    struct dl_bpe_added *added; /* content in pool; not normalized first, each longest first */
    int n_added;
    unsigned char starts_added[2][256]; /* a byte an added token of each pass starts with */
    int32_t *prefix, *suffix, separator;
    int n_prefix, n_suffix;
};

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static size_t pair_hash(int32_t left, int32_t right)
{
    return (size_t)(((uint64_t)(uint32_t)left * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(uint32_t)right * 0xc2b2ae3d27d4eb4full));
}

/* The model's id of bytes p[0..n), or NO_RANK. */
static int32_t id_of(const struct dl_bpe *b, const unsigned char *p, size_t n)
{
    for (size_t i = (size_t)hash(p, n) & b->mask;; i = (i + 1) & b->mask) {
        const struct entry *e = &b->slot[i];
        if (e->id < 0)
            return NO_RANK;
        if (e->len == n && memcmp(b->pool + e->off, p, n) == 0)
            return e->id;
    }
}

/* The rank of the parts p[a..mid) and p[mid..c) joined, or NO_RANK. */
static int32_t pair_rank(const struct dl_bpe *b, const unsigned char *p, size_t a, size_t mid, size_t c)
{
    if (!b->pair)
        return id_of(b, p + a, c - a);
    int32_t left = id_of(b, p + a, mid - a), right = id_of(b, p + mid, c - mid);
    if (left == NO_RANK || right == NO_RANK)
        return NO_RANK;
    for (size_t i = pair_hash(left, right) & b->pair_mask;; i = (i + 1) & b->pair_mask) {
        const struct pair *e = &b->pair[i];
        if (e->left < 0)
            return NO_RANK;
        if (e->left == left && e->right == right)
            return e->rank;
    }
}

static size_t slots_for(size_t n)
{
    size_t slots = 1024;
    while (slots < 2 * n + 2)
        slots *= 2;
    return slots;
}

static int32_t *copy_ids(const int32_t *ids, int n)
{
    int32_t *c = malloc(sizeof *c * (size_t)(n > 0 ? n : 1));
    if (c && n > 0)
        memcpy(c, ids, sizeof *c * (size_t)n);
    return c;
}

/* Orders added tokens not normalized first, then the longest first. */
static int added_order(const void *pa, const void *pb)
{
    const struct dl_bpe_added *a = pa, *b = pb;
    if (a->normalized != b->normalized)
        return a->normalized - b->normalized;
    return a->len < b->len ? 1 : a->len > b->len ? -1 : a->id - b->id;
}

/* Fills b's tables from r; b is freed by the caller on an error. */
static int fill(struct dl_bpe *b, const struct dl_bpe_recipe *r, struct dl_error *err)
{
    int32_t vocab = r->n;
    size_t bytes = 0;
    for (int32_t i = 0; i < r->n; i++)
        bytes += r->len[i];
    for (int i = 0; i < r->n_added; i++) {
        if (r->added[i].id < 0 || r->added[i].id >= r->n + r->n_added)
            return dl_errorf(err, DL_ERR_DATA, "%s: added token '%.100s' has id %d: ids run from 0 to %d without "
                             "gaps", r->name, r->added[i].content, r->added[i].id, r->n + r->n_added - 1);
        vocab = r->added[i].id >= vocab ? r->added[i].id + 1 : vocab;
        bytes += r->added[i].len;
    }
    b->n = r->n, b->vocab = vocab;
    b->mask = slots_for((size_t)r->n) - 1;
    b->pool = malloc(bytes + 1);
    b->off = calloc((size_t)vocab + 1, sizeof *b->off);
    b->len = calloc((size_t)vocab + 1, sizeof *b->len);
    b->slot = malloc((b->mask + 1) * sizeof *b->slot);
    b->added = malloc(sizeof *b->added * (size_t)(r->n_added + 1));
    b->prefix = copy_ids(r->prefix, r->n_prefix);
    b->suffix = copy_ids(r->suffix, r->n_suffix);
    if (!b->pool || !b->off || !b->len || !b->slot || !b->added || !b->prefix || !b->suffix)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory for %d tokens", r->name, vocab);
    b->n_prefix = r->n_prefix, b->n_suffix = r->n_suffix, b->separator = r->separator;
    b->whole_first = r->whole_first, b->match_added = r->match_added;
    for (size_t i = 0; i <= b->mask; i++)
        b->slot[i].id = -1;
    char *given = calloc((size_t)vocab + 1, 1);
    if (!given)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory for %d tokens", r->name, vocab);
    int rc = DL_OK;
    for (int32_t id = 0; !rc && id < r->n; id++) {
        unsigned char *p = b->pool + b->pool_len;
        size_t n = r->len[id];
        if (!r->bytes[id]) /* a gap, unless an added token fills it */
            continue;
        memcpy(p, r->bytes[id], n);
        size_t i = (size_t)hash(p, n) & b->mask;
        for (; b->slot[i].id >= 0; i = (i + 1) & b->mask)
            if (b->slot[i].len == n && memcmp(b->pool + b->slot[i].off, p, n) == 0)
                break;
        if (b->slot[i].id >= 0 || n == 0) {
            rc = n ? dl_errorf(err, DL_ERR_DATA, "%s: the bytes of token %d are token %d's already", r->name, id,
                               b->slot[i].id)
                   : dl_errorf(err, DL_ERR_DATA, "%s: token %d has no bytes", r->name, id);
            break;
        }
        b->slot[i] = (struct entry){(uint32_t)b->pool_len, (uint32_t)n, id};
        b->off[id] = (uint32_t)b->pool_len, b->len[id] = (uint32_t)n;
        b->pool_len += n;
        given[id] = 1;
    }
    for (int i = 0; !rc && i < r->n_added; i++) {
        struct dl_bpe_added a = r->added[i];
        memcpy(b->pool + b->pool_len, a.content, a.len);
        if (a.len == 0)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: added token %d is empty", r->name, a.id);
        else if (!given[a.id]) {
            b->off[a.id] = (uint32_t)b->pool_len, b->len[a.id] = (uint32_t)a.len;
            given[a.id] = 1;
        } else if (b->len[a.id] != a.len || memcmp(b->pool + b->off[a.id], a.content, a.len) != 0)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: added token '%.100s' has id %d, another token's", r->name,
                           a.content, a.id);
        a.content = (const char *)b->pool + b->pool_len;
        b->pool_len += a.len;
        if (a.len)
            b->starts_added[a.normalized != 0][(unsigned char)a.content[0]] = 1;
        b->added[b->n_added++] = a;
    }
    for (int32_t id = 0; !rc && id < vocab; id++)
        if (!given[id])
            rc = dl_errorf(err, DL_ERR_DATA, "%s: no token has id %d (ids run from 0 to %d without gaps)", r->name,
                           id, vocab - 1);
    free(given);
    qsort(b->added, (size_t)b->n_added, sizeof *b->added, added_order);
    for (int c = 0; !rc && c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        if (id_of(b, &byte, 1) == NO_RANK)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: byte %d has no token: a byte-level vocabulary has all 256", r->name,
                           c);
    }
    for (int i = 0; !rc && i < r->n_prefix + r->n_suffix; i++) {
        int32_t id = i < r->n_prefix ? r->prefix[i] : r->suffix[i - r->n_prefix];
        if (id < 0 || id >= vocab)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: the template's token %d is not in the vocabulary (%d tokens)",
                           r->name, id, vocab);
    }
    if (!rc && (r->separator < -1 || r->separator >= vocab))
        rc = dl_errorf(err, DL_ERR_DATA, "%s: the separator %d is not in the vocabulary (%d tokens)", r->name,
                       r->separator, vocab);
    if (rc || !r->merges)
        return rc;
    b->pair_mask = slots_for((size_t)r->n_merges) - 1;
    if (!(b->pair = malloc((b->pair_mask + 1) * sizeof *b->pair)))
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory for %ld merges", r->name, r->n_merges);
    for (size_t i = 0; i <= b->pair_mask; i++)
        b->pair[i].left = -1;
    for (long m = 0; !rc && m < r->n_merges; m++) {
        int32_t left = r->merges[m][0], right = r->merges[m][1];
        if (left < 0 || left >= r->n || right < 0 || right >= r->n)
            return dl_errorf(err, DL_ERR_DATA, "%s: merge %ld joins token %d and %d: the model has tokens 0 to %d",
                             r->name, m, left, right, r->n - 1);
        size_t ll = b->len[left], lr = b->len[right];
        unsigned char *joined = malloc(ll + lr);
        if (!joined)
            return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", r->name);
        memcpy(joined, b->pool + b->off[left], ll);
        memcpy(joined + ll, b->pool + b->off[right], lr);
        int32_t made = id_of(b, joined, ll + lr);
        free(joined);
        if (made == NO_RANK)
            return dl_errorf(err, DL_ERR_DATA, "%s: merge %ld joins tokens %d and %d into bytes that are no token",
                             r->name, m, left, right);
        size_t i = pair_hash(left, right) & b->pair_mask;
        for (; b->pair[i].left >= 0; i = (i + 1) & b->pair_mask)
            if (b->pair[i].left == left && b->pair[i].right == right)
                break;
        if (b->pair[i].left < 0) /* a merge listed again keeps its first rank */
            b->pair[i] = (struct pair){left, right, (int32_t)m};
    }
    return rc;
}

int dl_bpe_build(const struct dl_bpe_recipe *r, struct dl_bpe **out, struct dl_error *err)
{
    *out = NULL;
    struct dl_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        dl_pretokenizer_free(r->pre);
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", r->name);
    }
    b->pre = r->pre;
    int rc = fill(b, r, err);
    if (rc) {
        dl_bpe_free(b);
        return rc;
    }
    *out = b;
    return DL_OK;
}

void dl_bpe_free(struct dl_bpe *b)
{
    if (!b)
        return;
    dl_pretokenizer_free(b->pre);
    free(b->pool);
    free(b->off);
    free(b->len);
    free(b->slot);
    free(b->pair);
    free(b->added);
    free(b->prefix);
    free(b->suffix);
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
    size_t m = n + 1; /* boundaries; rank[i]: of the parts pos[i]..pos[i+1]..pos[i+2] */
    for (size_t i = 0; i < m; i++)
        pos[i] = i;
    for (size_t i = 0; i + 2 < m; i++)
        rank[i] = pair_rank(b, p, pos[i], pos[i + 1], pos[i + 2]);
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
            rank[best] = pair_rank(b, p, pos[best], pos[best + 1], pos[best + 2]);
        if (best > 0)
            rank[best - 1] = pair_rank(b, p, pos[best - 1], pos[best], pos[best + 1]);
    }
    int rc = dl_token_stream_reserve(out, (long)(m - 1), err);
    for (size_t i = 0; !rc && i + 1 < m; i++)
        out->id[out->n++] = id_of(b, p + pos[i], pos[i + 1] - pos[i]);
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
        h.rank[s] = s + 1 < h.n ? pair_rank(b, p, s, s + 1, s + 2) : NO_RANK;
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
            h.rank[s] = pair_rank(b, p, s, after, h.next[after]);
            sift(&h, h.at[s]);
        } else {
            h.rank[s] = NO_RANK;
            unheap(&h, s);
        }
        if (s > 0) {
            uint32_t q = h.prev[s];
            h.rank[q] = pair_rank(b, p, q, s, after);
            sift(&h, h.at[q]);
        }
        parts--;
    }
    int rc = dl_token_stream_reserve(out, parts, err);
    for (uint32_t s = 0; !rc && s < h.n; s = h.next[s])
        out->id[out->n++] = id_of(b, p + s, h.next[s] - s);
    free(block);
    return rc;
}

/* A piece's tokens: pieces of the pre-tokenizer go here. */
struct encoding {
    const struct dl_bpe *b;
    const unsigned char *text;
    enum dl_bpe_merge how;
    struct dl_token_stream *out;
};

static int push(struct dl_token_stream *out, int32_t id, struct dl_error *err)
{
    int rc = dl_token_stream_reserve(out, 1, err);
    if (!rc)
        out->id[out->n++] = id;
    return rc;
}

static int encode_piece(void *ctx, size_t at, size_t len, struct dl_error *err)
{
    const struct encoding *e = ctx;
    const unsigned char *piece = e->text + at;
    int32_t whole = len == 1 || e->b->whole_first ? id_of(e->b, piece, len) : NO_RANK;
    if (whole != NO_RANK)
        return push(e->out, whole, err);
    if (e->how == DL_BPE_MERGE_SCAN || (e->how == DL_BPE_MERGE_AUTO && len <= DL_BPE_SCAN_MAX))
        return merge_scan(e->b, piece, len, e->out, err);
    return merge_heap(e->b, piece, len, e->out, err);
}

/* The added tokens of the pass (0: not normalized, 1: normalized) in
 * text[at..end), each the longest at the leftmost place; the text between
 * goes to the next pass, and after the last to the pre-tokenizer. */
static int encode_between_added(const struct encoding *e, int pass, size_t at, size_t end, struct dl_error *err)
{
    const struct dl_bpe *b = e->b;
    if (pass == 2 || !b->match_added)
        return dl_pretokenize(b->pre, (const char *)e->text + at, end - at, encode_piece,
                              &(struct encoding){b, e->text + at, e->how, e->out}, err);
    int rc = DL_OK;
    size_t from = at;
    for (size_t i = at; !rc && i < end; i++)
        for (int k = 0; k < b->n_added && b->starts_added[pass][e->text[i]]; k++) {
            const struct dl_bpe_added *a = &b->added[k];
            if ((a->normalized != 0) != pass || a->len > end - i || memcmp(e->text + i, a->content, a->len) != 0)
                continue;
            if (!(rc = encode_between_added(e, pass + 1, from, i, err)))
                rc = push(e->out, a->id, err);
            from = i + a->len;
            i = from - 1;
            break;
        }
    return rc ? rc : encode_between_added(e, pass + 1, from, end, err);
}

int dl_bpe_encode(const struct dl_bpe *b, const char *text, size_t n, struct dl_token_stream *out,
                  struct dl_error *err)
{
    return dl_bpe_encode_with(b, text, n, DL_BPE_MERGE_AUTO, out, err);
}

int dl_bpe_encode_with(const struct dl_bpe *b, const char *text, size_t n, enum dl_bpe_merge how,
                       struct dl_token_stream *out, struct dl_error *err)
{
    struct encoding e = {b, (const unsigned char *)text, how, out};
    return encode_between_added(&e, 0, 0, n, err);
}

int dl_bpe_encode_document(const struct dl_bpe *b, const char *text, size_t n, struct dl_token_stream *out,
                           struct dl_error *err)
{
    int rc = DL_OK;
    if (b->n_prefix + b->n_suffix == 0 && b->separator >= 0)
        rc = push(out, b->separator, err);
    for (int i = 0; !rc && i < b->n_prefix; i++)
        rc = push(out, b->prefix[i], err);
    if (!rc)
        rc = dl_bpe_encode(b, text, n, out, err);
    for (int i = 0; !rc && i < b->n_suffix; i++)
        rc = push(out, b->suffix[i], err);
    return rc;
}

const int32_t *dl_bpe_template_prefix(const struct dl_bpe *b, int *n)
{
    *n = b->n_prefix;
    return b->prefix;
}

const unsigned char *dl_bpe_bytes(const struct dl_bpe *b, int32_t id, size_t *len)
{
    if (id < 0 || id >= b->vocab) {
        *len = 0;
        return NULL;
    }
    *len = b->len[id];
    return b->pool + b->off[id];
}

int dl_bpe_vocab(const struct dl_bpe *b)
{
    return b->vocab;
}

int32_t dl_bpe_end_of_text(const struct dl_bpe *b)
{
    return b->separator;
}
