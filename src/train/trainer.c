/* trainer.c: the run of one rank from start to end (dl_train, see
 * trainer.h).  Every random choice (initial weights, shuffles, dropout
 * masks) derives from train.seed, so two runs with the same seed, thread
 * count and rank count print the same losses bit for bit.  The consistency
 * strategy (parallel/strategy.h) decides the rank's role and data shard,
 * turns a worker's gradient into new weights, and says who evaluates and
 * who writes checkpoints; the trainer is the same for every strategy:
 * workers run epochs of steps (trainer_epochs.c), servers serve
 * (trainer_serve.c).  Its state and files: trainer_impl.h. */
#include "train/trainer_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/device.h"
#include "core/clock.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "io/trace.h"
#include "parallel/zero_weights.h"
#include "train/hf_weights.h"

void dl_train_opts_defaults(struct dl_train_opts *o)
{
    memset(o, 0, sizeof *o);
    dl_parallel_opts_defaults(&o->parallel);
    o->pipeline_schedule = DL_SCHED_1F1B;
    o->trace_steps = DL_TRACE_DEFAULT_STEPS;
    o->trace_skew_rank = -1;
    o->guard.nonfinite = 1;
}

void dl_trainer_forward_warning(void *ctx, const char *msg)
{
    struct trainer *tr = ctx;
    if (tr->hooks && tr->hooks->on_warning)
        tr->hooks->on_warning(tr->hooks->ctx, msg);
}

void dl_trainer_warn(struct trainer *tr, const char *msg)
{
    if (tr->reporter)
        dl_trainer_forward_warning(tr, msg);
}

/* The layers this rank's executors run with a bf16 kernel: each stage's
 * first slot's (its other slots choose the same kernels). */
static int bf16_layers(const struct trainer *tr)
{
    int n = 0;
    for (int v = 0; v < tr->pipe.V; v++) {
        const struct dl_exec *e = &tr->pipe.slot[tr->pipe.first_slot[v]];
        for (int i = 0; i < tr->net->graph.n; i++)
            n += e->kernel[i] && e->kernel[i]->dtype == DL_BF16;
    }
    return n;
}

/* --dump-weights: rank 0 writes the whole network's weights, gathered from
 * the shards of a grid. */
static int dump_weights(struct trainer *tr, struct dl_error *err)
{
    const struct dl_exec *e = dl_pipeline_exec(&tr->pipe);
    long n = dl_exec_param_count(&tr->net->graph, DL_PARAMS_TRAINABLE);
    float *whole = tr->reporter ? dl_calloc((size_t)(n ? n : 1), sizeof *whole, err) : NULL;
    if (tr->reporter && !whole)
        return DL_ERR_NOMEM;
    int rc = dl_trainer_weights_whole(tr, 1, err); /* ZeRO stage 3: gathered first */
    if (!rc)
        rc = dl_exec_gather(e, tr->comm, DL_PARAMS_TRAINABLE, e->weights, whole, err);
    if (!rc && tr->reporter)
        rc = dl_atomic_write_file(tr->opts->dump_weights, whole, sizeof *whole * (size_t)n, err);
    free(whole);
    return rc ? rc : dl_trainer_weights_whole(tr, 0, err);
}

/* How the ranks share the run, for the start banner: the grid and pipeline
 * schedule when there is one, then the data-parallel strategy. */
static void describe_layout(const struct trainer *tr, char *buf, size_t size)
{
    char strategy[256];
    dl_strategy_describe(tr->strategy, strategy, sizeof strategy);
    if (!tr->sharded) {
        snprintf(buf, size, "%s", strategy);
        return;
    }
    const struct dl_grid_dims *d = &tr->opts->grid;
    char schedule[48];
    int V = dl_trainer_stages_per_rank(tr->opts);
    snprintf(schedule, sizeof schedule, V > 1 ? "%s:%d" : "%s", dl_schedule_kind_name(tr->opts->pipeline_schedule), V);
    char experts[48] = "";
    if (d->ep > 1)
        snprintf(experts, sizeof experts, " (%d x ep=%d expert ranks)", d->dp / d->ep, d->ep);
    snprintf(buf, size, "grid dp=%d%s x tp=%d x pp=%d, %d pipeline chunk%s (%s); data-parallel groups: %s", d->dp,
             experts, d->tp, d->pp, tr->pipe.chunks, tr->pipe.chunks == 1 ? "" : "s", schedule,
             d->dp > 1 ? strategy : "none");
}

/* on_memory: every rank's memory, gathered to all (each rank's grows with
 * the grid: pipeline slots, shards), told by rank 0. */
static int report_memory(struct trainer *tr, struct dl_error *err)
{
    if (!tr->hooks || !tr->hooks->on_memory)
        return DL_OK;
    struct dl_pipeline_memory pm;
    dl_pipeline_memory(&tr->pipe, &pm);
    struct dl_grid_pos pos = tr->sharded ? tr->shard.pos : (struct dl_grid_pos){.t = 0, .d = tr->comm->rank, .p = 0};
    long grads = tr->strategy && tr->strategy->grad_values >= 0 ? tr->strategy->grad_values : pm.weights;
    long held = tr->strategy && tr->strategy->zero_weights /* ZeRO-3: the block and one layer */
                    ? dl_zero_held_weights(&tr->zero_shard, pm.weights, 3, dl_zero_weights_gathered(tr->strategy->zero_weights))
                    : pm.weights;
    struct dl_rank_memory mine = {tr->comm->rank, pos.d, pos.t, pos.p, pm.slots, (double)pm.arena_bytes,
                                  (double)held, (double)pm.state, (double)grads,
                                  (double)tr->optim.algo->state_vectors * (double)tr->optim.n};
    int n = tr->comm->size;
    struct dl_rank_memory *all = dl_calloc((size_t)n, sizeof *all, err);
    if (!all)
        return DL_ERR_NOMEM;
    int rc = n > 1 ? tr->comm->ops->allgather(tr->comm, &mine, all, sizeof mine, err) : DL_OK;
    if (n == 1)
        all[0] = mine;
    if (!rc && tr->reporter)
        tr->hooks->on_memory(tr->hooks->ctx, all, n);
    free(all);
    return rc;
}

