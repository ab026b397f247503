/* allreduce_recursive_doubling.c: the butterfly.  In round k every rank
 * swaps its whole vector with the rank whose number differs in bit k and adds;
 * after lg p rounds all hold the sum.  Few messages (good for small vectors),
 * but n floats per round (poor for large ones).  Rank counts that are not a
 * power of two fold the extra ranks in first and out again at the end. */
#include "comm/allreduce.h"

static int butterfly(struct dl_comm *c, float *buf, size_t n, float *tmp, int v, int p2,
                     const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    for (int mask = 1; mask < p2; mask <<= 1) {
        int peer = dl_pow2_real(v ^ mask, c->size);
        int rc = dl_comm_sendrecv(c, buf, n * sizeof *buf, peer, tmp, n * sizeof *tmp, peer,
                                  DL_TAG_RECURSIVE_DOUBLING + mask, err);
        if (rc != DL_OK)
            return rc;
        dl_reduce_add(buf, tmp, n);
    }
    return DL_OK;
}

int dl_allreduce_recursive_doubling(struct dl_comm *c, float *buf, size_t n,
                                    const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    return dl_pow2_run(c, buf, n, opts, butterfly, err);
}
