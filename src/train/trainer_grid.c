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
 * grid's tensor, pipeline and expert groups: the whole model's. */
int dl_trainer_model_norm_sum(void *ctx, double *sq, struct dl_error *err)
{
    struct trainer *tr = ctx;
    int rc = dl_comm_sum_small(tr->grid.tensor, sq, 1, err);
    if (!rc && tr->grid.experts)
        rc = dl_comm_sum_small(tr->grid.experts, sq, 1, err);
    return rc ? rc : dl_comm_sum_small(tr->grid.pipeline, sq, 1, err);
}

/* The grid's groups of this rank, and the world ranks of group g's members
 * in its order into out (returns their number). */
enum group_axis { GROUP_DATA, GROUP_TENSOR, GROUP_PIPELINE, GROUP_EXPERTS };

static int group_world_ranks(const struct trainer *tr, enum group_axis g, int *out)
{
    const struct dl_grid_dims *d = &tr->grid.dims;
    struct dl_grid_pos q = tr->grid.pos;
    int ep = dl_grid_ep(d), n = g == GROUP_DATA ? d->dp : g == GROUP_TENSOR ? d->tp : g == GROUP_PIPELINE ? d->pp : ep;
    for (int i = 0; i < n; i++) {
        struct dl_grid_pos p = q;
        *(g == GROUP_TENSOR ? &p.t : g == GROUP_PIPELINE ? &p.p : &p.d) = g == GROUP_EXPERTS ? q.d - q.d % ep + i : i;
        out[i] = dl_grid_rank(d, p);
    }
    return n;
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
    int tensor[d->tp], pipeline[d->pp], experts[dl_grid_ep(d)];
    group_world_ranks(tr, GROUP_TENSOR, tensor);
    group_world_ranks(tr, GROUP_PIPELINE, pipeline);
    group_world_ranks(tr, GROUP_EXPERTS, experts);
    if (!rc)
        rc = dl_watch_comm(&tr->grid.tensor, tr->watchdog, "tensor", tensor, err);
    if (!rc && tr->grid.experts)
        rc = dl_watch_comm(&tr->grid.experts, tr->watchdog, "expert", experts, err);
    return rc ? rc : dl_watch_comm(&tr->grid.pipeline, tr->watchdog, "pipeline", pipeline, err);
}

/* What expert ranks cannot do yet, or cannot do at all: every rank of an
 * expert group must run its layers with experts as often as the others
 * (their rows travel together), and the experts' gradients, summed from
 * every rank's samples, are right only when the ranks' shares are equal. */
static int refuse_experts(const struct trainer *tr, const struct dl_grid_dims *d, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    int ep = dl_grid_ep(d), with_experts = 0;
    if (ep == 1)
        return DL_OK;
    for (int i = 0; i < tr->net->graph.n; i++)
        with_experts |= tr->net->graph.layers[i].kind->expert_split != NULL;
    if (!with_experts)
        return dl_errorf(err, DL_ERR_SPEC, "--grid ep=%d: the network has no layer with experts (type: moe) to "
                         "spread over expert ranks", ep);
    if (tr->net->train.batch % d->dp)
        return dl_errorf(err, DL_ERR_SPEC, "--grid ep=%d: the batch (%d) must divide evenly over the %d "
                         "data-parallel ranks (dp x ep), so that every expert rank runs as many samples",
                         ep, tr->net->train.batch, d->dp);
    if (o->parallel.zero)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not with expert ranks (--grid ep=%d) yet", o->parallel.zero, ep);
    if (o->parallel.codec.ops)
        return dl_errorf(err, DL_ERR_SPEC, "--compress: not with expert ranks (--grid ep=%d) yet", ep);
    if (o->exec.device && !o->exec.device->host_memory)
        return dl_errorf(err, DL_ERR_SPEC, "--grid ep=%d: the experts' rows travel through host memory; not on "
                         "--device %s yet", ep, o->exec.device->name);
    return DL_OK;
}

