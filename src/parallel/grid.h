/* grid.h: a rank's group communicators on the data x tensor x pipeline
 * grid (plan/rank_grid.h): the tensor group (same d, p), the data group
 * (same t, p) and the pipeline group (same t, d), split from the world;
 * with expert ranks (ep), the expert group (same t, p and d / ep: the
 * ranks that together hold every expert) and the expert replicas (same
 * t, p and d % ep: the ranks that hold the same experts). */
#ifndef DL_PARALLEL_GRID_H
#define DL_PARALLEL_GRID_H

#include "comm/comm.h"
#include "plan/rank_grid.h"

/* This rank's place and its group communicators (split from world, which
 * stays the caller's). */
struct dl_grid {
    struct dl_grid_dims dims;
    struct dl_grid_pos pos;
    struct dl_comm *tensor, *data, *pipeline;
    struct dl_comm *experts, *expert_replicas; /* ep > 1 only; else NULL */
};
int dl_grid_open(struct dl_comm *world, const struct dl_grid_dims *dims, struct dl_grid *g, struct dl_error *err);
void dl_grid_close(struct dl_grid *g);

#endif
