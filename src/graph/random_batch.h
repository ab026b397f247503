/* random_batch.h: a batch of random inputs and labels for a graph, what the
 * benchmarks and the precision probe (train/precision_auto.h) time steps on. */
#ifndef DL_GRAPH_RANDOM_BATCH_H
#define DL_GRAPH_RANDOM_BATCH_H

#include "core/error.h"
#include "graph/graph.h"

/* n samples of g's input shape and dtype: normal values, or int32_t token
 * ids below the vocabulary (g->id_limit) for an i32 input; and labels below
 * its classes (g->positions per sample), or a regression loss's standard
 * normal targets (g->float_targets); the same for the same n (seed 1).
 * Freed by the caller; DL_ERR_NOMEM. */
int dl_graph_random_batch(const struct dl_graph *g, int n, void **x, int **y, struct dl_error *err);

#endif
