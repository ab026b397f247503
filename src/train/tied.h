/* tied.h: a tied parameter (the network file's `share:`) whose layers run
 * in pipeline stages of different ranks, as GPT-2's token embedding (first
 * stage) and output head (last stage): each such rank holds a copy (op.h's
 * replica, drawn as the owner is), and before every update the copies'
 * gradients are summed between those ranks, in the order of their
 * pipeline positions, so every copy gets the same bits and stays equal to
 * the others (Megatron-LM's embedding group).  Runs on the world
 * communicator, point to point, with the tensor and data positions of the
 * rank fixed. */
#ifndef DL_TRAIN_TIED_H
#define DL_TRAIN_TIED_H

#include "comm/comm.h"
#include "exec/exec.h"

struct dl_tied;

/* The copies of executor e's rank (any executor of it: they share the
 * weights) and the ranks they are summed with; *out = NULL when the rank
 * holds none.  DL_ERR_SPEC for two layers of one rank sharing an owner
 * that runs elsewhere. */
int dl_tied_create(const struct dl_exec *e, struct dl_comm *world, struct dl_tied **out, struct dl_error *err);
/* Sums the copies' gradients (collective among the ranks holding them). */
int dl_tied_sum(struct dl_tied *t, struct dl_error *err);
/* The number of values this rank sends per update (for reports). */
long dl_tied_values(const struct dl_tied *t);
void dl_tied_free(struct dl_tied *t);

#endif
