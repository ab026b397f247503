/* layout_memory.h: the memory of a rank of a layout (doc/planner.md), from
 * the executor's own memory planner: what dl_pipeline_init allocates on
 * each pipeline rank of the layout. */
#ifndef DL_PLAN_LAYOUT_MEMORY_H
#define DL_PLAN_LAYOUT_MEMORY_H

#include "planner/layout_cost.h"

/* The largest memory of a rank of layout l (bytes): for every pipeline
 * rank (tensor rank 0, data rank 0: with expert ranks, the first block of
 * each layer's experts, an ep-th of them) and each of its V stages, the
 * executor planner's arena for the stage's layers at one chunk's batch
 * times the chunks its schedule keeps in flight on that stage, plus the rank's
 * parameters under optimizer optim (optim/optim.h's dl_optim_param_bytes;
 * NULL: SGD with momentum).  eo: the executor options the run uses
 * (kernels; may be NULL).  per_rank[pp] (may be NULL). */
struct dl_exec_options;
struct dl_optim_spec;
int dl_layout_memory(const struct dl_graph *g, const struct dl_plan_layout *l, int batch,
                     const struct dl_exec_options *eo, const struct dl_optim_spec *optim, size_t *bytes,
                     size_t *per_rank, struct dl_error *err);

/* The two parts of it per pipeline rank p and stage v of it (index
 * p * V + v): arena[p*V + v] (one chunk's, the executor planner's) and
 * params[p] (the rank's parameters' bytes under optim, shared by its
 * stages), and slots[p*V + v], the chunks l's schedule keeps in flight on
 * that stage (dl_schedule_stage_slots). */
int dl_layout_arenas(const struct dl_graph *g, const struct dl_plan_layout *l, int batch,
                     const struct dl_exec_options *eo, const struct dl_optim_spec *optim, size_t *arena,
                     size_t *params, struct dl_error *err);
int dl_layout_slots(const struct dl_plan_layout *l, int *slots, struct dl_error *err);
/* max over p of sum over v of slots[p*V + v] * arena[p*V + v], plus params[p]. */
size_t dl_layout_memory_of(int P, int V, const size_t *arena, const size_t *params, const int *slots,
                           size_t *per_rank);

/* A copy of g's layer array whose `stage` keys put layout l's cuts in
 * place and whose `split:` keys keep l's whole layers whole (what
 * dl_shard_make then follows), in *staged (same layers
 * otherwise, not owned: free staged->layers only). */
int dl_layout_staged_graph(const struct dl_graph *g, const struct dl_plan_layout *l, struct dl_graph *staged,
                           struct dl_error *err);

#endif