/* The run's options: the caller's, with what the network file says of the
 * run (trainer.h's rule): parallel.zero, parallel.sequence_parallel and
 * parallel.recompute whatever the caller's say; parallel.micro_batches
 * where the caller asked for no chunk count; train.device where the caller
 * gave no device.  (train.precision: trainer_setup.c, auto measured there;
 * the other train.* keys are read from net->train where they are used.) */
static int options_of(const struct dl_net *net, const struct dl_train_opts *caller, struct dl_train_opts *o,
                      struct dl_error *err)
{
    const struct dl_parallel_spec *p = &net->parallel;
    *o = *caller;
    o->parallel.zero = p->zero;
    o->grid.sp = p->sequence_parallel;
    o->exec.recompute = (enum dl_recompute)p->recompute;
    if (!o->pipeline_chunks)
        o->pipeline_chunks = p->micro_batches;
    if (!o->exec.device)
        return dl_device_open(net->train.device, dl_threads_local_rank(), &o->exec.device, err);
    return DL_OK;
}

int dl_train(const struct dl_net *net, const struct dl_train_opts *opts, const struct dl_train_hooks *hooks,
             struct dl_train_result *res, struct dl_error *err)
{
    struct trainer tr;
    memset(&tr, 0, sizeof tr);
    memset(res, 0, sizeof *res);
    struct dl_train_opts run_opts;
    tr.net = net;
    tr.opts = &run_opts;
    tr.hooks = hooks;
    int rc = options_of(net, opts, &run_opts, err);
    if (rc)
        return rc;
    opts = &run_opts;
    rc = dl_trainer_setup(&tr, err);
    if (!rc) {
        res->bf16_layers = bf16_layers(&tr);
        res->precision_auto = net->train.precision == DL_PRECISION_AUTO;
        res->precision_probe = tr.auto_probe;
        char how[384];
        describe_layout(&tr, how, sizeof how);
        if (tr.reporter && hooks && hooks->on_start)
            hooks->on_start(hooks->ctx, net, tr.data.train.n, tr.data.test.n, tr.steps_per_epoch, tr.comm->size, how);
        rc = report_memory(&tr, err);
    }
    if (!rc) {
        tr.run_start = dl_clock_now();
        if (!rc && opts->sample_every > 0) {
            const struct dl_graph *g = &tr.net->graph;
            if (tr.sharded || g->input.dtype != DL_I32 || g->positions != g->input.h)
                rc = dl_errorf(err, DL_ERR_SPEC, "--sample-every: needs a network of token ids with a loss at every "
                               "position, on one process or data-parallel ranks (not a tensor or pipeline grid)");
            else if (g->classes != 256)
                rc = dl_bpe_open("gpt2", &tr.bpe, err);
        }
        if (!rc && opts->init_from) {
            rc = tr.sharded ? dl_errorf(err, DL_ERR_SPEC, "--init-from: loads one process's whole network (one "
                                        "process or data parallelism), not a tensor or pipeline grid's parts")
                            : dl_hf_import(opts->init_from, &tr.net->graph, dl_pipeline_exec(&tr.pipe), err);
            if (!rc) /* ZeRO stage 3: this rank's block of what was read kept */
                rc = dl_trainer_weights_whole(&tr, 0, err);
            if (rc == DL_OK && tr.comm->rank == 0) {
                char msg[1200];
                snprintf(msg, sizeof msg, "starting from the weights of %s", opts->init_from);
                dl_trainer_warn(&tr, msg);
            }
        }
        if (!rc && opts->resume)
            rc = dl_trainer_resume(&tr, res, err);
        if (!rc)
            rc = tr.layout.role == DL_ROLE_SERVER ? dl_trainer_serve(&tr, res, err)
                                                  : dl_trainer_train_epochs(&tr, res, err);
        if (!rc && tr.layout.role != DL_ROLE_SERVER) /* the last update's weights, before they are used */
            rc = dl_trainer_check_weights(&tr, res->steps, err);
        tr.left_loop_together = rc == DL_OK || rc == DL_STOPPED || tr.nonfinite_stop;
    }
    if (rc == DL_STOPPED) {
        res->seconds = dl_clock_now() - tr.run_start;
        rc = dl_trainer_finish_trace(&tr, rc, err);
        dl_bpe_free(tr.bpe);
        dl_trainer_teardown(&tr);
        return rc;
    }
    if (!rc)
        rc = dl_trainer_evaluate_final(&tr, res, err);
    if (!rc && opts->dump_weights)
        rc = dump_weights(&tr, err);
    res->seconds = dl_clock_now() - tr.run_start;
    rc = dl_trainer_finish_trace(&tr, rc, err);
    dl_bpe_free(tr.bpe);
    dl_trainer_teardown(&tr);
    return rc;
}
