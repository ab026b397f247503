/* allreduce_bf16.c: a bf16 allreduce with bf16 on the wire (allreduce.h):
 * a direct reduce-scatter of bf16 blocks to their owners, each block's p
 * contributions summed in f32 in rank order and rounded once there, then
 * an allgather of the rounded blocks.  Blocks are the same size (the last
 * padded) so the allgather is the backend's. */
#include "comm/allreduce.h"

#include <stdlib.h>
#include <string.h>

int dl_allreduce_bf16_wire(struct dl_comm *c, dl_bf16 *buf, size_t n, size_t *bytes_sent, struct dl_error *err)
{
    int p = c->size, r = c->rank;
    if (bytes_sent)
        *bytes_sent = 0;
    if (p == 1 || n == 0)
        return DL_OK;
    size_t blk = (n + (size_t)p - 1) / (size_t)p, pad = blk * (size_t)p;
    /* every rank's contribution to this rank's block, then the padded vector */
    dl_bf16 *mine = dl_comm_scratch(c, 2 * (blk * (size_t)p + pad), err);
    if (!mine)
        return DL_ERR_NOMEM;
    dl_bf16 *whole = mine + blk * (size_t)p;
    memset(whole, 0, 2 * pad);
    memcpy(whole, buf, 2 * n);
    struct dl_comm_req *req = calloc(2 * (size_t)p, sizeof *req);
    if (!req)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory (%d requests)", 2 * p);
    int rc = DL_OK;
    for (int q = 0; rc == DL_OK && q < p; q++) {
        if (q == r)
            continue;
        rc = c->ops->irecv(c, mine + blk * (size_t)q, 2 * blk, q, DL_TAG_BF16_SCATTER, &req[q], err);
        if (rc == DL_OK)
            rc = c->ops->isend(c, whole + blk * (size_t)q, 2 * blk, q, DL_TAG_BF16_SCATTER, &req[p + q], err);
    }
    int rc2 = dl_comm_waitall(c, req, 2 * p, rc == DL_OK ? err : NULL);
    free(req);
    rc = rc != DL_OK ? rc : rc2;
    if (rc != DL_OK)
        return rc;
    memcpy(mine + blk * (size_t)r, whole + blk * (size_t)r, 2 * blk);
    for (size_t i = 0; i < blk; i++) { /* rank order, in f32, rounded once */
        float sum = 0;
        for (int q = 0; q < p; q++)
            sum += dl_bf16_to_f32(mine[blk * (size_t)q + i]);
        mine[i] = dl_f32_to_bf16(sum);
    }
    rc = c->ops->allgather(c, mine, whole, 2 * blk, err);
    if (rc == DL_OK)
        memcpy(buf, whole, 2 * n);
    if (bytes_sent)
        *bytes_sent = 2 * 2 * blk * (size_t)(p - 1);
    return rc;
}
