/* zero_grads.h: ZeRO stage 2 (--zero 2; Rajbhandari et al. 2020): the
 * gradient is never held whole.  The executor has no gradient vector
 * (exec.h's grads_elsewhere); its weights' gradients accumulate into the
 * buffers of buckets (buckets.h; whole layers, a larger one a bucket of its
 * own), placed in one arena so that buckets backward fills one after the
 * other share memory and buckets open at once do not (a tied parameter's
 * owner, written by the head long before the embedding closes it).  As
 * backward finishes a bucket (the executor's grad_hook, every backward of
 * the step: a pipeline's chunks add up), it is scaled by the rank's share of
 * the global batch, each part lying in a data-parallel rank's block
 * (zero.h) summed into that rank (reduces of at most a bucket's values: the
 * bytes of a reduce-scatter in all), added to the owner's block of sums,
 * and zeroed.
 * A rank holds of the gradient its block and the arena.  The reductions
 * run on the compute thread, between layers (none overlap with backward
 * yet); host memory only. */
#ifndef DL_PARALLEL_ZERO_GRADS_H
#define DL_PARALLEL_ZERO_GRADS_H

#include "comm/comm.h"
#include "exec/exec.h"
#include "parallel/zero.h"

struct dl_zero_grads;

/* Over data-parallel communicator c for executor e (made with
 * grads_elsewhere; its gradients pointed into the arena here), blocks sh,
 * buckets of at most bucket_bytes (0: grad_sync.h's default). */
int dl_zero_grads_create(struct dl_comm *c, struct dl_exec *e, const struct dl_zero_shard *sh, size_t bucket_bytes,
                         struct dl_zero_grads **out, struct dl_error *err);
void dl_zero_grads_free(struct dl_zero_grads *z);

/* Before a step's first backward: the block's sums and the arena zeroed,
 * the executor's grad_hook installed; every gradient is scaled by `scale`
 * (this rank's share of the global batch) before it is summed. */
void dl_zero_grads_begin(struct dl_zero_grads *z, double scale);
/* After the step's last backward: the buckets not summed yet summed, the
 * hook removed; *block the sums of this rank's block (sh->block values,
 * those past sh->n zero), *comm_seconds and *bytes the reductions' time
 * and (estimated) bytes sent.  Fails as a reduction failed. */
int dl_zero_grads_end(struct dl_zero_grads *z, dl_real **block, double *comm_seconds, size_t *bytes,
                      struct dl_error *err);
/* The arena's values (zero.h's dl_zero_grad_values adds the block and the
 * staging). */
long dl_zero_grads_arena(const struct dl_zero_grads *z);
/* The same for an executor only planned (dl_exec_plan): what `dltrain
 * check --grid` and the planner count. */
int dl_zero_grads_plan_arena(const struct dl_exec *e, size_t bucket_bytes, long *arena, struct dl_error *err);

#endif
