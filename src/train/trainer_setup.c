/* trainer_setup.c: the parts of a rank's run built before its first step
 * (communicator, grid, trace, data, executors, optimizer, strategy, tied
 * copies, batches read ahead) and what they cannot do together (ZeRO's
 * and the consistency model's refusals, asked of the strategy's
 * capability flags), and their release. */
#include "train/trainer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parallel/zero_weights.h"
#include "train/no_decay.h"
#include "train/param_spans.h"

/* --zero 1, 2 or 3: what it needs, and whether it applies (more than one
 * data-parallel rank; on one it changes nothing). */
static int zero_refusal(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    const struct dl_parallel_opts *po = &o->parallel;
    if (!po->zero)
        return DL_OK;
    int z = po->zero;
    if (!dl_strategy_model(po)->supports_zero)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: synchronous data parallelism only (--consistency sync)", z);
    if (po->codec.ops)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not with --compress (the blocks are summed exactly)", z);
    if (po->grad_dtype != DL_F32 && z >= 2)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not with --grad-dtype bf16 yet (--zero 1 sums in bf16)", z);
    if (o->exec.device && !o->exec.device->host_memory)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not on a device without host memory yet (--device %s)", z,
                         o->exec.device->name);
    if (z >= 2 && o->grid.pp > 1) /* as DeepSpeed: a pipeline's chunks interleave their backwards */
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not with pipeline parallelism (--grid pp=%d); use --zero 1",
                         z, o->grid.pp);
    tr->zero = tr->data_comm->size > 1;
    return DL_OK;
}

/* LARS and LAMB take each parameter tensor's norms, Muon each whole weight
 * matrix: refused where a rank
 * holds part of a tensor (a ZeRO block, a tensor-parallel slice) or where
 * the model's optimizer is not the trainer's (the parameter server's
 * updates its ranges of the vector: supports_no_decay says it is). */
static int layerwise_refusal(const struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    const char *name = dl_optim_names[tr->net->train.optim.kind];
    const char *needs = tr->net->train.optim.kind == DL_OPTIM_MUON ? "which Muon orthogonalises whole"
                                                                      : "whose whole norms the trust ratio needs";
    if (!dl_optim_layerwise(&tr->net->train.optim))
        return DL_OK;
    if (o->parallel.zero)
        return dl_errorf(err, DL_ERR_SPEC, "train.optimizer.type %s: not with --zero %d (a rank's block of the "
                         "weights cuts parameter tensors, %s); use --zero 0", name, o->parallel.zero, needs);
    if (o->grid.tp > 1)
        return dl_errorf(err, DL_ERR_SPEC, "train.optimizer.type %s: not with tensor parallelism (--grid tp=%d: a "
                         "rank holds slices of parameter tensors, %s); use data or pipeline parallelism", name,
                         o->grid.tp, needs);
    if (!dl_strategy_model(&o->parallel)->supports_no_decay)
        return dl_errorf(err, DL_ERR_SPEC, "train.optimizer.type %s: the parameter server (--consistency ssp or "
                         "async) updates ranges of the weights, not parameter tensors; train with sync, local-sgd, "
                         "gossip or easgd", name);
    return DL_OK;
}

static int tied_sum(void *ctx, struct dl_error *err)
{
    return dl_tied_sum(ctx, err);
}

/* The strategy's guard (strategy.h): the step's mean loss, summed over the
 * data-parallel ranks already, agreed over the grid's tensor and pipeline
 * groups (the loss is the last stage's), judged with the norm. */
static int guard_step(void *ctx, const struct dl_step_metrics *m, double grad_norm, int *skip, struct dl_error *err)
{
    struct trainer *tr = ctx;
    double loss = m->loss_sum;
    int rc = dl_trainer_agree_over_grid(tr, &loss, 1, 1, err);
    if (!rc)
        *skip = dl_step_guard_judge(&tr->guard, m->samples > 0 ? loss / m->samples : loss, grad_norm);
    return rc;
}