/* The flight recorder on the data group and, with a grid, the tensor,
 * pipeline and expert groups (several ranks only). */
static int record_flights(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    if (tr->comm->size == 1)
        return DL_OK;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", o->flight_dir ? o->flight_dir : "dltrain-flight");
    if (!o->flight_dir && o->checkpoint_dir)
        snprintf(dir, sizeof dir, "%s/flight", o->checkpoint_dir);
    int rc = dl_flight_open(dir, tr->comm->rank, tr->comm->size, &tr->flight, err);
    if (rc)
        return rc;
    if (o->stop_calls_step > 0 && o->stop_calls_rank == tr->comm->rank)
        dl_flight_stop_at(tr->flight, o->stop_calls_step, o->stop_calls_label, o->stop_calls_crash);
    int n = tr->comm->size, world[n];
    if (!tr->sharded) { /* the world is the data group: recorded through a wrapper of its own */
        for (int i = 0; i < n; i++)
            world[i] = i;
        tr->flight_data = tr->comm;
        rc = dl_flight_record(&tr->flight_data, tr->flight, "data", world, 0, err);
        if (!rc)
            tr->data_comm = tr->flight_data;
        else
            tr->flight_data = NULL;
        return rc;
    }
    struct { struct dl_comm **c; const char *name; enum group_axis axis; } group[] = {
        {&tr->grid.data, "data", GROUP_DATA}, {&tr->grid.tensor, "tensor", GROUP_TENSOR},
        {&tr->grid.pipeline, "pipeline", GROUP_PIPELINE}, {&tr->grid.experts, "expert", GROUP_EXPERTS}};
    for (int k = 0; k < 4 && !rc; k++)
        if (*group[k].c) {
            group_world_ranks(tr, group[k].axis, world);
            rc = dl_flight_record(group[k].c, tr->flight, group[k].name, world, 1, err);
        }
    if (!rc)
        tr->data_comm = tr->grid.data;
    return rc;
}

/* With tensor, pipeline or expert ranks: this rank's place, group communicators and
 * shard, and what the grid cannot do. */
int dl_trainer_open_grid(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    struct dl_grid_dims d = o->grid;
    tr->data_comm = tr->comm;
    if (d.tp * d.pp <= 1 && dl_grid_ep(&d) == 1)
        return record_flights(tr, err);
    if ((long)d.dp * d.tp * d.pp != tr->comm->size)
        return dl_errorf(err, DL_ERR_SPEC, "grid dp=%d x tp=%d x pp=%d, but %d ranks are running", d.dp, d.tp, d.pp,
                         tr->comm->size);
    if (!dl_strategy_model(&o->parallel)->supports_grid)
        return dl_errorf(err, DL_ERR_SPEC, "--consistency: tensor, pipeline and expert ranks train with sync only "
                         "(the data-parallel group of each position sums its gradients every step)");
    int rc = refuse_experts(tr, &d, err);
    if (rc)
        return rc;
    rc = dl_grid_open(tr->comm, &d, &tr->grid, err);
    if (!rc)
        rc = watch_grid(tr, err);
    if (!rc)
        rc = dl_shard_make(&tr->net->graph, &d, dl_trainer_stages_per_rank(o), tr->comm->rank, NULL, &tr->shard, err);
    if (rc)
        return rc;
    tr->sharded = 1;
    tr->data_comm = tr->grid.data;
    rc = record_flights(tr, err);
    if (rc)
        return rc;
    for (int i = 0; i < tr->net->graph.n; i++)
        if (tr->shard.layer[i].whole_because && tr->reporter) {
            char msg[400];
            snprintf(msg, sizeof msg, "layer '%s' stays whole on every tensor rank: %s", tr->net->graph.layers[i].name,
                     tr->shard.layer[i].whole_because);
            dl_trainer_forward_warning(tr, msg);
        }
    return DL_OK;
}
