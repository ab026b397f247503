/* train_auto.h: `dltrain --parallel auto` on several ranks (doc/planner.md):
 * rank 0 plans the layout (plan/search.h) for the world, every rank gets
 * it, and the run's grid, chunks, schedule and stage cuts are set to it. */
#ifndef DL_CLI_TRAIN_AUTO_H
#define DL_CLI_TRAIN_AUTO_H

#include "cli/options.h"
#include "comm/comm.h"
#include "train/trainer.h"

/* Plans for comm->size ranks on one node at the network's mini-batch:
 * layer times from FLOPs at flop_rate when it is above 0, else measured
 * now on rank 0; the tuning database's where it has them.  Sets train's
 * grid, pipeline_chunks, pipeline_schedule (V = 1) and net's stage keys
 * to the best layout and (rank 0, print) prints it.  Returns 0 or the exit
 * status after a message. */
int dl_train_auto_plan(struct dl_net *net, struct dl_net_options *no, struct dl_comm *comm, double flop_rate,
                       struct dl_train_opts *train, int print);

#endif
