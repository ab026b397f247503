/* schedule.h: pipeline schedules as checked per-rank action lists.
 *
 * A schedule says, for every pipeline rank, the order in which it runs the
 * forward and backward passes of the chunks (micro-batches) of one mini-batch
 * on its stages, and the sends and receives of activations and gradients
 * between stages.  It is generated for all ranks at once (gpipe, 1f1b,
 * interleaved:V, zb-h1), proved sound by simulation before anything runs
 * (dl_schedule_check), and timed under given per-stage costs
 * (dl_schedule_simulate) for the bubble formulas and the planner.
 *
 * Stages.  With V virtual stages per rank (V = 1 except for interleaved) the
 * network is cut into S = P*V stages 0..S-1; rank p holds stages p, p+P, ...,
 * p+(V-1)P (Megatron-LM's layout), so a chunk's forward visits the ranks
 * round-robin V times and stage s always lives on rank s % P.  Stage 0 reads
 * the data, stage S-1 computes the loss and starts the backward of its chunk
 * itself; stage 0's backward sends nothing.
 *
 * Execution model (what the checker and the simulator assume, and what a
 * driver must provide).  Every rank runs its list in order.  Compute actions
 * and sends never block: a send is a non-blocking send whose buffer is not
 * reused before it completes.  A receive blocks until the matching send
 * (same chunk, stage and direction, from the expected peer) has been issued;
 * a driver posts the non-blocking receive early (as soon as the receiving
 * buffer is free) and waits where the list says RECV, so communication
 * overlaps the compute before it.  Messages are told apart by their tag,
 * dl_schedule_message_tag(), which both ends compute from their own action. */
#ifndef DL_PARALLEL_SCHEDULE_H
#define DL_PARALLEL_SCHEDULE_H

#include <stddef.h>

#include "core/error.h"

/* Limits that keep every tag below 2^24 (MPI promises tags up to 32767 only,
 * Open MPI and MPICH take 2^31 - 1; a driver checks MPI_TAG_UB). */
#define DL_SCHED_MAX_STAGES 1024 /* P * V */
#define DL_SCHED_MAX_CHUNKS 4096 /* M */
#define DL_SCHED_TAG_BASE 65536   /* pipeline tags start here, above the fixed ones */

enum dl_pipe_schedule {
    DL_SCHED_GPIPE,       /* all forwards, then all backwards (Huang et al. 2019) */
    DL_SCHED_1F1B,        /* PipeDream-Flush (Narayanan et al. 2021): warm-up, one forward one backward, cool-down */
    DL_SCHED_INTERLEAVED, /* 1F1B over V virtual stages per rank (Narayanan et al. SC'21, Megatron-LM) */
    DL_SCHED_ZB_H1        /* zero-bubble H1 (Qi et al. 2023): 1F1B with the weight gradients deferred */
};

enum dl_sched_op {
    DL_SCHED_FORWARD,
    DL_SCHED_BACKWARD,        /* input and weight gradients together (all kinds but zb-h1) */
    DL_SCHED_BACKWARD_INPUT,  /* zb-h1: the input gradient only (on the critical path) */
    DL_SCHED_BACKWARD_WEIGHT, /* zb-h1: the weight gradient, any time after its input gradient */
    DL_SCHED_SEND_ACT,        /* the stage's output activation to the next stage */
    DL_SCHED_RECV_ACT,        /* the stage's input activation from the previous stage */
    DL_SCHED_SEND_GRAD,       /* the gradient of the stage's input to the previous stage */
    DL_SCHED_RECV_GRAD        /* the gradient of the stage's output from the next stage */
};

/* One step of one rank.  stage is always a stage the rank holds: a send
 * names the stage that produced the tensor, a receive the stage that will
 * use it.  peer is the pipeline rank on the other side (send/receive only;
 * -1 for compute). */
struct dl_sched_action {
    enum dl_sched_op op;
    int chunk; /* 0..M-1 */
    int stage; /* virtual stage 0..P*V-1 */
    int peer;
};

struct dl_schedule {
    enum dl_pipe_schedule kind;
    int P;                     /* pipeline ranks */
    int M;                     /* chunks per mini-batch */
    int V;                     /* virtual stages per rank (1 unless interleaved) */
    int *n;                    /* [P]: actions of each rank */
    struct dl_sched_action **a; /* [P][n[p]] */
};

/* "gpipe", "1f1b", "interleaved:V" (V >= 2) or "zb-h1"; *V is 1 for all but
 * interleaved.  Errors (DL_ERR_SPEC) name --pipeline-schedule. */
int dl_schedule_parse(const char *text, enum dl_pipe_schedule *kind, int *V, struct dl_error *err);
/* The option spelling of a kind ("interleaved" without its V). */
const char *dl_schedule_kind_name(enum dl_pipe_schedule kind);

