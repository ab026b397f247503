/* allreduce_rabenseifner.c: Rabenseifner's allreduce = reduce-scatter by
 * recursive halving + allgather by recursive doubling.  lg p rounds each way
 * and 2(p-1)/p n floats per rank in all: the bandwidth of the ring with the
 * latency of the butterfly.  Non-power-of-two rank counts use the standard
 * fix-up (fold the extra ranks in first, hand them the result at the end). */
#include "comm/allreduce.h"

static int halving_doubling(struct dl_comm *c, float *buf, size_t n, float *tmp, int v,
                            int p2, const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    int rc = DL_OK;
    size_t seg = dl_segment_floats(opts);
    /* Halving: this rank's part is the 2*mask blocks aligned around v; it keeps
     * the half that contains block v and sends the other half to the partner.
     * At the end it holds block v of the sum. */
    for (int mask = p2 / 2; mask >= 1 && rc == DL_OK; mask /= 2) {
        int base = v & ~(2 * mask - 1), mid = base + mask;
        int keep_lo = (v & mask) ? mid : base, send_lo = (v & mask) ? base : mid;
        size_t klo = dl_block_lo(n, p2, keep_lo), khi = dl_block_lo(n, p2, keep_lo + mask);
        size_t slo = dl_block_lo(n, p2, send_lo), shi = dl_block_lo(n, p2, send_lo + mask);
        rc = dl_exchange_add(c, dl_pow2_real(v ^ mask, c->size), buf + slo, shi - slo,
                             buf + klo, khi - klo, tmp + klo, seg, DL_TAG_HALVING + mask, err);
    }
    /* Doubling: swap the summed parts, growing by a factor of two a round. */
    for (int mask = 1; mask < p2 && rc == DL_OK; mask *= 2) {
        int mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
        size_t mlo = dl_block_lo(n, p2, mine), mhi = dl_block_lo(n, p2, mine + mask);
        size_t tlo = dl_block_lo(n, p2, theirs), thi = dl_block_lo(n, p2, theirs + mask);
        int peer = dl_pow2_real(v ^ mask, c->size);
        rc = dl_comm_sendrecv(c, buf + mlo, (mhi - mlo) * sizeof *buf, peer, buf + tlo,
                              (thi - tlo) * sizeof *buf, peer, DL_TAG_DOUBLING + mask, err);
    }
    return rc;
}

int dl_allreduce_rabenseifner(struct dl_comm *c, float *buf, size_t n,
                              const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    return dl_pow2_run(c, buf, n, opts, halving_doubling, err);
}
