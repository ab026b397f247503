/* layout_cost.h: the planner's cost model (doc/planner.md): the predicted
 * step time and per-rank memory of one layout of a network on a machine.
 *
 * A layout is a grid dp x tp x pp (plan/rank_grid.h), the stage cuts, the
 * chunks per mini-batch and the pipeline schedule; each layer's tensor
 * split is the one the network file gives it (plan/shard.h).  Its step
 * time is the makespan of the schedule's own action lists run by the
 * schedule simulator (parallel/schedule.h) under per-stage costs (each
 * layer's compute for a chunk, divided by tp when the layer is split, plus
 * the tensor-parallel collectives its split needs, a mixture of experts'
 * all-to-alls over the expert group with expert ranks, and the time the
 * stage's pipeline sends occupy its link), every message arriving the
 * link's latency after its send, plus the data-parallel
 * allreduce of each pipeline rank's gradients (with expert ranks the
 * per-expert weights' over the ranks holding the same experts): in
 * buckets overlapping the backward pass with one chunk (as
 * parallel/grad_sync.c runs it), after the pipeline's flush with
 * several.  Under zb-h1 each stage's backward
 * is its input-gradient pass (with the collectives and sends) and the
 * deferred weight-gradient pass (the layers' wgt times).  Memory
 * per rank is the executor's memory planner's arena for the layers the
 * rank holds (plan/plan.h via dl_exec_plan; planned for backward in two
 * passes under zb-h1, as the executor is), times the chunks the schedule
 * keeps in flight, plus weights, gradients and one optimizer slot. */
#ifndef DL_PLAN_LAYOUT_COST_H
#define DL_PLAN_LAYOUT_COST_H

#include <stddef.h>

#include "graph/graph.h"
#include "parallel/schedule.h"
#include "planner/machine.h"
#include "plan/rank_grid.h"
#include "plan/shard.h"
#include "planner/tp_split_choice.h"

/* Where a layer's time came from. */
enum dl_time_source { DL_TIME_FLOPS, DL_TIME_DB, DL_TIME_MEASURED };
extern const char *const dl_time_source_names[]; /* "flops", "db", "measured" */

/* Each whole layer's forward and backward seconds for a call on b
 * samples, as a fixed part and a part per sample: fwd0 + fwd * b, bwd0 +
 * bwd * b (a kernel call's set-up, small GEMMs' poor use of the core: what
 * makes 16 chunks of 2 samples slower than one of 32).  wgt, wgt0: the part
 * of bwd, bwd0 that computes the weight gradients (what zb-h1 defers).  A
 * tensor group's share of a layer scales the per-sample part only. */
struct dl_layer_times {
    int n;
    double *fwd, *bwd, *wgt;
    double *fwd0, *bwd0, *wgt0;
    enum dl_time_source *source;
    /* The optimizer's seconds per trainable parameter and step (measured;
     * 0: left out): each rank updates the parameters it holds. */
    double optim_per_param;
};
int dl_layer_times_alloc(struct dl_layer_times *t, int n, struct dl_error *err);
void dl_layer_times_free(struct dl_layer_times *t);

/* One collective of a layer's split over the tensor group, per sample. */
enum dl_tp_collective { DL_TP_ALLREDUCE, DL_TP_ALLGATHER, DL_TP_REDUCE_SCATTER };
struct dl_tp_op {
    enum dl_tp_collective kind;
    int backward;                /* 0: in the forward pass, 1: in the backward */
    double bytes;                /* the whole tensor's bytes per sample (per call when per_call) */
    int per_call;                /* 1: bytes per call whatever its samples (a layer's weight gradients) */
};
#define DL_TP_MAX_OPS (3 * DL_MAX_INPUTS + 2)

/* What a tensor group of T ranks does to each layer: from the shard of
 * tensor rank 0 (dims 1 x T x 1), with what expert ranks would divide and
 * move of it.  Built once per T. */
struct dl_tp_view {
    int T;
    int crosses;                 /* a tensor group spans nodes */
    double *share;               /* [n] the part of a layer's compute a rank does (its local view's
                                    estimated cost over the whole layer's: 1/T when split, 1 when whole) */
    int *n_ops;                  /* [n] its collectives: */
    struct dl_tp_op (*op)[DL_TP_MAX_OPS];
    long *params;                /* [n] trainable parameters held by tensor rank 0 */
    long *expert_params;         /* [n] of them, the per-expert ones (op.h's per_expert: all the layer's experts'),
                                    which E expert ranks hold an E-th of */
    double *routed_bytes;        /* [n] bytes per sample of the rows the layer sends to its experts' ranks in
                                    forward (op.h's routed_rows; 0: none) */
    unsigned char *by_samples;   /* [n] 1: the layer runs on the rank's share of the samples */
    /* Measured times of tensor rank 0's layers split over T (not owned;
     * NULL: none): used for the layers this view splits (share < 1)
     * instead of the whole layer's time times its share. */
    const struct dl_layer_times *times;
};

