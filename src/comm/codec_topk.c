/* codec_topk.c: top-k sparsification with the SparCML exchange (Renggli et
 * al., SC 2019).  Each rank keeps its k largest magnitudes as (index, value)
 * pairs; ranks merge their sets by recursive doubling, and a set whose union
 * grows past the point where the dense vector is no larger on the wire (8
 * bytes a pair against 4 a float: density 1/2, the alpha-beta break-even)
 * turns dense for the rest of the exchange. */
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "comm/codec.h"

size_t dl_topk_count(const struct dl_codec_spec *spec, size_t n)
{
    if (n == 0)
        return 0;
    double k = spec->fraction * (double)n;
    size_t ki = (size_t)k + ((double)(size_t)k < k);
    return ki < 1 ? 1 : ki > n ? n : ki;
}

static void swapf(float *a, float *b)
{
    float t = *a;
    *a = *b;
    *b = t;
}

/* Reorders w so that w[k] is the value of rank k in descending order. */
static void select_desc(float *w, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        /* median of three as the pivot, moved to hi */
        if (w[mid] > w[lo])
            swapf(&w[mid], &w[lo]);
        if (w[hi] > w[lo])
            swapf(&w[hi], &w[lo]);
        if (w[mid] > w[hi])
            swapf(&w[mid], &w[hi]);
        float pivot = w[hi];
        size_t store = lo;
        for (size_t i = lo; i < hi; i++)
            if (w[i] > pivot)
                swapf(&w[i], &w[store++]);
        swapf(&w[store], &w[hi]);
        if (store == k)
            return;
        if (store < k)
            lo = store + 1;
        else
            hi = store - 1;
    }
}

void dl_topk_select(const float *v, size_t n, size_t k, uint32_t *idx, float *work)
{
    if (k == 0)
        return;
    for (size_t i = 0; i < n; i++)
        work[i] = v[i] < 0 ? -v[i] : v[i];
    select_desc(work, n, k - 1);
    float t = work[k - 1];
    size_t above = 0;
    for (size_t i = 0; i < n; i++)
        above += (v[i] < 0 ? -v[i] : v[i]) > t;
    size_t ties = k - above, m = 0;
    for (size_t i = 0; i < n && m < k; i++) {
        float a = v[i] < 0 ? -v[i] : v[i];
        if (a > t || (a == t && ties > 0)) {
            if (!(a > t))
                ties--;
            idx[m++] = (uint32_t)i;
        }
    }
}

/* Encoding: k indices (uint32) then k values. */
static size_t bytes_topk(const struct dl_codec_spec *s, size_t n)
{
    return dl_topk_count(s, n) * (sizeof(uint32_t) + dl_dtype_size(DL_F32));
}

static void encode_topk(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                        struct dl_rng *rng)
{
    size_t k = dl_topk_count(s, n);
    uint32_t *idx = out;
    float *val = (float *)(idx + k), *work = malloc(n * sizeof *work + 1);
    if (!work) { /* keep the first k: still a valid (if poor) encoding */
        for (size_t i = 0; i < k; i++)
            idx[i] = (uint32_t)i;
    } else {
        dl_topk_select(v, n, k, idx, work);
    }
    free(work);
    for (size_t i = 0; i < k; i++)
        val[i] = v[idx[i]];
}

static void decode_add_topk(const struct dl_codec_spec *s, const void *in, size_t n, float *out)
{
    size_t k = dl_topk_count(s, n);
    const uint32_t *idx = in;
    const float *val = (const float *)(idx + k);
    for (size_t i = 0; i < k; i++)
        out[idx[i]] += val[i];
}

const struct dl_codec_ops dl_codec_topk = {
    .name = "topk",
    .sparse = 1,
    .encoded_bytes = bytes_topk,
    .encode = encode_topk,
    .decode_add = decode_add_topk,
};

/* ---- the sparse exchange ---- */

/* A partial sum: sorted (index, value) pairs, or dense when dense != NULL. */
struct tk_set {
    size_t nnz;
    uint32_t *idx;
    float *val;
    float *dense;
};

