/* allreduce_util.c: pieces the allreduce algorithms share: the local sum, the
 * segmented exchange that overlaps adding with receiving, and the standard
 * fix-up that lets power-of-two algorithms run on any number of ranks. */
#include "comm/allreduce.h"

#include <stdlib.h>

/* Vectorized (the simd pragma: at -O2 GCC leaves a loop that needs a scalar
 * tail unvectorized) for AVX2 and the baseline, picked at load time; a
 * static clone behind a plain function, because clang exports a public
 * target_clones function only as NAME.ifunc, which other files cannot call. */
__attribute__((target_clones("avx2", "default"))) static void reduce_add(float *restrict dst,
                                                                        const float *restrict src, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

void dl_reduce_add(float *restrict dst, const float *restrict src, size_t n)
{
    reduce_add(dst, src, n);
}

size_t dl_segment_floats(const struct dl_allreduce_opts *opts)
{
    size_t bytes = opts && opts->segment_bytes ? opts->segment_bytes : DL_ALLREDUCE_SEGMENT;
    size_t f = bytes / dl_dtype_size(DL_F32);
    return f ? f : 1;
}

static size_t nseg(size_t n, size_t seg)
{
    return (n + seg - 1) / seg;
}

int dl_exchange_add(struct dl_comm *c, int peer, const float *s, size_t sn, float *d, size_t rn,
                    float *tmp, size_t seg, int tag, struct dl_error *err)
{
    size_t ns = nseg(sn, seg), nr = nseg(rn, seg);
    struct dl_comm_req *req = dl_calloc(ns + nr, sizeof *req, err);
    if (!req)
        return DL_ERR_NOMEM;
    struct dl_comm_req *sreq = req, *rreq = req + ns;
    int rc = DL_OK;
    for (size_t j = 0; j < nr && rc == DL_OK; j++) {
        size_t lo = j * seg, len = rn - lo < seg ? rn - lo : seg;
        rc = c->ops->irecv(c, tmp + lo, len * sizeof *tmp, peer, tag, &rreq[j], err);
    }
    for (size_t j = 0; j < ns && rc == DL_OK; j++) {
        size_t lo = j * seg, len = sn - lo < seg ? sn - lo : seg;
        rc = c->ops->isend(c, s + lo, len * sizeof *s, peer, tag, &sreq[j], err);
    }
    for (size_t j = 0; j < nr && rc == DL_OK; j++) {
        size_t lo = j * seg, len = rn - lo < seg ? rn - lo : seg;
        rc = c->ops->wait(c, &rreq[j], err);
        if (rc == DL_OK)
            dl_reduce_add(d + lo, tmp + lo, len);
    }
    int rc2 = dl_comm_waitall(c, req, (int)(ns + nr), rc == DL_OK ? err : NULL);
    free(req);
    return rc != DL_OK ? rc : rc2;
}

static int largest_pow2(int p)
{
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    return p2;
}

int dl_pow2_run(struct dl_comm *c, float *buf, size_t n, const struct dl_allreduce_opts *opts,
                dl_pow2_core core, struct dl_error *err)
{
    int r = c->rank, p = c->size, p2 = largest_pow2(p), rem = p - p2, rc = DL_OK;
    if (p == 1 || n == 0)
        return DL_OK;
    if (p > DL_TAG_MAX_RANKS)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "%d ranks: the allreduce algorithms' message tags are laid out "
                         "for at most %d (comm/tags.h); use --allreduce tree, ps or native", p, DL_TAG_MAX_RANKS);
    float *tmp = dl_comm_scratch(c, n * sizeof *tmp, err);
    if (!tmp)
        return DL_ERR_NOMEM;
    size_t bytes = n * sizeof *buf;
    if (r < 2 * rem && r % 2 == 0) { /* sits out */
        rc = c->ops->send(c, buf, bytes, r + 1, DL_TAG_POW2_FOLD, err);
        return rc == DL_OK ? c->ops->recv(c, buf, bytes, r + 1, DL_TAG_POW2_UNFOLD, err) : rc;
    }
    if (r < 2 * rem) {
        rc = c->ops->recv(c, tmp, bytes, r - 1, DL_TAG_POW2_FOLD, err);
        if (rc != DL_OK)
            return rc;
        dl_reduce_add(buf, tmp, n);
    }
    rc = core(c, buf, n, tmp, r < 2 * rem ? r / 2 : r - rem, p2, opts, err);
    if (rc == DL_OK && r < 2 * rem)
        rc = c->ops->send(c, buf, bytes, r - 1, DL_TAG_POW2_UNFOLD, err);
    return rc;
}

int dl_pow2_real(int v, int p)
{
    int rem = p - largest_pow2(p);
    return v < rem ? 2 * v + 1 : v + rem;
}

size_t dl_allreduce_ring_bytes(int p, size_t n)
{
    return p > 1 ? (size_t)(2.0 * (p - 1) / p * dl_dtype_size(DL_F32) * (double)n) : 0;
}
