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

/* The collectives over blocks go a chunk at a time: `chunk` values of
 * each rank's block (a gradient bucket's bytes over the ranks, at most a
 * block), packed into a staging buffer of ranks x chunk values, so that no
 * collective (nor MPI's own buffers) holds a whole vector again. */
long dl_zero_chunk(const struct dl_zero_shard *sh, size_t bucket_bytes);
/* The staging's values: none when a chunk is the whole block (the vector
 * goes in one piece, as it lies) and the sums travel in f32. */
long dl_zero_staging(const struct dl_zero_shard *sh, size_t bucket_bytes, enum dl_dtype wire);
/* The values of what a rank holds for its gradient with `stage` (1 to 3):
 * stage 1 the whole gradient, its block's sums and the staging; stages 2
 * and 3 its block, `arena` (zero_grads.h's buckets) and the staging. */
long dl_zero_grad_values(const struct dl_zero_shard *sh, long n_weights, int stage, long arena, size_t bucket_bytes,
                         enum dl_dtype wire);

/* The weight values a rank holds with `stage` (0 to 3): all n_weights,
 * or with stage 3 its block and `gathered` (zero_weights.h: the layer in
 * use and the one gathered ahead). */
long dl_zero_held_weights(const struct dl_zero_shard *sh, long n_weights, int stage, long gathered);

/* Stage 1's sum of grad (ranks x block values, the padding zero) into this
 * rank's block, reduce-scatters a chunk at a time; wire bf16 (--grad-dtype
 * bf16): each chunk rounded to bf16, summed in f32 and rounded once (the
 * comm backends'), half the bytes. */
int dl_zero_reduce_scatter(struct dl_comm *c, const struct dl_zero_shard *sh, const dl_real *grad, dl_real *block,
                           long chunk, dl_real *staging, enum dl_dtype wire, struct dl_error *err);
/* Every rank's block (this rank's: block) into weights (ranks x block
 * values), allgathers a chunk at a time. */
int dl_zero_allgather(struct dl_comm *c, const struct dl_zero_shard *sh, const dl_real *block, dl_real *weights,
                      long chunk, dl_real *staging, struct dl_error *err);

/* The whole optimizer state (state_vectors x n_weights, in whole's own
 * layout: whole->n = n_weights) from every rank's block of o (collective
 * over the data-parallel communicator c). */
int dl_zero_gather_state(struct dl_comm *c, const struct dl_zero_shard *sh, const struct dl_optim *o,
                         struct dl_optim *whole, struct dl_error *err);
/* The reverse: o's block (and step count) taken from whole. */
void dl_zero_take_state(const struct dl_zero_shard *sh, const struct dl_optim *whole, struct dl_optim *o);

#endif
