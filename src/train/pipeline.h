/* pipeline.h: one rank's training step as a schedule driver (doc/parallel.md).
 * The rank's local batch is cut into M chunks; the schedule's actions
 * (parallel/schedule.h) say in which order its stage runs their forward and
 * backward passes; each chunk in flight has its own executor (a slot: its
 * own arena, the parameters of slot 0), so activations of several chunks
 * coexist.  The executors' receive and send steps move the tensors between
 * stages, so the schedule's own send and receive actions need nothing here.
 * Gradients accumulate in slot 0 over the chunks as the mean over the local
 * batch, exactly what one executor on the whole local batch computes, and
 * the consistency strategy then runs once per mini-batch.  Serial and
 * data-parallel training are the one-stage, one-chunk case. */
#ifndef DL_TRAIN_PIPELINE_H
#define DL_TRAIN_PIPELINE_H

#include "exec/exec.h"
#include "parallel/schedule.h"

struct dl_pipeline {
    const struct dl_graph *g;      /* the whole network */
    const struct dl_shard *shard;  /* this rank's part (its stage is shard->pos.p) */
    struct dl_schedule sched;      /* the lists of every pipeline rank */
    int chunks, slots;             /* M, and executors (the schedule's in-flight bound) */
    int max_local;                 /* largest local batch a step may get */
    struct dl_exec *slot;          /* [slots]; slot[0] owns the parameters */
};

/* Executors for a local batch of up to max_local samples in `chunks`
 * chunks under schedule kind (gpipe or 1f1b; interleaved and zb-h1 are
 * refused for now), with o's kernels, shard and communicators.  Refused
 * (DL_ERR_SPEC): fewer samples than chunks, fewer chunks than stages. */
int dl_pipeline_init(struct dl_pipeline *pl, const struct dl_graph *g, const struct dl_exec_options *o,
                     int max_local, int chunks, enum dl_pipe_schedule kind, uint64_t seed, struct dl_error *err);
void dl_pipeline_free(struct dl_pipeline *pl);

/* The executor that owns the parameters (weights, gradients, state). */
static inline struct dl_exec *dl_pipeline_exec(struct dl_pipeline *pl)
{
    return &pl->slot[0];
}

/* Called after each chunk's forward on this rank, before its memory is
 * reused (the trainer looks for the first non-finite output there). */
struct dl_pipeline_hook {
    void (*after_forward)(void *ctx, const struct dl_exec *e);
    void *ctx;
};

/* Forward and backward of one local batch (n samples of x and y; sample0:
 * the index of x's first sample in the mini-batch; step: the training step
 * for dropout's masks), in the schedule's order.  Weight gradients are
 * ADDED to slot 0's (zero them first).  *loss_sum and *correct: the last
 * stage's sums over the batch (0 on other stages).  hook may be NULL.
 * Errors from the executors (a lost message, a kernel) come back in err. */
int dl_pipeline_step(struct dl_pipeline *pl, const float *x, const int *y, int n, long sample0, uint64_t step,
                     const struct dl_pipeline_hook *hook, double *loss_sum, double *correct, struct dl_error *err);

/* Inference over n samples (in batches no larger than the slots'): the last
 * stage's loss sum and number correct, 0 on the others. */
int dl_pipeline_evaluate(struct dl_pipeline *pl, const float *x, const int *y, long n, double *loss_sum,
                         long *correct, struct dl_error *err);

#endif
