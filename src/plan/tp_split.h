/* tp_split.h: tensor parallelism's splits (doc/parallel.md), decided for
 * one layer at a time in topological order by plan/shard.c's dl_shard_make
 * from the layer's `split:` key, its kind's capabilities (ops/op.h's tp:
 * tp_split, tp_heads, tp_vocab, channel_local, row_local, ...) and how
 * its inputs are spread: the same on every rank without any message.  The
 * executor's steps for them are exec/tp_steps.c (channel blocks),
 * tp_rows.c (bands of rows) and tp_samples.c (shares of the samples); the
 * planner's choice among them is planner/tp_split_choice.c. */
#ifndef DL_PLAN_TP_SPLIT_H
#define DL_PLAN_TP_SPLIT_H

#include "plan/shard.h"

/* Decides layer i's split (s->layer[i]) for s->dims.tp tensor ranks.  A
 * layer whose part has attributes of its own (a linear, attention's
 * heads, an embedding's rows) gets them in a new *local_attr, owned by
 * s->local (freed with the shard); others keep *local_attr.  DL_ERR_SPEC
 * naming the layer for a split that cannot be; DL_ERR_NOMEM. */
int dl_tp_split_layer(struct dl_shard *s, int i, void **local_attr, struct dl_error *err);

/* The channel groups (q, k, v) of layer i's output blocks, and of layer
 * l's input k, for its parameters' slices: 1 unless packed. */
int dl_tp_groups_of(const struct dl_shard *s, int i);
int dl_tp_input_groups(const struct dl_shard *s, const struct dl_layer *l, int k);

#endif
