/* tp_split_choice.h: the per-layer split choices the planner searches
 * (doc/planner.md): pairs of fully connected layers whose `split:` the
 * network file leaves to the default rule, the first split by its outputs
 * (column) and the second, reading it through channel-local layers only,
 * by its inputs (row) -- Megatron-LM's pair, one allreduce per pass -- or
 * both kept whole (none).  A choice is a mask over the pairs; a layout
 * carries the layers it keeps whole.  Which kinds take part is their
 * capability (ops/op.h: tp.tp_pairs, tp.tp_by_samples), not their name. */
#ifndef DL_PLAN_SPLIT_CHOICE_H
#define DL_PLAN_SPLIT_CHOICE_H

#include "graph/graph.h"

/* Pairs searched at most (2^this choices); later pairs keep the default rule. */
#define DL_PLAN_MAX_PAIRS 4

/* The pairs of g in topological order: first[k] and second[k] (layer
 * indices), at most DL_PLAN_MAX_PAIRS; returns their number.  A pair: an
 * layer of a tp_pairs kind (fc) with `split:` unset whose output is read, through a chain of
 * single-input channel-local layers (each its producer's only reader), by
 * exactly one such layer with `split:` unset; a layer is in one pair at most. */
int dl_split_pairs(const struct dl_graph *g, int *first, int *second);

/* The layers of the pairs in mask (bit k: pair k), into whole[]; returns
 * their number. */
int dl_split_choice_layers(const int *first, const int *second, int n_pairs, unsigned mask, int *whole);

/* The other choice: the layers of a tp_by_samples kind (convolutions)
 * whose `split:` is unset split by
 * filters (the default rule) or by samples (`split: batch`: Krizhevsky's
 * hybrid, convolutions data parallel across the tensor group, the layers
 * after them following).  1 when g has such a convolution and a fully
 * connected layer (else the choice changes nothing worth a search). */
int dl_split_has_sample_choice(const struct dl_graph *g);

/* Sets `split: batch` on g's convolutions whose split is unset. */
void dl_split_by_samples(struct dl_graph *g);

#endif