/* The executors of a step: computing in the network's train.precision and
 * with kernels that sum batch statistics over the ranks when --sync-bn asks
 * for it (whatever the caller's kernel choices say), and with a grid, this
 * rank's shard and group communicators. */
static int init_pipeline(struct trainer *tr, int max_local, int chunks, struct dl_error *err)
{
    struct dl_exec_options o = tr->opts->exec;
    struct dl_kernel_choices *kernels = dl_calloc(1, sizeof *kernels, err);
    if (!kernels)
        return DL_ERR_NOMEM;
    if (o.kernels)
        *kernels = *o.kernels;
    kernels->precision = tr->precision;
    kernels->sync_stats |= tr->opts->parallel.sync_bn;
    o.kernels = kernels;
    int rc = DL_OK;
    if (tr->sharded) {
        o.shard = &tr->shard;
        o.tensor_comm = tr->grid.tensor;
        o.pipeline_comm = tr->grid.pipeline;
        o.experts_comm = tr->grid.experts;
        /* On a device without host memory with a communicator of its own
         * memory in this build (NCCL), the tensor group's collectives run
         * in place on it; else they are staged through host memory. */
        const struct dl_device *dev = o.device;
        if (dev && !dev->host_memory && dev->comm && dl_comm_available(dev->comm) && tr->grid.dims.tp > 1)
            rc = dl_comm_open_over(dev->comm, tr->grid.tensor, &tr->tensor_device_comm, err);
        o.tensor_device_comm = tr->tensor_device_comm;
    }
    o.trace = tr->trace;
    o.doc_mask = tr->net->data.document_mask >= 0;
    o.doc_separator = tr->net->data.document_mask;
    if (tr->opts->parallel.zero) /* ZeRO's equal blocks of the weights */
        o.weights_multiple = tr->data_comm->size;
    o.grads_elsewhere = tr->zero && tr->opts->parallel.zero >= 2; /* ZeRO-2 and 3: the buckets hold them */
    if (tr->zero && tr->opts->parallel.zero == 3) /* ZeRO-3: the rank's block only, from the first draw */
        o.kept_block = tr->data_comm->rank, o.kept_blocks = tr->data_comm->size;
    if (!rc)
        rc = dl_pipeline_init(&tr->pipe, &tr->net->graph, &o, max_local, chunks, tr->opts->pipeline_schedule,
                              dl_trainer_stages_per_rank(tr->opts), tr->net->train.seed, err);
    free(kernels);
    return rc;
}

/* The rank's communicator (the caller's, or one of its own), its place on
 * the grid and in the strategy, --trace, and what the run's checkpoints
 * need before anything loads. */
static int place_rank(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    int rc = DL_OK;
    if (o->comm)
        tr->comm = o->comm;
    else {
        rc = dl_comm_open("self", NULL, NULL, &tr->comm, err);
        tr->own_comm = 1;
        if (rc)
            return rc;
    }
    tr->reporter = tr->comm->rank == 0;
    const struct dl_train_spec *ts = &tr->net->train;
    tr->precision = dl_train_precision(ts);
    if (ts->precision == DL_PRECISION_AUTO) { /* rank 0 times a step of the whole network for all */
        rc = dl_precision_resolve(ts->precision, &tr->net->graph, ts->batch / tr->comm->size, &o->exec, tr->comm,
                                  &tr->precision, &tr->auto_probe, err);
        if (rc)
            return rc;
    }
    rc = dl_trainer_open_grid(tr, err);
    if (!rc && o->trace_path)
        rc = dl_trainer_open_trace(tr, err);
    if (rc)
        return rc;
    rc = dl_parallel_opts_check(&o->parallel, tr->data_comm->size, err);
    if (rc)
        return rc;
    dl_strategy_layout(&o->parallel, tr->data_comm->size, tr->data_comm->rank, &tr->layout);
    rc = dl_trainer_refuse_checkpoints(tr, err);
    if (rc)
        return rc;
    if (o->net_path && o->checkpoint_dir)
        rc = dl_checkpoint_net_hash(o->net_path, &tr->checkpoints.net_crc, err);
    if (!rc && o->checkpoint_dir && mkdir(o->checkpoint_dir, 0777) != 0 && errno != EEXIST)
        rc = dl_errorf(err, DL_ERR_IO, "%s: cannot create the checkpoint folder: %s", o->checkpoint_dir,
                       strerror(errno));
    return rc;
}

