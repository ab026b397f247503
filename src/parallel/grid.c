/* grid.c: a rank's group communicators (see grid.h). */
#include "parallel/grid.h"

#include <string.h>

int dl_grid_open(struct dl_comm *world, const struct dl_grid_dims *dims, struct dl_grid *g, struct dl_error *err)
{
    memset(g, 0, sizeof *g);
    if ((long)dims->dp * dims->tp * dims->pp != world->size)
        return dl_errorf(err, DL_ERR_INTERNAL, "grid of %d x %d x %d ranks on a world of %d", dims->dp, dims->tp,
                         dims->pp, world->size);
    g->dims = *dims;
    g->pos = dl_grid_position(dims, world->rank);
    struct dl_grid_pos q = g->pos;
    /* one color per group: the coordinates the group's members share */
    int rc = world->ops->split(world, q.d + dims->dp * q.p, q.t, &g->tensor, err);
    if (!rc)
        rc = world->ops->split(world, q.t + dims->tp * q.p, q.d, &g->data, err);
    if (!rc)
        rc = world->ops->split(world, q.t + dims->tp * q.d, q.p, &g->pipeline, err);
    int ep = dl_grid_ep(dims);
    if (!rc && ep > 1)
        rc = world->ops->split(world, q.t + dims->tp * (q.p + dims->pp * (q.d / ep)), q.d % ep, &g->experts, err);
    if (!rc && ep > 1)
        rc = world->ops->split(world, q.t + dims->tp * (q.p + dims->pp * (q.d % ep)), q.d / ep, &g->expert_replicas,
                               err);
    if (rc)
        dl_grid_close(g);
    return rc;
}

void dl_grid_close(struct dl_grid *g)
{
    dl_comm_close(g->expert_replicas);
    dl_comm_close(g->experts);
    dl_comm_close(g->pipeline);
    dl_comm_close(g->data);
    dl_comm_close(g->tensor);
    g->tensor = g->data = g->pipeline = g->experts = g->expert_replicas = NULL;
}
