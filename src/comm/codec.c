/* codec.c: what all gradient codecs share: parsing of --compress, the
 * per-bucket state with error feedback, bit packing, and the compressed
 * allreduce for dense codecs (reduce-scatter of encoded blocks, sum, encode
 * again, allgather), which sends 2(p-1)/p of one encoding per rank, the same
 * share of the vector as the fp32 ring. */
#include "comm/codec.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "core/parse.h"

struct dl_codec_state {
    struct dl_codec_spec spec;
    size_t n;
    float *residual;        /* worker error feedback: n floats */
    float *server_residual; /* error feedback of the block this rank sums: n floats */
    struct dl_rng rng;
};

int dl_codec_parse(const char *text, struct dl_codec_spec *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!text)
        text = "none";
    snprintf(out->text, sizeof out->text, "%s", text);
    if (strcmp(text, "none") == 0)
        return DL_OK;
    if (strcmp(text, "1bit") == 0) {
        out->ops = &dl_codec_1bit;
        return DL_OK;
    }
    const char *arg = strchr(text, ':');
    struct dl_error detail; /* the messages below say more */
    if (arg && strncmp(text, "qsgd:", 5) == 0) {
        if (dl_parse_int("--compress qsgd:BITS", arg + 1, 2, 16, &out->bits, &detail))
            return dl_errorf(err, DL_ERR_SPEC,
                             "--compress %s: QSGD needs a whole number of bits per element"
                             " from 2 to 16 (sign included), e.g. qsgd:4", text);
        out->ops = &dl_codec_qsgd;
        return DL_OK;
    }
    if (arg && strncmp(text, "topk:", 5) == 0) {
        size_t len = strlen(arg + 1);
        int percent = len > 0 && arg[len] == '%';
        char number[64];
        snprintf(number, sizeof number, "%.*s", (int)(len - (size_t)percent), arg + 1);
        double f = 0;
        if (len >= sizeof number ||
            dl_parse_double("--compress topk:FRACTION", number, 0, percent ? 100 : 1, &f, &detail) || !(f > 0))
            return dl_errorf(err, DL_ERR_SPEC,
                             "--compress %s: top-k needs the share of elements kept, a number"
                             " in (0, 1] or a percentage, e.g. topk:0.01 or topk:1%%", text);
        out->ops = &dl_codec_topk;
        out->fraction = percent ? f / 100 : f;
        return DL_OK;
    }
    return dl_errorf(err, DL_ERR_SPEC,
                     "--compress %s: unknown compression (expected none, 1bit, qsgd:BITS or"
                     " topk:FRACTION)", text);
}

int dl_codec_state_create(const struct dl_codec_spec *spec, size_t n, uint64_t seed,
                          struct dl_codec_state **out, struct dl_error *err)
{
    *out = NULL;
    struct dl_codec_state *st = dl_calloc(1, sizeof *st, err);
    if (!st)
        return DL_ERR_NOMEM;
    st->spec = *spec;
    st->n = n;
    st->residual = dl_calloc(n, sizeof *st->residual, err);
    st->server_residual = st->residual ? dl_calloc(n, sizeof *st->server_residual, err) : NULL;
    if (!st->server_residual) {
        dl_codec_state_free(st);
        return DL_ERR_NOMEM;
    }
    dl_rng_seed(&st->rng, seed);
    *out = st;
    return DL_OK;
}

void dl_codec_state_free(struct dl_codec_state *st)
{
    if (!st)
        return;
    free(st->residual);
    free(st->server_residual);
    free(st);
}

const float *dl_codec_residual(const struct dl_codec_state *st)
{
    return st->residual;
}

const float *dl_codec_server_residual(const struct dl_codec_state *st)
{
    return st->server_residual;
}

void dl_bits_put(unsigned char *out, size_t i, int bits, uint32_t code)
{
    size_t bit = i * (size_t)bits;
    for (int b = 0; b < bits; b++, bit++) {
        unsigned char m = (unsigned char)(1u << (bit % 8));
        if (code >> b & 1u)
            out[bit / 8] |= m;
        else
            out[bit / 8] &= (unsigned char)~m;
    }
}

