/* search.h: the planner's search (doc/planner.md): every layout of a
 * network on N ranks, predicted and ranked.  Over every factorisation
 * dp x tp x pp = N, with tensor ranks every choice for the fc pairs whose
 * splits the file leaves open (planner/tp_split_choice.h: split or whole),
 * on a network with experts (op.h's expert_split) every ep > 1 dividing dp
 * and each such layer's experts when the batch divides over dp (as the
 * trainer wants it), the
 * chunk counts pp, 2pp, 4pp and 8pp (1 without a pipeline) that leave each
 * chunk a sample, and the gpipe, 1f1b, zb-h1, interleaved:2 and
 * interleaved:4 schedules (those whose pp x V stages the layers allow),
 * with stage cuts by planner/cuts.h on the per-layer costs of one chunk (loss
 * with the layer before it), each layout's step time and memory come from
 * planner/layout_cost.h and layout_memory.h; a layout whose memory exceeds
 * the limit is infeasible.  Feasible layouts rank by predicted step time,
 * then memory, then enumeration order (tp ascending, then the split
 * choice's mask, pp ascending, ep ascending (none first), chunks
 * ascending, the schedules in the order above), so the result is the same
 * for the same inputs. */
#ifndef DL_PLAN_SEARCH_H
#define DL_PLAN_SEARCH_H

#include "planner/layout_cost.h"

struct dl_exec_options;
struct dl_optim_spec;

struct dl_plan_request {
    const struct dl_graph *g;
    const struct dl_layer_times *times;
    const struct dl_machine *machine;
    int ranks;                         /* N */
    int batch;                         /* global mini-batch */
    size_t memory_limit;               /* bytes per rank; 0: none */
    const struct dl_exec_options *eo;  /* the executor options of the run (kernels); may be NULL */
    const struct dl_optim_spec *optim; /* its optimizer (the memory of its state); NULL: SGD with momentum */
    int skip_memory;                   /* 1: no memory (0 everywhere; no limit may be set): faster */
    enum dl_dtype grad_dtype;          /* the run's --grad-dtype: f32 (0) or bf16, bytes of the gradient sums */
    int zero;                          /* the run's parallel.zero: the optimizer's state a block a dp rank (2: the
                                          gradients too; no pipeline) */
    int sequence_parallel;             /* the run's parallel.sequence_parallel (the shards' dims.sp) */
    const char *no_experts;            /* why the run cannot have expert ranks (what the trainer refuses them
                                          with besides --zero), or NULL */
    /* Tensor rank 0's layer times (allocated here) with the network split
     * over T ranks, measured (cli/layer_times.h), called once per T > 1;
     * NULL: a split layer's time is its whole time times its share of the
     * FLOPs.  An error other than DL_ERR_NOMEM leaves that T to the shares. */
    int (*tensor_times)(void *ctx, const struct dl_graph *g, int T, struct dl_layer_times *out,
                        struct dl_error *err);
    void *tensor_ctx;
};

struct dl_plan_candidate {
    struct dl_plan_layout layout;
    int feasible;
    int over_memory;                   /* infeasible only by the memory limit */
    char why[320];                     /* an infeasible layout: why */
    struct dl_layout_prediction pred;
    size_t memory;                     /* bytes per rank (largest), 0 when not known */
};

struct dl_plan_result {
    int n;
    struct dl_plan_candidate *c;       /* [n] in enumeration order */
    int n_feasible;
    int *rank;                         /* [n_feasible]: indices into c, best first */
    size_t least_memory;               /* the least memory of the layouts over the limit (0: none) */
    int least_memory_at;               /* its index, -1 */
};

int dl_plan_search(const struct dl_plan_request *req, struct dl_plan_result *out, struct dl_error *err);
void dl_plan_result_free(struct dl_plan_result *r);

/* The schedule as --pipeline-schedule spells it ("1f1b", "interleaved:2"); returns buf. */
const char *dl_layout_schedule_str(const struct dl_plan_layout *l, char *buf, size_t size);
/* "dp=2,tp=1,pp=2 1f1b x8" style text ("dp=1,ep=2,..." with expert ranks,
 * " buckets 4M" after a bucket size other than the default); returns buf. */
const char *dl_layout_str(const struct dl_plan_layout *l, char *buf, size_t size);

#endif
