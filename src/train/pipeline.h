/* pipeline.h: one rank's training step as a schedule driver (doc/parallel.md).
 * The rank's local batch is cut into M chunks; the schedule's actions
 * (parallel/schedule.h) say in which order the rank's stages run their
 * forward and backward passes (zb-h1: backward-input and, deferred,
 * backward-weights passes); each chunk in flight on a stage has its own
 * executor (a slot: its own arena, the parameters of slot 0), so
 * activations of several chunks coexist.  With the interleaved schedule a
 * rank holds V stages, each with its own slots; every executor of the rank
 * shares slot 0's one parameter vector (the rank's layers of all its
 * stages, in graph order), so the optimizer, the data-parallel exchange and
 * checkpoints see one flat vector as with one stage.  The executors' receive
 * and send steps move the tensors between stages, so the schedule's own
 * send and receive actions need nothing here.  Gradients accumulate in slot
 * 0's vector over the chunks as the mean over the local batch, exactly what
 * one executor on the whole local batch computes, and the consistency
 * strategy then runs once per mini-batch.  Serial and data-parallel
 * training are the one-stage, one-chunk case. */
#ifndef DL_TRAIN_PIPELINE_H
#define DL_TRAIN_PIPELINE_H

#include "exec/exec.h"
#include "parallel/schedule.h"

struct dl_pipeline {
    const struct dl_graph *g;      /* the whole network */
    const struct dl_shard *shard;  /* this rank's part (its stages: shard->pos.p + v * pp) */
    struct dl_schedule sched;      /* the lists of every pipeline rank */
    int chunks, V;                 /* M, and the stages this rank holds */
    int max_local;                 /* largest local batch a step may get */
    int slots;                     /* executors in all */
    struct dl_exec *slot;          /* [slots]; slot[0] owns the parameters */
    int *first_slot;               /* [V + 1]: stage v's slots are [first_slot[v], first_slot[v + 1]) */
    int *slot_chunk;               /* [slots]: the chunk whose activations a slot holds, -1: free */
    /* The next dl_pipeline_step's x and y already in the executors' device
     * memory (train/batch_ahead.h; each chunk's forward takes its part in
     * place, exec.h's input_resident); NULL: copied in from x and y.  x's
     * values are of the network's input dtype, as dl_pipeline_step's x. */
    const void *x_resident;
    const int *y_resident;
    /* The loss's divisor for the next step or evaluation (exec.h's
     * label_norm): the labelled positions per sample of the whole
     * mini-batch or test split; 0: each chunk's own. */
    double label_norm;
    /* The last step's layers' own losses (exec.h's added_loss) over its
     * chunks, on this rank's stage. */
    double added_loss_sum;
    /* The last step's layers' counts (exec.h's dl_exec_add_layer_stats)
     * over its chunks, on this rank's stages: stats_n of them. */
    double *stats;
    long stats_n;
};

/* The chunks a step cuts a rank's part of the batch into: those requested
 * (--pipeline-chunks, the network file's micro_batches), else 4 x pp with a
 * pipeline (a bubble under 20%), else 1. */
static inline int dl_pipeline_chunks(int requested, int pp)
{
    return requested ? requested : pp > 1 ? 4 * pp : 1;
}

/* Executors for a local batch of up to max_local samples in `chunks`
 * chunks under schedule kind with V stages per rank (interleaved: V >= 2,
 * the shard cut for it; else 1), with o's kernels, shard and
 * communicators; as many per stage as the schedule keeps chunks in flight
 * there.  Refused (DL_ERR_SPEC): fewer samples than chunks, and what
 * dl_schedule_make refuses (fewer chunks than stages, interleaved chunks
 * not a multiple of the pipeline ranks). */
int dl_pipeline_init(struct dl_pipeline *pl, const struct dl_graph *g, const struct dl_exec_options *o,
                     int max_local, int chunks, enum dl_pipe_schedule kind, int V, uint64_t seed,
                     struct dl_error *err);
void dl_pipeline_free(struct dl_pipeline *pl);

/* What a rank's executors hold: its arena of every slot (activations, their
 * gradients, kernel state, workspace: plan/plan.h) and its parameters
 * (floats; weight gradients are as many as weights). */
struct dl_pipeline_memory {
    int slots;            /* executors: chunks in flight, over the rank's stages */
    size_t arena_bytes;   /* all slots' arenas */
    long weights, state;  /* trainable and other (batch-norm statistics) parameters of the rank's layers */
};
void dl_pipeline_memory(const struct dl_pipeline *pl, struct dl_pipeline_memory *out);
/* The same without making the executors: what dl_pipeline_init with these
 * arguments would allocate, planned (no communicators needed: dltrain
 * check --grid plans every rank of a grid in one process). */
int dl_pipeline_plan_memory(const struct dl_graph *g, const struct dl_exec_options *o, int max_local, int chunks,
                            enum dl_pipe_schedule kind, int V, struct dl_pipeline_memory *out, struct dl_error *err);

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

/* Forward and backward of one local batch (n samples of x and y, x's
 * values of g->input's dtype: dl_real, or int32_t token ids; sample0:
 * the index of x's first sample in the mini-batch; step: the training step
 * for dropout's masks), in the schedule's order.  Weight gradients are
 * ADDED to slot 0's (zero them first); slot 0's grad_hook runs for the
 * layers of every slot.  *loss_sum and *correct: the last stage's sums
 * over the batch (0 on other ranks).  hook may be NULL.  Errors from the
 * executors (a lost message, a kernel) come back in err. */
int dl_pipeline_step(struct dl_pipeline *pl, const void *x, const int *y, int n, long sample0, uint64_t step,
                     const struct dl_pipeline_hook *hook, double *loss_sum, double *correct, struct dl_error *err);

/* Inference over n samples of x and y (x as dl_pipeline_step's; in
 * batches no larger than the slots'), through the rank's stages in order:
 * the last stage's loss sum and numbers correct, correct[0] the top-1 and
 * correct[1] the top-5 (exec.h's dl_exec_counts_top5; 0 where not
 * counted), 0 on the other ranks. */
int dl_pipeline_evaluate(struct dl_pipeline *pl, const void *x, const int *y, long n, double *loss_sum,
                         long correct[2], struct dl_error *err);

#endif