uint32_t dl_bits_get(const unsigned char *in, size_t i, int bits)
{
    size_t bit = i * (size_t)bits;
    uint32_t code = 0;
    for (int b = 0; b < bits; b++, bit++)
        code |= (uint32_t)(in[bit / 8] >> (bit % 8) & 1u) << b;
    return code;
}

/* Encodes v into out and replaces v by what was lost (v - decode(out)). */
static void encode_with_feedback(struct dl_codec_state *st, float *v, size_t n, void *out)
{
    const struct dl_codec_ops *ops = st->spec.ops;
    ops->encode(&st->spec, v, n, out, &st->rng);
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = -v[i];
    ops->decode_add(&st->spec, out, n, v);
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = -v[i];
}

/* Encoded size and offset in the payload area of block b. */
static size_t block_bytes(const struct dl_codec_state *st, int p, int b)
{
    size_t len = dl_block_lo(st->n, p, b + 1) - dl_block_lo(st->n, p, b);
    return (st->spec.ops->encoded_bytes(&st->spec, len) + 7) / 8 * 8;
}

static size_t block_offset(const struct dl_codec_state *st, int p, int b)
{
    size_t off = 0;
    for (int q = 0; q < b; q++)
        off += block_bytes(st, p, q);
    return off;
}

/* Reduce-scatter of encoded blocks: block q of v goes to rank q; this rank
 * decodes and sums the p encodings of its own block into sum. */
static int scatter_encoded(struct dl_comm *c, struct dl_codec_state *st, float *v,
                           unsigned char *mine, unsigned char *theirs, float *sum,
                           size_t *sent, struct dl_error *err)
{
    int p = c->size, r = c->rank, rc = DL_OK;
    size_t rb = block_bytes(st, p, r);
    size_t rlo = dl_block_lo(st->n, p, r), rlen = dl_block_lo(st->n, p, r + 1) - rlo;
    for (int q = 0; q < p; q++) {
        size_t lo = dl_block_lo(st->n, p, q), len = dl_block_lo(st->n, p, q + 1) - lo;
        encode_with_feedback(st, v + lo, len, mine + block_offset(st, p, q));
    }
    struct dl_comm_req *req = dl_calloc(2 * (size_t)p, sizeof *req, err);
    if (!req)
        return DL_ERR_NOMEM;
    for (int q = 0; q < p && rc == DL_OK; q++)
        if (q != r)
            rc = c->ops->irecv(c, theirs + (size_t)q * rb, rb, q, DL_TAG_CODEC_SCATTER, &req[q], err);
    for (int q = 0; q < p && rc == DL_OK; q++)
        if (q != r) {
            size_t b = block_bytes(st, p, q);
            rc = c->ops->isend(c, mine + block_offset(st, p, q), b, q, DL_TAG_CODEC_SCATTER, &req[p + q],
                               err);
            *sent += b;
        }
    memset(sum, 0, rlen * sizeof *sum);
    st->spec.ops->decode_add(&st->spec, mine + block_offset(st, p, r), rlen, sum);
    for (int q = 0; q < p && rc == DL_OK; q++) {
        if (q == r)
            continue;
        rc = c->ops->wait(c, &req[q], err);
        if (rc == DL_OK)
            st->spec.ops->decode_add(&st->spec, theirs + (size_t)q * rb, rlen, sum);
    }
    int rc2 = dl_comm_waitall(c, req, 2 * p, rc == DL_OK ? err : NULL);
    free(req);
    return rc != DL_OK ? rc : rc2;
}

