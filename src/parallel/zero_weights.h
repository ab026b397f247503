/* zero_weights.h: ZeRO stage 3 (--zero 3; PyTorch FSDP's and DeepSpeed's
 * "fully sharded" weights) on top of stage 2 (zero_grads.h): each
 * data-parallel rank keeps only its block of the weights (zero.h's shard)
 * in memory.  A layer's parameters are gathered from their owners right
 * before the executor runs it (forward, recomputation, backward: the
 * executor's weights hook) and released right after.  While a layer runs,
 * the next one's weights are gathered ahead on a thread of its own (the
 * order learnt from the step before: each use's successor), so that a rank
 * holds its block and two layers' weights at a time; a wrong guess is
 * handed back and the right layer gathered then.
 *
 * On the host the weight vector keeps its full address range (so every
 * parameter pointer stays where it was), but only the pages of the owned
 * block and of the layer in use are memory: the others are handed back to
 * the kernel (madvise MADV_DONTNEED; they read as zero until gathered
 * again).  Each gather is a broadcast from every rank owning part of the
 * layer's range, in the executor's order on every rank (the guesses too:
 * every rank learns the same order). */
#ifndef DL_PARALLEL_ZERO_WEIGHTS_H
#define DL_PARALLEL_ZERO_WEIGHTS_H

#include "comm/comm.h"
#include "exec/exec.h"
#include "parallel/zero.h"

struct dl_zero_weights;

/* For executor e over the data-parallel communicator c, sh this rank's
 * block: installs e's weights hook and releases every page this rank does
 * not own. */
int dl_zero_weights_create(struct dl_comm *c, struct dl_exec *e, const struct dl_zero_shard *sh,
                           struct dl_zero_weights **out, struct dl_error *err);
/* Another executor sharing the first one's weights (a pipeline's slots)
 * gets the same hook. */
int dl_zero_weights_attach(struct dl_zero_weights *z, struct dl_exec *e, struct dl_error *err);
/* all 1: every weight gathered on every rank (collective), and the hooks
 * do nothing until it is called with all 0, which releases the pages this
 * rank does not own again: around whatever reads or writes the whole
 * vector (a checkpoint saved or resumed, a weights file, a sample drawn on
 * one rank).  all 0 alone releases them (after the whole vector was
 * written on every rank). */
int dl_zero_weights_hold_all(struct dl_zero_weights *z, int all, struct dl_error *err);
/* After the optimizer updated the blocks: a layer gathered ahead before
 * the update is gathered again. */
void dl_zero_weights_updated(struct dl_zero_weights *z);
/* Since the last call: the seconds its gathers took, those of them the
 * compute thread waited for (the rest was hidden behind its layers), and
 * the bytes (this rank's sends: its part of each broadcast times the other
 * ranks). */
void dl_zero_weights_take_stats(struct dl_zero_weights *z, double *seconds, double *exposed, size_t *bytes);
/* The most weight values a rank holds gathered beside its block: the
 * layer in use and the one gathered ahead, at most the two largest layers
 * (a tied parameter's users counted once). */
long dl_zero_weights_gathered(const struct dl_zero_weights *z);
/* The same, planned from an executor's layers before any exists (check,
 * the planner). */
long dl_zero_weights_gathered_of(const struct dl_exec *e);
/* Removes the hooks and frees z (the weights stay as they are). */
void dl_zero_weights_free(struct dl_zero_weights *z);

#endif
