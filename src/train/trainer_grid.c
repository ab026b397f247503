/* trainer_grid.c: a rank's run on a grid of tensor and pipeline ranks
 * (doc/parallel.md): its place, group communicators and shard, their
 * blocking calls under the stall watchdog, and the step's and the
 * evaluation's sums and the gradient norm agreed over the grid. */
#include "train/trainer_impl.h"

#include <stdio.h>

int dl_trainer_stages_per_rank(const struct dl_train_opts *o)
{
    return o->pipeline_schedule == DL_SCHED_INTERLEAVED && o->pipeline_virtual > 1 ? o->pipeline_virtual : 1;
}

/* With a grid, the step's and the evaluation's sums (the first `sums`
 * values of v) are this rank's to count only on the stage that holds the
 * loss, and there on tensor rank 0 (the others hold copies); every rank
 * counts its flags (the rest of v).  Summed over the tensor and pipeline
 * groups, every rank of the grid then holds the totals. */
int dl_trainer_agree_over_grid(struct trainer *tr, double *v, int n, int sums, struct dl_error *err)
{
    if (!tr->sharded)
        return DL_OK;
    if (tr->shard.pos.t != 0 || !dl_shard_runs(&tr->shard, tr->net->graph.loss))
        for (int i = 0; i < sums; i++)
            v[i] = 0;
    int rc = dl_comm_sum_small(tr->grid.tensor, v, n, err);
    return rc ? rc : dl_comm_sum_small(tr->grid.pipeline, v, n, err);
}

/* A squared gradient norm of this rank's part of the model summed over the
 * grid's tensor and pipeline groups: the whole model's. */
int dl_trainer_model_norm_sum(void *ctx, double *sq, struct dl_error *err)
{
    struct trainer *tr = ctx;
    int rc = dl_comm_sum_small(tr->grid.tensor, sq, 1, err);
    return rc ? rc : dl_comm_sum_small(tr->grid.pipeline, sq, 1, err);
}

/* The tensor and pipeline groups' blocking calls under the stall watchdog
 * (--stall-warning, --stall-timeout), which names the rank a wait is for. */
static int watch_grid(struct trainer *tr, struct dl_error *err)
{
    const struct dl_parallel_opts *po = &tr->opts->parallel;
    const struct dl_grid_dims *d = &tr->grid.dims;
    if (po->stall_warning_s <= 0 && po->stall_timeout_s <= 0)
        return DL_OK;
    int rc = dl_watchdog_start(tr->comm, d, po->stall_warning_s, po->stall_timeout_s, dl_trainer_forward_warning, tr,
                               &tr->watchdog, err);
    int tensor[d->tp], pipeline[d->pp];
    for (int i = 0; i < d->tp; i++)
        tensor[i] = dl_grid_rank(d, (struct dl_grid_pos){i, tr->grid.pos.d, tr->grid.pos.p});
    for (int i = 0; i < d->pp; i++)
        pipeline[i] = dl_grid_rank(d, (struct dl_grid_pos){tr->grid.pos.t, tr->grid.pos.d, i});
    if (!rc)
        rc = dl_watch_comm(&tr->grid.tensor, tr->watchdog, "tensor", tensor, err);
    return rc ? rc : dl_watch_comm(&tr->grid.pipeline, tr->watchdog, "pipeline", pipeline, err);
}

/* With tensor or pipeline ranks: this rank's place, group communicators and
 * shard, and what the grid cannot do. */
int dl_trainer_open_grid(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    struct dl_grid_dims d = o->grid;
    tr->data_comm = tr->comm;
    if (d.tp * d.pp <= 1)
        return DL_OK;
    if ((long)d.dp * d.tp * d.pp != tr->comm->size)
        return dl_errorf(err, DL_ERR_SPEC, "grid dp=%d x tp=%d x pp=%d, but %d ranks are running", d.dp, d.tp, d.pp,
                         tr->comm->size);
    if (!dl_strategy_model(&o->parallel)->supports_grid)
        return dl_errorf(err, DL_ERR_SPEC, "--consistency: tensor and pipeline ranks train with sync only (the "
                         "data-parallel group of each position sums its gradients every step)");
    int rc = dl_grid_open(tr->comm, &d, &tr->grid, err);
    if (!rc)
        rc = watch_grid(tr, err);
    if (!rc)
        rc = dl_shard_make(&tr->net->graph, &d, dl_trainer_stages_per_rank(o), tr->comm->rank, NULL, &tr->shard, err);
    if (rc)
        return rc;
    tr->sharded = 1;
    tr->data_comm = tr->grid.data;
    for (int i = 0; i < tr->net->graph.n; i++)
        if (tr->shard.layer[i].whole_because && tr->reporter) {
            char msg[400];
            snprintf(msg, sizeof msg, "layer '%s' stays whole on every tensor rank: %s", tr->net->graph.layers[i].name,
                     tr->shard.layer[i].whole_because);
            dl_trainer_forward_warning(tr, msg);
        }
    return DL_OK;
}