/* The view for T tensor ranks of `world` on m; DL_ERR_SPEC with the
 * shard's message when a layer's split cannot have T ranks. */
int dl_tp_view_make(const struct dl_graph *g, int T, int world, const struct dl_machine *m,
                    struct dl_tp_view *v, struct dl_error *err);
void dl_tp_view_free(struct dl_tp_view *v);

/* A layout.  S = pp x V stages (V > 1: the interleaved schedule's virtual
 * stages, stage s on pipeline rank s % pp); first[S + 1]: stage s holds
 * layers [first[s], first[s+1]), first[S] = n (the loss with the last
 * stage). */
struct dl_plan_layout {
    struct dl_grid_dims dims;
    enum dl_pipe_schedule schedule; /* gpipe, 1f1b, zb-h1 or interleaved (1f1b when pp = 1) */
    int V;                          /* stages per pipeline rank: interleaved's V; 0 or 1 otherwise */
    int n_whole;                    /* layers whose `split:` the layout sets to none (planner/tp_split_choice.h) */
    int whole[2 * DL_PLAN_MAX_PAIRS];
    /* 1: the convolutions whose `split:` the file leaves to the default
     * rule take `split: batch` (planner/tp_split_choice.h: Krizhevsky's hybrid,
     * convolutions data parallel across the tensor group) */
    int by_samples;
    int chunks;
    size_t bucket_bytes;            /* the data-parallel allreduce's buckets (0: grad_sync's default) */
    enum dl_dtype grad_dtype;       /* the dtype its gradients travel in (--grad-dtype): f32 or bf16 */
    int zero;                       /* ZeRO stage 1 or 2 (--zero): the optimizer's state a block a dp rank
                                       (2: the gradients too, layout_memory.c) */
    /* --recompute full: the layers of the network file's blocks (those
     * without running statistics, as exec/recompute.c picks them) run
     * forward again in backward, their tensor collectives too */
    int recompute;
    int first[DL_SCHED_MAX_STAGES + 1];
};

/* V (at least 1) and S = pp x V of layout l. */
static inline int dl_layout_V(const struct dl_plan_layout *l)
{
    return l->V > 1 ? l->V : 1;
}
static inline int dl_layout_stages(const struct dl_plan_layout *l)
{
    return l->dims.pp * dl_layout_V(l);
}

struct dl_layout_prediction {
    double step_s;         /* predicted seconds per training step */
    double samples_per_s;
    double makespan_s;     /* the pipeline's part: forward, backward, tensor collectives, sends */
    double dp_s;           /* the slowest pipeline rank's data-parallel allreduce (all of it) */
    double dp_exposed_s;   /* the part of it not hidden behind backward (all of it with chunks) */
    double tp_s;           /* the slowest pipeline rank's tensor-parallel collectives */
    double ep_s;           /* the slowest pipeline rank's expert all-to-alls (0 without expert ranks) */
    double bubble;         /* idle fraction of the pipeline ranks in the makespan (simulated) */
    double comm_share;     /* (tp_s + ep_s + dp_exposed_s) / step_s (pipeline sends overlap compute: in the
                              makespan) */
    double stage_max_s;    /* the costliest stage's compute and tensor collectives for one chunk */
    double optim_s;        /* the optimizer step of the rank holding the most parameters */
};

/* Per-layer seconds (forward and backward) for one chunk of b samples
 * under view v on m in grid d: compute plus collectives (the tensor
 * group's, and the expert group's all-to-alls), cost[n]. */
void dl_layout_layer_costs(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_tp_view *v,
                           const struct dl_machine *m, const struct dl_grid_dims *d, double b, double *cost);

/* Layer i's trainable parameters on a rank of grid d under view v: tensor
 * rank 0's, an ep-th of its per-expert ones. */
double dl_layout_rank_params(const struct dl_tp_view *v, const struct dl_grid_dims *d, int i);

/* Samples of a rank's part of a mini-batch of `batch` over dp ranks (the
 * largest, as the batcher gives them) and of one chunk of it. */
int dl_layout_local_batch(int batch, int dp);
int dl_layout_chunk_batch(int batch, int dp, int chunks);

/* Predicts layout l's step for a mini-batch of `batch` samples. */
int dl_layout_predict(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_tp_view *v,
                      const struct dl_machine *m, const struct dl_plan_layout *l, int batch,
                      struct dl_layout_prediction *out, struct dl_error *err);

#endif
