/* allreduce_ps.c: parameter server as an allreduce.  The vector is cut into
 * K shards held by server ranks 0..K-1 (servers are workers too: with K = p
 * this is the sharded parameter server).  Every rank sends shard s to server
 * s; the server adds what arrives (in rank order, so all ranks end with the
 * same bits) and sends the sum of its shard back to every rank. */
#include "comm/allreduce.h"

#include <stdlib.h>

int dl_allreduce_ps(struct dl_comm *c, float *buf, size_t n,
                    const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    int r = c->rank, p = c->size, rc = DL_OK;
    if (p == 1 || n == 0)
        return DL_OK;
    int k = opts && opts->ps_servers > 0 && opts->ps_servers < p ? opts->ps_servers : p;
    size_t mylo = r < k ? dl_block_lo(n, k, r) : 0;
    size_t mylen = r < k ? dl_block_lo(n, k, r + 1) - mylo : 0;
    float *tmp = dl_comm_scratch(c, (size_t)(p - 1) * mylen * sizeof *tmp + 1, err);
    struct dl_comm_req *req = tmp ? dl_calloc((size_t)(p + k), sizeof *req, err) : NULL;
    if (!req)
        return DL_ERR_NOMEM;
    /* Push: the server posts one receive per other rank, then all send. */
    for (int q = 0, slot = 0; q < p && r < k && rc == DL_OK; q++)
        if (q != r)
            rc = c->ops->irecv(c, tmp + (size_t)slot++ * mylen, mylen * sizeof *tmp, q, DL_TAG_PS_ALLREDUCE_PUSH,
                               &req[q], err);
    for (int s = 0; s < k && rc == DL_OK; s++) {
        size_t lo = dl_block_lo(n, k, s), hi = dl_block_lo(n, k, s + 1);
        if (s != r)
            rc = c->ops->isend(c, buf + lo, (hi - lo) * sizeof *buf, s, DL_TAG_PS_ALLREDUCE_PUSH, &req[p + s],
                               err);
    }
    for (int q = 0, slot = 0; q < p && r < k && rc == DL_OK; q++) {
        if (q == r)
            continue;
        rc = c->ops->wait(c, &req[q], err);
        if (rc == DL_OK)
            dl_reduce_add(buf + mylo, tmp + (size_t)slot++ * mylen, mylen);
    }
    if (rc == DL_OK)
        rc = dl_comm_waitall(c, req + p, k, err);
    /* Pull: every rank receives each shard it does not serve from its server. */
    for (int s = 0; s < k && rc == DL_OK; s++) {
        size_t lo = dl_block_lo(n, k, s), hi = dl_block_lo(n, k, s + 1);
        if (s != r)
            rc = c->ops->irecv(c, buf + lo, (hi - lo) * sizeof *buf, s, DL_TAG_PS_ALLREDUCE_PULL, &req[p + s],
                               err);
    }
    for (int q = 0; q < p && r < k && rc == DL_OK; q++)
        if (q != r)
            rc = c->ops->isend(c, buf + mylo, mylen * sizeof *buf, q, DL_TAG_PS_ALLREDUCE_PULL, &req[q], err);
    int rc2 = dl_comm_waitall(c, req, p + k, rc == DL_OK ? err : NULL);
    free(req);
    return rc != DL_OK ? rc : rc2;
}
