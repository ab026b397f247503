/* consistency_cost.h: what a data-parallel step costs under each
 * consistency model the trainer offers without parameter servers
 * (doc/planner.md, "Consistency models"): sync (the gradient allreduce of
 * planner/layout_cost.h, in buckets overlapping backward), local SGD and
 * EASGD (an allreduce of the weights and batch-norm statistics every K or
 * TAU steps: its time over K or TAU per step) and gossip (each step every
 * rank sends that vector to its |D| neighbours of parallel/mixing.h and
 * receives |D|, point to point, then adds them).  The compute of the step
 * is the same for all: the makespan of the layout dp = N. */
#ifndef DL_PLAN_CONSISTENCY_COST_H
#define DL_PLAN_CONSISTENCY_COST_H

#include "parallel/strategy.h"
#include "planner/layout_cost.h"

struct dl_consistency_cost {
    double compute_s;   /* forward and backward of a rank's part of the batch */
    double exchange_s;  /* seconds per step of the model's communication not hidden behind compute
                           (averaged over its period: K, TAU, or the topology's) */
    double step_s;      /* compute_s + exchange_s */
    double bytes_sent;  /* bytes a rank sends per step (averaged likewise) */
    double vector_bytes; /* what one exchange moves: gradients (sync), weights and statistics (others) */
};

/* Seconds of one gossip mixing step of a vector of `bytes` on p ranks at
 * 0-based step `step` on m: the slowest rank's, rank i sending to each
 * i + d (d in the topology's offsets, mod p) one message after another,
 * each priced as dl_machine_send (across nodes when i and i + d are on two
 * nodes), and adding the |D| vectors it receives at the node's reduction
 * speed; its receives overlap its sends.  *peers (may be NULL): |D|. */
double dl_plan_mixing_step(const struct dl_machine *m, enum dl_topology t, int p, long step, double bytes,
                           int *peers);

/* The cost of consistency model o (sync, local-sgd:K, gossip:TOPOLOGY or
 * easgd:TAU[,ALPHA]) for the layout dp = N of g at mini-batch `batch` on
 * m.  DL_ERR_SPEC naming --compare-consistency for a model with parameter
 * servers (not modelled) or one N does not allow (dl_parallel_opts_check's
 * message), or when dp = N cannot run (a batch smaller than N). */
int dl_plan_consistency(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_machine *m,
                        const struct dl_parallel_opts *o, int N, int batch, struct dl_consistency_cost *out,
                        struct dl_error *err);

#endif