/* The splits and the batcher of this rank's shard, in slices of at least
 * `chunks` samples, counting the labelled positions for a loss that
 * ignores a label. */
static int load_data(struct trainer *tr, int chunks, struct dl_error *err)
{
    const struct dl_net *net = tr->net;
    const struct dl_train_spec *ts = &net->train;
    struct trainer_data *d = &tr->data;
    int shards = tr->layout.data_ranks;
    if (ts->batch < shards)
        return dl_errorf(err, DL_ERR_SPEC, "batch %d is smaller than the %d data-parallel ranks: each needs at least "
                         "one sample (use --batch %d or more)", ts->batch, shards, shards);
    const struct dl_graph *g = &net->graph;
    const struct dl_layer *loss = g->loss >= 0 ? &g->layers[g->loss] : NULL;
    d->counts_labels = loss && loss->kind->ignored_label && loss->kind->ignored_label(loss->attr, &d->ignored_label);
    struct dl_data_want want = {g->input, g->classes, g->positions, g->id_limit, .float_targets = g->float_targets};
    if (net->data.document_mask >= 0) { /* the labels across a boundary: the loss ignores them */
        if (!d->counts_labels || g->positions < 2)
            return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: the loss%s%s%s does not take a label per "
                             "position that it can ignore (softmax_cross_entropy on a sequence does)",
                             loss ? " '" : "", loss ? loss->name : "", loss ? "'" : "");
        want.doc_mask = 1;
        want.doc_separator = net->data.document_mask;
        want.doc_ignored = d->ignored_label;
    }
    int rc = dl_dataset_load_for(&net->data, 1, &want, ts->seed, &d->train, err);
    if (!rc)
        rc = dl_dataset_load_for(&net->data, 0, &want, ts->seed, &d->test, err);
    if (!rc)
        rc = dl_batcher_init(&d->batcher, &d->train, ts->batch, tr->layout.data_rank, shards, 1, ts->seed, 0, err);
    if (!rc)
        dl_batcher_set_warning(&d->batcher, dl_trainer_forward_warning, tr);
    d->test_label_norm = -1;
    if (!rc && d->counts_labels)
        dl_batcher_count_labels(&d->batcher, d->ignored_label);
    if (!rc)
        dl_batcher_min_slice(&d->batcher, chunks);
    return rc;
}

/* A layerwise optimizer's parameter tensors (this rank's stages'), said
 * by the reporting rank. */
static int layerwise_tensors(struct trainer *tr, struct dl_exec *const *stages, struct dl_error *err)
{
    int n, rc = dl_param_spans_apply(stages, tr->pipe.V, dl_pipeline_exec(&tr->pipe)->weights, &tr->optim, &n, err);
    if (!rc) {
        char msg[256];
        int out = dl_optim_tensors_left_out(&tr->optim), matrices = 0;
        for (int i = 0; i < tr->optim.n_tensors; i++)
            matrices += tr->optim.tensors[i].rows > 0;
        if (tr->optim.spec.kind == DL_OPTIM_MUON)
            snprintf(msg, sizeof msg, "muon: %d weight matrices orthogonalised, %d other parameter tensors%s on "
                     "AdamW's step (%d left out by no_decay: no weight decay)", matrices, n - matrices,
                     tr->sharded ? " of rank 0" : "", out);
        else
            snprintf(msg, sizeof msg, "%s: a trust ratio for each of %d parameter tensors%s (%d left out by no_decay: "
                     "ratio 1, no weight decay)", tr->optim.algo->name, n, tr->sharded ? " of rank 0" : "", out);
        dl_trainer_warn(tr, msg);
    }
    return rc;
}

