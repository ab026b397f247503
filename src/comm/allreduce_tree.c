/* allreduce_tree.c: binomial tree reduce to rank 0, then binomial tree
 * broadcast back.  2 lg p rounds of the whole vector: cheap in messages,
 * expensive in bytes; the classic choice for short vectors.  Children's
 * vectors are received in segments and added as they arrive. */
#include "comm/allreduce.h"

int dl_allreduce_tree(struct dl_comm *c, float *buf, size_t n,
                      const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    int r = c->rank, p = c->size, rc = DL_OK;
    if (p == 1 || n == 0)
        return DL_OK;
    float *tmp = dl_comm_scratch(c, n * sizeof *tmp, err);
    if (!tmp)
        return DL_ERR_NOMEM;
    size_t seg = dl_segment_floats(opts);
    /* Reduce: in round k a rank with bit k set sends its partial sum to the
     * rank without it, and is done. */
    int mask = 1;
    for (; mask < p && rc == DL_OK; mask <<= 1) {
        if (r & mask) {
            /* in the same segments as the parent receives them */
            rc = dl_exchange_add(c, r - mask, buf, n, NULL, 0, NULL, seg, DL_TAG_TREE_REDUCE, err);
            break;
        }
        if (r + mask < p)
            rc = dl_exchange_add(c, r + mask, NULL, 0, buf, n, tmp, seg, DL_TAG_TREE_REDUCE, err);
    }
    /* Broadcast: the same tree walked back from the root; a rank receives
     * from its parent (the round where it sent) and forwards to children. */
    if (rc == DL_OK && r != 0)
        rc = c->ops->recv(c, buf, n * sizeof *buf, r - mask, DL_TAG_TREE_BCAST, err);
    for (mask >>= 1; mask > 0 && rc == DL_OK; mask >>= 1)
        if (r + mask < p)
            rc = c->ops->send(c, buf, n * sizeof *buf, r + mask, DL_TAG_TREE_BCAST, err);
    return rc;
}
