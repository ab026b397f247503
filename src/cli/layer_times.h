/* layer_times.h: per-layer compute times for the planner (doc/planner.md):
 * seconds per sample of each layer's forward and backward on the whole
 * (unsplit) layer, from one of three sources, each layer labelled with
 * its own: FLOP estimates at a given rate (--flops, reproducible), the
 * tuning database's measured kernel times where it has them, or a
 * measurement made now of the whole network on this process. */
#ifndef DL_CLI_LAYER_TIMES_H
#define DL_CLI_LAYER_TIMES_H

#include "graph/graph.h"
#include "planner/layout_cost.h"

struct dl_exec_options;
struct dl_optim_spec;

/* Every layer from its FLOPs (plan/stages.h's dl_stages_layer_cost: the
 * forward one third, the backward two thirds) at `rate` FLOP/s. */
void dl_layer_times_flops(const struct dl_graph *g, double rate, struct dl_layer_times *t);

/* Every layer timed now: forward and backward of the whole network on a
 * random batch of `batch` samples and again on its first batch / 8 (at
 * least 1), 1 warm-up and `steps` timed steps each, each layer's median;
 * the line through the two gives its fixed and per-sample seconds.  With
 * eo->shard set, the layers of that shard's view (t still has g->n). */
int dl_layer_times_measure(const struct dl_graph *g, int batch, int steps, const struct dl_exec_options *eo,
                           struct dl_layer_times *t, struct dl_error *err);

/* Tensor rank 0's layers timed now, as dl_layer_times_measure does, when
 * the network is split over T tensor ranks (its default splits): its
 * shard run by an executor whose tensor group is a stand-in of T ranks
 * (comm/standin.c), so that the times are a real rank's compute on its
 * slices (small slices use a core worse than their share of the FLOPs
 * says), without the collectives.  t is allocated here. */
int dl_layer_times_tensor(const struct dl_graph *g, int T, int batch, int steps, const struct dl_exec_options *eo,
                          struct dl_layer_times *t, struct dl_error *err);

/* The planner's hook (struct dl_plan_request's tensor_times) over
 * dl_layer_times_tensor: ctx is a struct dl_tensor_times_request; each
 * tensor rank's batch is that of a data-parallel rank of ranks / T. */
struct dl_tensor_times_request {
    int batch, ranks;
    const struct dl_exec_options *eo;
};
int dl_layer_times_tensor_hook(void *ctx, const struct dl_graph *g, int T, struct dl_layer_times *t,
                               struct dl_error *err);

/* Layers the tuning database (db_path, NULL: the default) has times for at
 * batch `batch` (undivided, any kernel: the fastest) replace theirs and
 * are labelled DL_TIME_DB; the database is only read.  Returns the number
 * of layers replaced, or -1 with err set. */
int dl_layer_times_from_db(const struct dl_graph *g, int batch, const char *db_path, struct dl_layer_times *t,
                           struct dl_error *err);

/* The median seconds per parameter of `steps` updates (after one) by
 * optimizer spec of a vector of n parameters (on the host), each after
 * zeroing the gradients as a training step does. */
int dl_layer_times_optimizer(const struct dl_optim_spec *spec, long n, int steps, double *per_param,
                             struct dl_error *err);

/* The planner's times: every layer from FLOPs at flop_rate when it is
 * above 0, else measured now at `batch` (3 timed steps), and then the
 * optimizer `optim` (NULL: left out) timed on the network's parameters;
 * then (use_db) the tuning database's where it has them.  summary: "N
 * from the tuning database, M measured now" style text. */
int dl_layer_times_gather(const struct dl_graph *g, int batch, double flop_rate, int use_db, const char *db_path,
                          const struct dl_exec_options *eo, const struct dl_optim_spec *optim,
                          struct dl_layer_times *t, char *summary, size_t size, struct dl_error *err);

#endif