/* Generates the lists of all P ranks.  Refused with DL_ERR_SPEC and a
 * message naming the rule: P >= 1; M >= P (a pipeline needs a chunk per
 * stage to fill); V == 1 except for interleaved, which needs V >= 2, P >= 2
 * and M a multiple of P (Megatron-LM's interleaved schedule runs the chunks
 * in groups of P); P*V <= DL_SCHED_MAX_STAGES, M <= DL_SCHED_MAX_CHUNKS.
 * The result is checked (dl_schedule_check) before it is returned. */
int dl_schedule_make(enum dl_pipe_schedule kind, int P, int M, int V, struct dl_schedule *out,
                     struct dl_error *err);
/* Frees the lists (not s itself); s may be zeroed or already freed. */
void dl_schedule_free(struct dl_schedule *s);

/* Chunks in flight on a rank: (chunk, stage) pairs whose forward has run and
 * whose activations are still held, i.e. whose backward (zb-h1: whose
 * weight-gradient pass) has not.  This is the schedule's promise, from its
 * formula (with M >= P): gpipe M; 1f1b min(P - rank, M); interleaved
 * min(2(P - rank - 1) + (V - 1)P + 1, V*M) (Megatron's warm-up plus one,
 * counted in virtual-stage chunks, each holding 1/V of the rank's layers);
 * zb-h1 P on every rank (its first rank's 1F1B peak: the later ranks keep
 * up to rank chunks longer, waiting for their deferred weight gradients). */
int dl_schedule_bound(const struct dl_schedule *s, int rank);

/* 1 when action op ends a chunk's time on its stage (its activations are
 * free after it). */
static inline int dl_sched_op_retires(enum dl_sched_op op)
{
    return op == DL_SCHED_BACKWARD || op == DL_SCHED_BACKWARD_WEIGHT;
}

/* The most chunks rank p's list holds at once on each of its V stages
 * (forward run, backward (zb-h1: backward-weights) not yet): most[V], what
 * a driver allocates per stage (train/pipeline.c) and the planner counts. */
void dl_schedule_stage_slots(const struct dl_schedule *s, int p, int *most);

/* Proves by running the lists in the execution model above that the
 * schedule cannot deadlock, that each stage's actions are on the rank that
 * holds it, that every (chunk, stage) runs its forward and backward (zb-h1:
 * input and weight gradients) exactly once and in that order, each compute
 * after the receive of its input, that every send is received exactly once
 * from the right peer and no receive waits for a send that never comes, and
 * that the chunks in flight on every rank stay within dl_schedule_bound.
 * Since sends never block and a receive can only wait for its send, the
 * outcome does not depend on timing, so one run proves it.  DL_ERR_INTERNAL
 * with the first violation (rank, action index and action) otherwise.
 * max_in_flight[P] (may be NULL) receives each rank's observed maximum. */
int dl_schedule_check(const struct dl_schedule *s, int *max_in_flight, struct dl_error *err);

/* Costs of the passes per virtual stage, in any time unit: fwd[S], bwd_in[S]
 * and bwd_w[S] (S = P*V; bwd_w may be NULL: 0).  A whole backward
 * (DL_SCHED_BACKWARD) costs bwd_in + bwd_w.  A message arrives send_latency
 * after its send; sends and receives cost no compute time. */
struct dl_sched_costs {
    const double *fwd, *bwd_in, *bwd_w;
    double send_latency;
};

/* The timeline of the schedule under those costs, every action as early as
 * its rank's order and its input allow: *makespan (first action to the
 * last), busy[P] (may be NULL: each rank's compute time) and *idle_fraction,
 * the pipeline bubble 1 - sum(busy) / (P * makespan).  The schedule is
 * checked on the way (same errors as dl_schedule_check). */
int dl_schedule_simulate(const struct dl_schedule *s, const struct dl_sched_costs *costs,
                         double *makespan, double *busy, double *idle_fraction, struct dl_error *err);

/* The message tag of (chunk, the stage that sends it, direction: 0 an
 * activation going forward, 1 a gradient going backward); distinct for
 * distinct arguments within the limits above; -1 outside them. */
int dl_schedule_tag(int chunk, int stage, int is_grad);
/* The tag of a send or receive action (the sender's stage is the action's
 * stage for a send, stage - 1 for an activation received, stage + 1 for a
 * gradient received), so both ends of a message compute the same tag; -1
 * for a compute action. */
int dl_schedule_message_tag(const struct dl_sched_action *a);

/* "forward chunk 2 stage 1", "recv-grad chunk 0 stage 3 from rank 0", ...
 * into buf (always terminated); returns buf. */
const char *dl_sched_action_text(const struct dl_sched_action *a, char *buf, size_t size);

#endif
