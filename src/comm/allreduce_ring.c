/* allreduce_ring.c: ring allreduce = ring reduce-scatter + ring allgather
 * (Patarasuk & Yuan 2009; what Baidu and Horovod made popular for gradients).
 * Each of the p-1 steps of each phase moves one block of n/p floats to the
 * right neighbour.  Blocks travel in segments, and a segment is forwarded as
 * soon as it has arrived (and been added), so steps overlap each other. */
#include "comm/allreduce.h"

#include <stdlib.h>

struct ring {
    struct dl_comm *c;
    float *buf;
    size_t n, seg, maxseg; /* segment length; most segments in one block */
    int left, right;
    int tagbase;           /* step s sends with tagbase + s: DL_TAG_RING, then DL_TAG_RING + p */
    float *tmp;            /* reduce-scatter: two block-sized receive areas; else NULL */
    size_t tmp_stride;     /* floats per receive area */
    struct dl_comm_req *rreq[2], *sreq[2]; /* per step parity, maxseg each */
};

static size_t block_len(const struct ring *g, int b)
{
    int p = g->c->size;
    return dl_block_lo(g->n, p, b + 1) - dl_block_lo(g->n, p, b);
}

static int mod(int a, int p)
{
    return ((a % p) + p) % p;
}

static size_t seg_len(const struct ring *g, size_t blen, size_t j)
{
    size_t lo = j * g->seg;
    return blen - lo < g->seg ? blen - lo : g->seg;
}

static size_t nsegs(const struct ring *g, size_t blen)
{
    return (blen + g->seg - 1) / g->seg;
}

/* Where segment j of the step's incoming block lands. */
static float *recv_dst(const struct ring *g, int step, int b, size_t j)
{
    if (g->tmp)
        return g->tmp + (size_t)(step % 2) * g->tmp_stride + j * g->seg;
    return g->buf + dl_block_lo(g->n, g->c->size, b) + j * g->seg;
}

static int post_recvs(struct ring *g, int step, int b, struct dl_error *err)
{
    size_t blen = block_len(g, b);
    for (size_t j = 0; j < nsegs(g, blen); j++) {
        int rc = g->c->ops->irecv(g->c, recv_dst(g, step, b, j),
                                  seg_len(g, blen, j) * sizeof *g->buf, g->left, g->tagbase + step,
                                  &g->rreq[step % 2][j], err);
        if (rc != DL_OK)
            return rc;
    }
    return DL_OK;
}

static int send_seg(struct ring *g, int step, int b, size_t j, struct dl_error *err)
{
    size_t blen = block_len(g, b);
    const float *src = g->buf + dl_block_lo(g->n, g->c->size, b) + j * g->seg;
    return g->c->ops->isend(g->c, src, seg_len(g, blen, j) * sizeof *src, g->right, g->tagbase + step,
                            &g->sreq[step % 2][j], err);
}

/* One phase: at step s this rank sends block a-s and receives block a-s-1
 * (adding it in when g->tmp is set).  Reduce-scatter uses a = rank, the
 * allgather a = rank+1. */
static int ring_phase(struct ring *g, int a, struct dl_error *err)
{
    int p = g->c->size, steps = p - 1, rc = DL_OK;
    rc = post_recvs(g, 0, mod(a - 1, p), err);
    if (rc == DL_OK && steps > 1)
        rc = post_recvs(g, 1, mod(a - 2, p), err);
    int b0 = mod(a, p);
    for (size_t j = 0; rc == DL_OK && j < nsegs(g, block_len(g, b0)); j++)
        rc = send_seg(g, 0, b0, j, err);
    for (int s = 0; s < steps && rc == DL_OK; s++) {
        int b = mod(a - s - 1, p);
        size_t blen = block_len(g, b);
        /* The send slot that step s+1 will use still holds step s-1's sends. */
        rc = dl_comm_waitall(g->c, g->sreq[(s + 1) % 2], (int)g->maxseg, err);
        for (size_t j = 0; j < nsegs(g, blen) && rc == DL_OK; j++) {
            rc = g->c->ops->wait(g->c, &g->rreq[s % 2][j], err);
            if (rc == DL_OK && g->tmp)
                dl_reduce_add(g->buf + dl_block_lo(g->n, p, b) + j * g->seg,
                              recv_dst(g, s, b, j), seg_len(g, blen, j));
            if (rc == DL_OK && s + 1 < steps)
                rc = send_seg(g, s + 1, b, j, err);
        }
        if (rc == DL_OK && s + 2 < steps)
            rc = post_recvs(g, s + 2, mod(a - s - 3, p), err);
    }
    int rc2 = DL_OK;
    for (int k = 0; k < 2; k++) {
        int r1 = dl_comm_waitall(g->c, g->sreq[k], (int)g->maxseg, rc == DL_OK ? err : NULL);
        int r2 = dl_comm_waitall(g->c, g->rreq[k], (int)g->maxseg, rc == DL_OK ? err : NULL);
        if (rc2 == DL_OK)
            rc2 = r1 != DL_OK ? r1 : r2;
    }
    return rc != DL_OK ? rc : rc2;
}

int dl_allreduce_ring(struct dl_comm *c, float *buf, size_t n,
                      const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    int p = c->size;
    if (p == 1 || n == 0)
        return DL_OK;
    if (p > DL_TAG_MAX_RANKS)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "%d ranks: the ring's message tags are laid out for at most %d "
                         "(comm/tags.h); use --allreduce tree, ps or native", p, DL_TAG_MAX_RANKS);
    struct ring g = {.c = c, .buf = buf, .n = n, .seg = dl_segment_floats(opts), .tagbase = DL_TAG_RING};
    g.left = mod(c->rank - 1, p);
    g.right = mod(c->rank + 1, p);
    size_t maxblock = block_len(&g, 0);
    g.maxseg = nsegs(&g, maxblock);
    if (g.maxseg == 0)
        g.maxseg = 1;
    struct dl_comm_req *reqs = dl_calloc(4 * g.maxseg, sizeof *reqs, err);
    if (!reqs)
        return DL_ERR_NOMEM;
    for (int k = 0; k < 2; k++) {
        g.rreq[k] = reqs + (size_t)k * g.maxseg;
        g.sreq[k] = reqs + (size_t)(2 + k) * g.maxseg;
    }
    g.tmp_stride = maxblock;
    g.tmp = dl_comm_scratch(c, 2 * maxblock * sizeof *g.tmp, err);
    int rc = g.tmp ? ring_phase(&g, c->rank, err) : DL_ERR_NOMEM;
    if (rc == DL_OK) {
        g.tmp = NULL;
        g.tagbase = DL_TAG_RING + p;
        rc = ring_phase(&g, c->rank + 1, err);
    }
    free(reqs);
    return rc;
}
