/* stages.h: pipeline stages: contiguous ranges of the graph's topological
 * order (doc/parallel.md).  P pipeline ranks with V stages each (V > 1:
 * the interleaved schedule's virtual stages) cut the network into S = P*V
 * stages 0..S-1; stage s runs on pipeline rank s % P, so rank p holds
 * stages p, p+P, ..., p+(V-1)P (Megatron-LM's layout) and a chunk's forward
 * goes round the ranks V times.  Cut where the network file's `stage:` keys
 * say (numbering the S stages), else by dynamic programming so that the
 * costliest stage is as cheap as possible (PipeDream's partitioner).  The
 * loss stays with the last stage. */
#ifndef DL_PLAN_STAGES_H
#define DL_PLAN_STAGES_H

#include "graph/graph.h"

struct dl_stages {
    int S;             /* stages: P ranks x V per rank */
    int V;             /* stages per pipeline rank (1 unless interleaved) */
    int *first;        /* [S + 1]: stage s holds layers [first[s], first[s + 1]); first[S] = n */
    double *cost;      /* [S]: the sum of its layers' costs */
    int from_file;     /* 1: the `stage:` keys set the cuts */
};

/* A layer's cost when nothing better is known: forward and backward FLOPs
 * (3x the forward) plus one operation per output value and pass, so that
 * layers without FLOPs (activations, pooling) still count. */
double dl_stages_layer_cost(const struct dl_layer *l);

/* Cuts g into P*V stages for P pipeline ranks of V stages each.  cost[i]
 * is layer i's cost (NULL: the estimate above).  Errors (DL_ERR_SPEC): P*V
 * larger than the number of layers before the loss (naming P and V when V >
 * 1), `stage:` keys above S-1, decreasing along the topological order, or
 * leaving a stage without layers; each names the layer and the rule. */
int dl_stages_cut(const struct dl_graph *g, int P, int V, const double *cost, struct dl_stages *out,
                  struct dl_error *err);
void dl_stages_free(struct dl_stages *s);

/* The stage of layer i. */
int dl_stages_of(const struct dl_stages *s, int i);

/* The pipeline rank that runs stage `stage`. */
static inline int dl_stages_rank(const struct dl_stages *s, int stage)
{
    return stage % (s->S / s->V);
}

#endif