/* The executors and the optimizer (with ZeRO, of this rank's block), and
 * the weights no_decay leaves undecayed where the model allows it. */
static int build_model(struct trainer *tr, int chunks, struct dl_error *err)
{
    const struct dl_train_spec *ts = &tr->net->train;
    int rc = zero_refusal(tr, err);
    if (!rc)
        rc = layerwise_refusal(tr, err);
    if (!rc)
        rc = init_pipeline(tr, dl_batcher_max_local(&tr->data.batcher), chunks, err);
    long n_opt = rc ? 0 : dl_pipeline_exec(&tr->pipe)->n_weights;
    if (!rc && tr->zero) { /* ZeRO stage 1: the optimizer holds this rank's block */
        dl_zero_shard_of(n_opt, tr->data_comm->size, tr->data_comm->rank, &tr->zero_shard);
        n_opt = tr->zero_shard.n;
    }
    if (!rc)
        rc = dl_optim_init_on(&tr->optim, &ts->optim, n_opt, dl_exec_device(dl_pipeline_exec(&tr->pipe)), err);
    tr->optim.offset = tr->zero ? tr->zero_shard.lo : 0;
    const struct dl_strategy_ops *model = dl_strategy_model(&tr->opts->parallel);
    if (!rc && ts->optim.no_decay && ts->optim.weight_decay > 0 && !model->supports_no_decay)
        rc = dl_errorf(err, DL_ERR_SPEC, "train.optimizer.no_decay: the parameter server (--consistency ssp or "
                       "async) decays every weight; leave no_decay out or train with sync, local-sgd, gossip or easgd");
    struct dl_exec *stages[!rc && tr->pipe.V > 0 ? tr->pipe.V : 1]; /* the rank's stages share slot 0's weights */
    for (int v = 0; !rc && v < tr->pipe.V; v++)
        stages[v] = &tr->pipe.slot[tr->pipe.first_slot[v]];
    if (!rc && ts->optim.no_decay)
        rc = dl_no_decay_apply(stages, tr->pipe.V, dl_pipeline_exec(&tr->pipe)->weights, ts->optim.no_decay,
                               &tr->optim, NULL, err);
    if (!rc && tr->optim.algo->tensor_step)
        rc = layerwise_tensors(tr, stages, err);
    return rc;
}

/* The consistency strategy over the data-parallel group, with clipping,
 * the grid's norm and tied copies summed across pipeline ranks, where the
 * model's capability flags allow them. */
