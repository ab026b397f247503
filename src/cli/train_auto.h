/* train_auto.h: `dltrain --parallel auto` on several ranks (doc/planner.md):
 * rank 0 plans the layout (planner/search.h) for the world, every rank gets
 * it, and the run's grid, chunks, schedule and stage cuts are set to it. */
#ifndef DL_CLI_TRAIN_AUTO_H
#define DL_CLI_TRAIN_AUTO_H

#include "cli/options.h"
#include "comm/comm.h"
#include "train/trainer.h"

#define DL_AUTO_MAX_TRIALS 8

/* Plans for comm->size ranks on one node at the network's mini-batch
 * (hybrid: among the layouts with two of dp, tp and pp above 1, when
 * there are some; else, said on stderr, among all):
 * layer times from FLOPs at flop_rate when it is above 0, else measured
 * now on rank 0; the tuning database's where it has them.  With trials
 * > 1 (at most DL_AUTO_MAX_TRIALS) the best `trials` layouts each train a
 * few steps (not with checkpoints) and the fastest measured is kept, or,
 * with keep_trial K > 0 (testing aid, --debug-plan-keep), the K-th timed
 * whatever its time (when there are K).  Sets
 * train's grid, pipeline_chunks, pipeline_schedule (V = 1) and net's
 * stage keys to the layout and (rank 0, print) prints it, saying when
 * measurement (or the testing aid) overruled the model.  Returns 0 or the
 * exit status after a message. */
int dl_train_auto_plan(struct dl_net *net, struct dl_net_options *no, struct dl_comm *comm, double flop_rate,
                       int trials, int keep_trial, int hybrid, struct dl_train_opts *train, int print);

#endif