/* Allgather of the encoded sums: rank q's block comes from rank q. */
static int gather_encoded(struct dl_comm *c, struct dl_codec_state *st, unsigned char *all,
                          float *buf, size_t *sent, struct dl_error *err)
{
    int p = c->size, r = c->rank, rc = DL_OK;
    struct dl_comm_req *req = dl_calloc(2 * (size_t)p, sizeof *req, err);
    if (!req)
        return DL_ERR_NOMEM;
    size_t rb = block_bytes(st, p, r);
    unsigned char *own = all + block_offset(st, p, r);
    for (int q = 0; q < p && rc == DL_OK; q++)
        if (q != r)
            rc = c->ops->irecv(c, all + block_offset(st, p, q), block_bytes(st, p, q), q,
                               DL_TAG_CODEC_GATHER, &req[q], err);
    for (int q = 0; q < p && rc == DL_OK; q++)
        if (q != r) {
            rc = c->ops->isend(c, own, rb, q, DL_TAG_CODEC_GATHER, &req[p + q], err);
            *sent += rb;
        }
    rc = rc == DL_OK ? dl_comm_waitall(c, req, 2 * p, err) : rc;
    free(req);
    if (rc != DL_OK)
        return rc;
    memset(buf, 0, st->n * sizeof *buf);
    for (int q = 0; q < p; q++) {
        size_t lo = dl_block_lo(st->n, p, q), len = dl_block_lo(st->n, p, q + 1) - lo;
        st->spec.ops->decode_add(&st->spec, all + block_offset(st, p, q), len, buf + lo);
    }
    return DL_OK;
}

static int dense_allreduce(struct dl_comm *c, struct dl_codec_state *st, float *buf,
                           size_t *sent, struct dl_error *err)
{
    int p = c->size, r = c->rank;
    size_t n = st->n, total = block_offset(st, p, p), rb = block_bytes(st, p, r);
    size_t rlo = dl_block_lo(n, p, r), rlen = dl_block_lo(n, p, r + 1) - rlo;
    /* v (n floats) | sum (rlen) | own encodings (total) | received (p * rb) */
    size_t fbytes = (n + rlen) * dl_dtype_size(DL_F32);
    unsigned char *w = dl_calloc(fbytes + total + (size_t)p * rb + 64, 1, err);
    if (!w)
        return DL_ERR_NOMEM;
    float *v = (float *)w, *sum = v + n;
    unsigned char *mine = w + (fbytes + 7) / 8 * 8, *theirs = mine + total;
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        v[i] = buf[i] + st->residual[i];
    int rc = scatter_encoded(c, st, v, mine, theirs, sum, sent, err);
    memcpy(st->residual, v, n * sizeof *v); /* v now holds what phase one lost */
    if (rc == DL_OK) {
        float *srv = st->server_residual + rlo;
        for (size_t i = 0; i < rlen; i++)
            srv[i] += sum[i];
        encode_with_feedback(st, srv, rlen, mine + block_offset(st, p, r));
        rc = gather_encoded(c, st, mine, buf, sent, err);
    }
    free(w);
    return rc;
}

int dl_compressed_allreduce(struct dl_comm *c, struct dl_codec_state *st, float *buf, size_t n,
                            struct dl_codec_stats *stats, struct dl_error *err)
{
    struct dl_codec_stats local = {0};
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    if (n != st->n)
        return dl_errorf(err, DL_ERR_INTERNAL,
                         "compressed allreduce of %zu floats with a codec state made for %zu",
                         n, st->n);
    int p = c->size;
    stats->dense_bytes = p > 1 ? (size_t)(2.0 * (p - 1) / p * 4.0 * (double)n) : 0;
    if (!st->spec.ops) {
        stats->bytes_sent = stats->dense_bytes;
        return dl_allreduce_ring(c, buf, n, NULL, err);
    }
    if (st->spec.ops->sparse) {
        #pragma omp simd
        for (size_t i = 0; i < n; i++)
            buf[i] += st->residual[i];
        return dl_topk_allreduce(c, &st->spec, buf, n, st->residual, stats, err);
    }
    return dense_allreduce(c, st, buf, &stats->bytes_sent, err);
}