struct tk {
    struct dl_comm *c;
    size_t n, cap;      /* a set of more than cap = n/2 pairs goes dense */
    struct tk_set cur, in;
    uint32_t *oidx;     /* merge output, cap + 1 */
    float *oval;
    struct dl_codec_stats *stats;
};

#define TK_DENSE ((uint64_t)-1)

static int to_dense(struct tk *t, struct tk_set *s, struct dl_error *err)
{
    if (s->dense)
        return DL_OK;
    s->dense = dl_calloc(t->n, sizeof *s->dense, err);
    if (!s->dense)
        return DL_ERR_NOMEM;
    for (size_t i = 0; i < s->nnz; i++)
        s->dense[s->idx[i]] = s->val[i];
    return DL_OK;
}

/* cur += in.  The union of two sorted sets, or dense past cap pairs. */
static int merge(struct tk *t, struct dl_error *err)
{
    struct tk_set *a = &t->cur, *b = &t->in;
    if (!a->dense && !b->dense) {
        size_t i = 0, j = 0, m = 0;
        while ((i < a->nnz || j < b->nnz) && m <= t->cap) {
            if (j >= b->nnz || (i < a->nnz && a->idx[i] < b->idx[j])) {
                t->oidx[m] = a->idx[i], t->oval[m++] = a->val[i++];
            } else if (i >= a->nnz || b->idx[j] < a->idx[i]) {
                t->oidx[m] = b->idx[j], t->oval[m++] = b->val[j++];
            } else {
                t->oidx[m] = a->idx[i], t->oval[m++] = a->val[i++] + b->val[j++];
            }
        }
        if (m <= t->cap) {
            memcpy(a->idx, t->oidx, m * sizeof *a->idx);
            memcpy(a->val, t->oval, m * sizeof *a->val);
            a->nnz = m;
            return DL_OK;
        }
    }
    int rc = to_dense(t, a, err);
    if (rc != DL_OK)
        return rc;
    if (b->dense) {
        dl_reduce_add(a->dense, b->dense, t->n);
    } else {
        for (size_t i = 0; i < b->nnz; i++)
            a->dense[b->idx[i]] += b->val[i];
    }
    return DL_OK;
}

static int send_set(struct tk *t, int peer, struct dl_error *err)
{
    struct dl_comm *c = t->c;
    uint64_t hdr = t->cur.dense ? TK_DENSE : t->cur.nnz;
    int rc = c->ops->send(c, &hdr, sizeof hdr, peer, DL_TAG_TOPK_HEADER, err);
    t->stats->bytes_sent += sizeof hdr;
    if (rc == DL_OK && t->cur.dense) {
        t->stats->bytes_sent += t->n * sizeof *t->cur.dense;
        return c->ops->send(c, t->cur.dense, t->n * sizeof *t->cur.dense, peer, DL_TAG_TOPK_DENSE, err);
    }
    if (rc == DL_OK)
        rc = c->ops->send(c, t->cur.idx, t->cur.nnz * sizeof(uint32_t), peer, DL_TAG_TOPK_INDICES, err);
    if (rc == DL_OK)
        rc = c->ops->send(c, t->cur.val, t->cur.nnz * sizeof *t->cur.val, peer, DL_TAG_TOPK_VALUES, err);
    t->stats->bytes_sent += t->cur.nnz * (sizeof(uint32_t) + dl_dtype_size(DL_F32));
    return rc;
}

/* Receives a set into t->in (or into cur when into_cur: the final result). */
static int recv_set(struct tk *t, int peer, int into_cur, struct dl_error *err)
{
    struct dl_comm *c = t->c;
    struct tk_set *s = into_cur ? &t->cur : &t->in;
    uint64_t hdr;
    int rc = c->ops->recv(c, &hdr, sizeof hdr, peer, DL_TAG_TOPK_HEADER, err);
    if (rc != DL_OK)
        return rc;
    if (hdr == TK_DENSE) {
        if ((rc = to_dense(t, s, err)) != DL_OK)
            return rc;
        return c->ops->recv(c, s->dense, t->n * sizeof *s->dense, peer, DL_TAG_TOPK_DENSE, err);
    }
    if (hdr > t->cap)
        return dl_errorf(err, DL_ERR_COMM, "top-k: peer %d sent %llu pairs (at most %zu)", peer,
                         (unsigned long long)hdr, t->cap);
    free(s->dense); /* a dense set received in an earlier round is stale */
    s->dense = NULL;
    s->nnz = (size_t)hdr;
    rc = c->ops->recv(c, s->idx, s->nnz * sizeof(uint32_t), peer, DL_TAG_TOPK_INDICES, err);
    return rc == DL_OK ? c->ops->recv(c, s->val, s->nnz * sizeof *s->val, peer, DL_TAG_TOPK_VALUES, err) : rc;
}

