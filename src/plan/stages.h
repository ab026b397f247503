/* stages.h: pipeline stages: contiguous ranges of the graph's topological
 * order, one per pipeline rank (doc/parallel.md).  Cut where the network
 * file's `stage:` keys say, else by dynamic programming so that the
 * costliest stage is as cheap as possible (PipeDream's partitioner).  The
 * loss stays with the last stage. */
#ifndef DL_PLAN_STAGES_H
#define DL_PLAN_STAGES_H

#include "graph/graph.h"

struct dl_stages {
    int P;
    int *first;        /* [P + 1]: stage s holds layers [first[s], first[s + 1]); first[P] = n */
    double *cost;      /* [P]: the sum of its layers' costs */
    int from_file;     /* 1: the `stage:` keys set the cuts */
};

/* A layer's cost when nothing better is known: forward and backward FLOPs
 * (3x the forward) plus one operation per output value and pass, so that
 * layers without FLOPs (activations, pooling) still count. */
double dl_stages_layer_cost(const struct dl_layer *l);

/* Cuts g into P stages.  cost[i] is layer i's cost (NULL: the estimate
 * above).  Errors (DL_ERR_SPEC): P larger than the number of layers before
 * the loss, `stage:` keys above P-1, decreasing along the topological order,
 * or leaving a stage without layers; each names the layer and the rule. */
int dl_stages_cut(const struct dl_graph *g, int P, const double *cost, struct dl_stages *out, struct dl_error *err);
void dl_stages_free(struct dl_stages *s);

/* The stage of layer i. */
int dl_stages_of(const struct dl_stages *s, int i);

#endif