static int create_strategy(struct trainer *tr, int chunks, struct dl_error *err)
{
    const struct dl_train_spec *ts = &tr->net->train;
    struct dl_parallel_opts po = tr->opts->parallel;
    if (chunks > 1) /* the gradients are final after the last chunk only */
        po.overlap = 0;
    po.expert_replicas = tr->grid.expert_replicas;
    const struct dl_strategy_ops *model = dl_strategy_model(&po);
    int rc = DL_OK;
    if (ts->clip_grad_norm > 0 && !model->supports_clip_grad_norm)
        rc = dl_errorf(err, DL_ERR_SPEC, "--clip-grad-norm: the parameter server (--consistency ssp or async) "
                       "applies each worker's gradient on its own; clip with sync, local-sgd, gossip or easgd");
    if (!rc)
        rc = dl_strategy_create(tr->data_comm, dl_pipeline_exec(&tr->pipe), &tr->optim, &po, ts->seed,
                                dl_trainer_forward_warning, tr, &tr->strategy, err);
    if (!rc && tr->sharded)
        rc = dl_tied_create(dl_pipeline_exec(&tr->pipe), tr->comm, &tr->tied, err);
    if (!rc && tr->tied && !model->supports_tied_across_ranks)
        rc = dl_errorf(err, DL_ERR_SPEC, "a tied parameter (share:) whose layers run in two pipeline ranks' stages: "
                       "the parameter server (--consistency ssp or async) updates the copies on their own; train "
                       "with sync, local-sgd, gossip or easgd");
    for (int i = 1; !rc && tr->strategy && tr->strategy->zero_weights && i < tr->pipe.slots; i++)
        rc = dl_zero_weights_attach(tr->strategy->zero_weights, &tr->pipe.slot[i], err); /* they share its weights */
    if (rc)
        return rc;
    tr->strategy->clip_norm = ts->clip_grad_norm;
    if (tr->sharded) { /* the other parts of the model are on the tensor and pipeline groups */
        tr->strategy->model_sum = dl_trainer_model_norm_sum;
        tr->strategy->model_ctx = tr;
    }
    if (tr->tied) {
        tr->strategy->before_update = tied_sum;
        tr->strategy->update_ctx = tr->tied;
    }
    const struct dl_step_guard_opts *g = &tr->opts->guard;
    if (g->spike_z > 0 && !model->supports_step_guard)
        return dl_errorf(err, DL_ERR_SPEC, "--skip-spikes: with --consistency sync only (every rank judges the same "
                         "summed loss before one update)");
    if ((g->nonfinite || g->spike_z > 0) && model->supports_step_guard) {
        rc = dl_step_guard_init(&tr->guard, g, err);
        if (rc)
            return rc;
        tr->guarded = 1;
        tr->strategy->guard = guard_step;
        tr->strategy->guard_ctx = tr;
    }
    return DL_OK;
}

int dl_trainer_setup(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    const struct dl_train_spec *ts = &tr->net->train;
    int chunks = dl_pipeline_chunks(o->pipeline_chunks, o->grid.pp);
    int rc = place_rank(tr, err);
    if (!rc)
        rc = load_data(tr, chunks, err);
    if (!rc)
        rc = build_model(tr, chunks, err);
    if (!rc)
        rc = create_strategy(tr, chunks, err);
    if (!rc)
        rc = dl_batch_ahead_init(&tr->data.batches, &tr->data.batcher, dl_exec_device(dl_pipeline_exec(&tr->pipe)),
                                 dl_batcher_max_local(&tr->data.batcher), tr->net->graph.input,
                                 tr->trace, err);
    if (rc)
        return rc;
    tr->steps_per_epoch = dl_batcher_steps_per_epoch(&tr->data.batcher);
    tr->total_steps = tr->steps_per_epoch * ts->epochs;
    if (ts->max_steps > 0 && ts->max_steps < tr->total_steps)
        tr->total_steps = ts->max_steps;
    return DL_OK;
}

void dl_trainer_teardown(struct trainer *tr)
{
    dl_batch_ahead_free(&tr->data.batches);
    dl_strategy_free(tr->strategy);
    struct dl_error ignored = {0};
    dl_trainer_checkpoint_wait(tr, NULL, &ignored); /* a write still running when an error ended the run */
    dl_tied_free(tr->tied);
    dl_step_guard_free(&tr->guard);
    free(tr->expert_layers);
    free(tr->expert_counts);
    dl_optim_free(&tr->optim);
    dl_pipeline_free(&tr->pipe);
    if (tr->sharded)
        dl_shard_free(&tr->shard);
    dl_comm_close(tr->tensor_device_comm);
    dl_grid_close(&tr->grid); /* (nothing without a grid) */
    dl_comm_close(tr->flight_data);
    dl_flight_close(tr->flight);
    dl_watchdog_stop(tr->watchdog);
    dl_batcher_free(&tr->data.batcher);
    dl_dataset_free(&tr->data.train);
    dl_dataset_free(&tr->data.test);
    dl_trace_free(tr->trace);
    if (tr->dump_batches)
        fclose(tr->dump_batches);
    if (tr->own_comm)
        dl_comm_close(tr->comm);
}