/* One round with a partner: the lower rank sends first, so blocking calls
 * cannot deadlock whatever the sizes. */
static int swap_merge(struct tk *t, int peer, struct dl_error *err)
{
    int rc;
    if (t->c->rank < peer) {
        rc = send_set(t, peer, err);
        rc = rc == DL_OK ? recv_set(t, peer, 0, err) : rc;
    } else {
        rc = recv_set(t, peer, 0, err);
        rc = rc == DL_OK ? send_set(t, peer, err) : rc;
    }
    return rc == DL_OK ? merge(t, err) : rc;
}

static int exchange(struct tk *t, struct dl_error *err)
{
    struct dl_comm *c = t->c;
    int r = c->rank, p = c->size, p2 = 1, rc = DL_OK;
    while (p2 * 2 <= p)
        p2 *= 2;
    int rem = p - p2;
    /* Fold the extra ranks in (as dl_pow2_run does, but for sets). */
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            rc = send_set(t, r + 1, err);
            return rc == DL_OK ? recv_set(t, r + 1, 1, err) : rc;
        }
        rc = recv_set(t, r - 1, 0, err);
        rc = rc == DL_OK ? merge(t, err) : rc;
    }
    int v = r < 2 * rem ? r / 2 : r - rem;
    for (int mask = 1; mask < p2 && rc == DL_OK; mask <<= 1)
        rc = swap_merge(t, dl_pow2_real(v ^ mask, p), err);
    if (rc == DL_OK && r < 2 * rem)
        rc = send_set(t, r - 1, err);
    return rc;
}

int dl_topk_allreduce(struct dl_comm *c, const struct dl_codec_spec *spec, float *v, size_t n,
                      float *residual, struct dl_codec_stats *stats, struct dl_error *err)
{
    if (n > UINT32_MAX)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "top-k: %zu floats exceed 32-bit indices", n);
    size_t k = dl_topk_count(spec, n);
    struct tk t = {.c = c, .n = n, .stats = stats};
    t.cap = n / 2;
    /* cur, in and the merge output: room pairs each; work: n floats */
    size_t room = (k > t.cap ? k : t.cap) + 1, pairs = 3 * room;
    unsigned char *w = dl_calloc(pairs * 8 + n * dl_dtype_size(DL_F32), 1, err);
    if (!w)
        return DL_ERR_NOMEM;
    uint32_t *ib = (uint32_t *)w;
    float *fb = (float *)(ib + pairs), *work = fb + pairs;
    t.cur.idx = ib, t.cur.val = fb;
    t.in.idx = ib + room, t.in.val = fb + room;
    t.oidx = ib + 2 * room, t.oval = fb + 2 * room;
    dl_topk_select(v, n, k, t.cur.idx, work);
    t.cur.nnz = k;
    memcpy(residual, v, n * sizeof *v);
    for (size_t i = 0; i < k; i++) {
        t.cur.val[i] = v[t.cur.idx[i]];
        residual[t.cur.idx[i]] = 0;
    }
    /* More than half kept: dense from the start. */
    int rc = k > t.cap ? to_dense(&t, &t.cur, err) : DL_OK;
    if (rc == DL_OK)
        rc = exchange(&t, err);
    if (rc == DL_OK) {
        stats->went_dense = t.cur.dense != NULL;
        if (t.cur.dense) {
            memcpy(v, t.cur.dense, n * sizeof *v);
        } else {
            memset(v, 0, n * sizeof *v);
            for (size_t i = 0; i < t.cur.nnz; i++)
                v[t.cur.idx[i]] = t.cur.val[i];
        }
    }
    free(t.cur.dense);
    free(t.in.dense);
    free(w);
    return rc;
}
