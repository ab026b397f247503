/* zero.h: ZeRO stage 1 (Rajbhandari et al., 2020) for synchronous data
 * parallelism (--zero 1): the optimizer's state is cut into D equal
 * blocks of the weight vector, one per data-parallel rank; each step the
 * gradients are reduce-scattered (each rank gets the sum of its block),
 * each rank updates its block and the weights are allgathered.  The same
 * bytes as an allreduce; the optimizer's state (Adam: two values per
 * weight) a D-th on each rank.  The executors' weights and gradients are
 * allocated to D blocks (exec.h's weights_multiple), the padding zero.
 * Checkpoints gather the blocks into the whole state and take theirs
 * back, so a file holds what one process's does. */
#ifndef DL_PARALLEL_ZERO_H
#define DL_PARALLEL_ZERO_H

#include "comm/comm.h"
#include "optim/optim.h"

/* This rank's block: weights [lo, lo + n) of n_weights, blocks of `block`
 * values (the last rank's n may be smaller, or 0). */
struct dl_zero_shard {
    long lo, n, block;
    int ranks, rank;
};

void dl_zero_shard_of(long n_weights, int ranks, int rank, struct dl_zero_shard *out);

/* The whole optimizer state (state_vectors x n_weights, in whole's own
 * layout: whole->n = n_weights) from every rank's block of o (collective
 * over the data-parallel communicator c). */
int dl_zero_gather_state(struct dl_comm *c, const struct dl_zero_shard *sh, const struct dl_optim *o,
                         struct dl_optim *whole, struct dl_error *err);
/* The reverse: o's block (and step count) taken from whole. */
void dl_zero_take_state(const struct dl_zero_shard *sh, const struct dl_optim *whole, struct dl_optim *o);

#endif
