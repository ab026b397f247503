/* trainer.c: the training loop of one rank (see trainer.h).  Every random
 * choice (initial weights, shuffles, dropout masks) derives from train.seed,
 * so two runs with the same seed, thread count and rank count print the same
 * losses bit for bit.  The consistency strategy (parallel/strategy.h) decides
 * the rank's role and data shard, turns a worker's gradient into new weights,
 * and says who evaluates and who writes checkpoints; this file is the same
 * loop for every strategy: workers run epochs of steps, servers serve.  A
 * step's forward and backward passes are a schedule's (train/pipeline.h):
 * with a grid of tensor and pipeline ranks (doc/parallel.md) this rank runs
 * its shard of the network over chunks of its batch, the strategy works on
 * the data-parallel group, and the step's sums are agreed over the grid.
 * Batches come through train/batch_ahead.h: on a device without host
 * memory the next one is read and its copy queued before a step computes. */
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "exec/exec.h"
#include "io/atomic_file.h"
#include "io/trace.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "parallel/grid.h"
#include "parallel/watchdog.h"
#include "parallel/zero.h"
#include "parallel/trace_ranks.h"
#include "spec/netfile.h"
#include "train/batch_ahead.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_grid.h"
#include "train/numerics.h"
#include "train/hf_gpt2.h"
#include "train/no_decay.h"
#include "train/tied.h"
#include "train/pipeline.h"
#include "train/sample.h"
#include "train/signals.h"

/* Everything one rank's run holds. */
struct trainer {
    const struct dl_net *net;
    const struct dl_train_opts *opts;
    const struct dl_train_hooks *hooks;
    struct dl_comm *comm;
    int own_comm;
    int reporter;                   /* rank 0: the one that reports */
    struct dl_rank_layout layout;   /* role, data shard, evaluation, checkpoint writer */
    struct dl_dataset train, test;
    struct dl_batcher batcher;
    /* A loss that ignores a label: its mean is over the labelled positions
     * of the whole mini-batch (the batcher counts them per step) and of
     * the whole test split (counted once, test_label_norm; < 0 before). */
    int counts_labels, ignored_label;
    double test_label_norm;
    struct dl_pipeline pipe;        /* the executors of this rank's step */
    struct dl_tied *tied;           /* copies of tied parameters summed across pipeline ranks, or NULL */
    int zero;                       /* --zero 1 on more than one data-parallel rank: */
    struct dl_zero_shard zero_shard; /*   this rank's block of the weights and optimizer state */
    int sharded;                    /* a grid of tensor or pipeline ranks: */
    struct dl_grid grid;            /*   this rank's place and group communicators */
    struct dl_shard shard;          /*   its part of the network */
    struct dl_comm *tensor_device_comm; /* its tensor group over the device's own communicator (NCCL), or NULL */
    struct dl_comm *data_comm;      /* the data-parallel group: the world, or the grid's */
    struct dl_watchdog *watchdog;   /* stalls in the tensor and pipeline groups' blocking calls */
    struct dl_optim optim;
    struct dl_strategy *strategy;
    struct dl_batch_ahead batches;  /* this rank's part of each batch, read (and copied) a step ahead */
    const struct dl_batch_slot *batch; /* the step's */
    long steps_per_epoch, total_steps;
    double run_start;
    uint32_t net_crc;
    /* resume point (from a checkpoint) */
    int resumed;
    long start_epoch, start_step;   /* start_step: global steps already done */
    struct dl_checkpoint_meta resume;
    /* checkpoint schedule */
    long steps_since_checkpoint;
    double last_checkpoint_time;
    /* --trace: the recorder (NULL: off); whether a non-finite loss, which
     * every rank sees at the same step, ended the training loop; and
     * whether every rank left the loop together (it ran out, a stop
     * signal, or that loss), so that they can meet to gather their events
     * whatever happens after it */
    struct dl_trace *trace;
    int nonfinite_stop, left_loop_together;
    struct dl_bpe *bpe;             /* --sample-every's vocabulary (NULL: bytes) */
    FILE *dump_batches;             /* --debug-dump-batches (rank 0) */
};

/* The running sums of the epoch in progress. */
struct epoch_tally {
    double start;                   /* clock at the epoch's start */
    double loss_sum, correct;       /* over the samples seen */
    long seen, step;                /* samples and steps so far, a resumed epoch's earlier ones included */
    long seen_before;               /* samples done before a resume */
    double comm_seconds, exposed_seconds;
};

/* What one training step produced. */
struct step_outcome {
    struct dl_step_metrics metrics;
    struct dl_step_stats stats;
    struct dl_nonfinite nonfinite;  /* where a NaN or infinity first appeared */
};

void dl_train_opts_defaults(struct dl_train_opts *o)
{
    memset(o, 0, sizeof *o);
    dl_parallel_opts_defaults(&o->parallel);
    o->pipeline_schedule = DL_SCHED_1F1B;
    o->trace_steps = DL_TRACE_DEFAULT_STEPS;
    o->trace_skew_rank = -1;
}

/* With a grid, the step's and the evaluation's sums (the first `sums`
 * values of v) are this rank's to count only on the stage that holds the
 * loss, and there on tensor rank 0 (the others hold copies); every rank
 * counts its flags (the rest of v).  Summed over the tensor and pipeline
 * groups, every rank of the grid then holds the totals. */
static int agree_over_grid(struct trainer *tr, double *v, int n, int sums, struct dl_error *err)
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
/* --zero 1 or 2: what it needs, and whether it applies (more than one
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
    if (po->grad_dtype != DL_F32 && z == 2)
        return dl_errorf(err, DL_ERR_SPEC, "--zero 2: not with --grad-dtype bf16 yet (--zero 1 sums in bf16)");
    if (o->exec.device && !o->exec.device->host_memory)
        return dl_errorf(err, DL_ERR_SPEC, "--zero %d: not on a device without host memory yet (--device %s)", z,
                         o->exec.device->name);
    if (z == 2 && o->grid.pp > 1) /* as DeepSpeed: a pipeline's chunks interleave their backwards */
        return dl_errorf(err, DL_ERR_SPEC, "--zero 2: not with pipeline parallelism (--grid pp=%d); use --zero 1",
                         o->grid.pp);
    tr->zero = tr->data_comm->size > 1;
    return DL_OK;
}

static int tied_sum(void *ctx, struct dl_error *err)
{
    return dl_tied_sum(ctx, err);
}

static int model_norm_sum(void *ctx, double *sq, struct dl_error *err)
{
    struct trainer *tr = ctx;
    int rc = dl_comm_sum_small(tr->grid.tensor, sq, 1, err);
    return rc ? rc : dl_comm_sum_small(tr->grid.pipeline, sq, 1, err);
}

/* Test loss and accuracy, where the strategy's layout says: a slice per
 * data-parallel rank, summed, or the whole split on rank 0. */
static int evaluate(struct trainer *tr, struct dl_epoch_report *er, struct dl_error *err)
{
    long n = tr->test.n, first = 0, count = n;
    int split = tr->layout.eval == DL_EVAL_SPLIT;
    dl_watchdog_set_step(tr->watchdog, 0);
    if (split) {
        int p = tr->data_comm->size, k = tr->data_comm->rank;
        first = n * k / p;
        count = n * (k + 1) / p - first;
    } else if (tr->comm->rank != 0) {
        return DL_OK;
    }
    double t0 = tr->trace ? dl_clock_now() : 0;
    if (tr->counts_labels && tr->test_label_norm < 0) /* the divisor of the whole split's mean, every rank's */
        tr->test_label_norm = dl_dataset_label_norm(&tr->test, 0, n, tr->ignored_label);
    tr->pipe.label_norm = tr->counts_labels ? tr->test_label_norm : 0;
    /* the samples are views of the split, or decoded from files on the way */
    struct dl_batcher reader;
    int rc = dl_batcher_init_range(&reader, &tr->test, dl_pipeline_exec(&tr->pipe)->max_batch, first, count, err);
    int b = 0;
    const float *x;
    const int *y;
    double sums[2] = {0, 0};
    while (!rc && (b = dl_batcher_next_view(&reader, &x, &y)) > 0) {
        double loss;
        long correct;
        rc = dl_pipeline_evaluate(&tr->pipe, x, y, b, &loss, &correct, err);
        sums[0] += loss;
        sums[1] += (double)correct;
    }
    if (!rc && b < 0) {
        *err = reader.error;
        rc = err->code ? err->code : DL_ERR_INTERNAL;
    }
    dl_batcher_free(&reader);
    if (!rc && split)
        rc = dl_comm_sum_small(tr->data_comm, sums, 2, err);
    if (!rc)
        rc = agree_over_grid(tr, sums, 2, 2, err);
    dl_trace_span(tr->trace, DL_TRACE_EVAL, "evaluate", t0);
    if (rc)
        return rc;
    er->test_loss = n ? sums[0] / (double)n : 0;
    if (!isfinite(er->test_loss)) /* with finite weights (check_weights ran): an activation overflowed */
        return dl_errorf(err, DL_ERR_DATA, "the test loss is %g (the weights are finite, a layer's output "
                         "overflowed): lower the learning rate, or check the data", er->test_loss);
    er->test_accuracy = n ? sums[1] / ((double)n * tr->net->graph.positions) : 0; /* correct positions */
    er->test_samples = n;
    er->evaluated = 1;
    return DL_OK;
}

/* Warnings of any rank (stall detection names missing ranks from rank 0 or 1). */
static void forward_warning(void *ctx, const char *msg)
{
    struct trainer *tr = ctx;
    if (tr->hooks && tr->hooks->on_warning)
        tr->hooks->on_warning(tr->hooks->ctx, msg);
}

/* Warnings of the run, reported by rank 0. */
static void warn(struct trainer *tr, const char *msg)
{
    if (tr->reporter)
        forward_warning(tr, msg);
}

/* The pipeline stages each pipeline rank holds: V for interleaved:V, else 1. */
static int stages_per_rank(const struct dl_train_opts *o)
{
    return o->pipeline_schedule == DL_SCHED_INTERLEAVED && o->pipeline_virtual > 1 ? o->pipeline_virtual : 1;
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
    kernels->precision = dl_train_precision(&tr->net->train);
    kernels->sync_stats |= tr->opts->parallel.sync_bn;
    o.kernels = kernels;
    int rc = DL_OK;
    if (tr->sharded) {
        o.shard = &tr->shard;
        o.tensor_comm = tr->grid.tensor;
        o.pipeline_comm = tr->grid.pipeline;
        /* On a device without host memory with a communicator of its own
         * memory in this build (NCCL), the tensor group's collectives run
         * in place on it; else they are staged through host memory. */
        const struct dl_device *dev = o.device;
        if (dev && !dev->host_memory && dev->comm && dl_comm_available(dev->comm) && tr->grid.dims.tp > 1)
            rc = dl_comm_open_over(dev->comm, tr->grid.tensor, &tr->tensor_device_comm, err);
        o.tensor_device_comm = tr->tensor_device_comm;
    }
    o.trace = tr->trace;
    if (tr->opts->parallel.zero) /* ZeRO's equal blocks of the weights */
        o.weights_multiple = tr->data_comm->size;
    o.grads_elsewhere = tr->zero && tr->opts->parallel.zero == 2; /* ZeRO-2: the buckets hold them */
    if (!rc)
        rc = dl_pipeline_init(&tr->pipe, &tr->net->graph, &o, max_local, chunks, tr->opts->pipeline_schedule,
                              stages_per_rank(tr->opts), tr->net->train.seed, err);
    free(kernels);
    return rc;
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

/* The tensor and pipeline groups' blocking calls under the stall watchdog
 * (--stall-warning, --stall-timeout), which names the rank a wait is for. */
static int watch_grid(struct trainer *tr, struct dl_error *err)
{
    const struct dl_parallel_opts *po = &tr->opts->parallel;
    const struct dl_grid_dims *d = &tr->grid.dims;
    if (po->stall_warning_s <= 0 && po->stall_timeout_s <= 0)
        return DL_OK;
    int rc = dl_watchdog_start(tr->comm, d, po->stall_warning_s, po->stall_timeout_s, forward_warning, tr,
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
static int open_grid(struct trainer *tr, struct dl_error *err)
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
        rc = dl_shard_make(&tr->net->graph, &d, stages_per_rank(o), tr->comm->rank, NULL, &tr->shard, err);
    if (rc)
        return rc;
    tr->sharded = 1;
    tr->data_comm = tr->grid.data;
    for (int i = 0; i < tr->net->graph.n; i++)
        if (tr->shard.layer[i].whole_because && tr->reporter) {
            char msg[400];
            snprintf(msg, sizeof msg, "layer '%s' stays whole on every tensor rank: %s", tr->net->graph.layers[i].name,
                     tr->shard.layer[i].whole_because);
            forward_warning(tr, msg);
        }
    return DL_OK;
}

/* --trace: this rank's recorder, named by its grid position (data
 * parallelism alone: (rank, 0, 0)), its clock aligned with rank 0's. */
static int open_trace(struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    struct dl_grid_pos pos = {tr->comm->rank, 0, 0};
    if (tr->sharded)
        pos = tr->shard.pos;
    tr->trace = dl_trace_create(o->trace_steps, tr->comm->rank, pos.d, pos.t, pos.p, err);
    if (!tr->trace)
        return DL_ERR_NOMEM;
    if (o->trace_skew_rank == tr->comm->rank)
        tr->trace->skew = o->trace_skew_s;
    /* rank 0 writes the file: find out now whether it can, not after training */
    double bad = 0;
    if (tr->reporter) {
        bad = dl_atomic_check(o->trace_path, err) != DL_OK;
        if (bad)
            dl_error_prefix(err, "--trace");
    }
    int rc = dl_comm_sum_small(tr->comm, &bad, 1, err);
    if (!rc && bad > 0) {
        if (!tr->reporter)
            dl_errorf(err, DL_ERR_IO, "--trace %s: rank 0 cannot create it", o->trace_path);
        return DL_ERR_IO;
    }
    return rc ? rc : dl_trace_align(tr->trace, tr->comm, err);
}

/* --trace at the end of the run (status rc): every rank's events into one
 * file when the ranks left the training loop together (an evaluation or
 * weight dump failing after it on some rank does not keep them from
 * meeting), else each rank's alone (nothing when no step began).  A failed
 * write is the run's error when it had none, else a warning. */
static int finish_trace(struct trainer *tr, int rc, struct dl_error *err)
{
    if (!tr->trace)
        return rc;
    const char *path = tr->opts->trace_path;
    struct dl_error e = {0};
    int trc = DL_OK;
    char msg[1400];
    if (tr->left_loop_together) {
        trc = dl_trace_gather_write(tr->trace, tr->comm, path, &e);
    } else if (tr->trace->first_step) {
        char written[1100];
        trc = dl_trace_write_alone(tr->trace, tr->comm->size, path, written, sizeof written, &e);
        if (!trc && tr->comm->size > 1) {
            snprintf(msg, sizeof msg, "--trace: rank %d wrote its events alone to %s (the run failed before the "
                     "ranks could gather them)", tr->comm->rank, written);
            forward_warning(tr, msg);
        }
    }
    if (trc && rc == DL_OK) {
        *err = e;
        return trc;
    }
    if (trc) {
        snprintf(msg, sizeof msg, "warning: %s", e.msg);
        forward_warning(tr, msg);
    }
    return rc;
}

/* --checkpoint-dir or --resume where one rank's state, which a checkpoint
 * holds, is not the run's and a resume could not continue the same
 * training: the parameter-server strategies; codec residuals and momentum
 * correction, which differ from rank to rank (--compress); local SGD with
 * an optimizer whose state each rank keeps for itself (its averages cover
 * the weights and batch-norm statistics only; a checkpoint is taken right
 * after one, see run_epoch). */
static int refuse_checkpoints(const struct trainer *tr, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    const struct dl_parallel_opts *po = &o->parallel;
    const char *opt = o->checkpoint_dir ? "--checkpoint-dir" : "--resume";
    if (!o->checkpoint_dir && !o->resume)
        return DL_OK;
    if (tr->layout.checkpoint_writer < 0)
        return dl_errorf(err, DL_ERR_SPEC, "checkpoints are not supported with the %s strategy yet (resuming "
                         "exactly would need every rank's model); use sync or local-sgd", tr->layout.strategy);
    if (tr->layout.data_ranks <= 1)
        return DL_OK;
    if (po->codec.ops)
        return dl_errorf(err, DL_ERR_SPEC, "%s with --compress %s: the codec's error-feedback residuals (and "
                         "momentum correction) differ from rank to rank and are not saved, so a resumed run would "
                         "not continue the same training; checkpoint without --compress", opt, po->codec.ops->name);
    const struct dl_optim_spec *os = &tr->net->train.optim;
    if (dl_strategy_model(po)->optimizer_state_per_rank && dl_optim_keeps_state(os)) {
        char momentum[48] = "";
        if (os->kind == DL_OPTIM_SGD)
            snprintf(momentum, sizeof momentum, " (momentum %g)", os->momentum);
        return dl_errorf(err, DL_ERR_SPEC, "%s with --consistency local-sgd:%d and --optimizer %s%s: every rank "
                         "keeps its own optimizer state, which local SGD does not average, so one rank's checkpoint "
                         "cannot resume the others; use --optimizer sgd --momentum 0, or --consistency sync", opt,
                         po->local_steps, dl_optim_names[os->kind], momentum);
    }
    return DL_OK;
}

static int setup(struct trainer *tr, struct dl_error *err)
{
    const struct dl_net *net = tr->net;
    const struct dl_train_spec *ts = &net->train;
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
    rc = open_grid(tr, err);
    if (!rc && o->trace_path)
        rc = open_trace(tr, err);
    if (rc)
        return rc;
    rc = dl_parallel_opts_check(&o->parallel, tr->data_comm->size, err);
    if (rc)
        return rc;
    dl_strategy_layout(&o->parallel, tr->data_comm->size, tr->data_comm->rank, &tr->layout);
    rc = refuse_checkpoints(tr, err);
    if (rc)
        return rc;
    if (o->net_path && o->checkpoint_dir)
        rc = dl_checkpoint_net_hash(o->net_path, &tr->net_crc, err);
    if (!rc && o->checkpoint_dir && mkdir(o->checkpoint_dir, 0777) != 0 && errno != EEXIST)
        rc = dl_errorf(err, DL_ERR_IO, "%s: cannot create the checkpoint folder: %s", o->checkpoint_dir,
                       strerror(errno));
    if (rc)
        return rc;
    int shards = tr->layout.data_ranks;
    if (ts->batch < shards)
        return dl_errorf(err, DL_ERR_SPEC, "batch %d is smaller than the %d data-parallel ranks: each needs at least "
                         "one sample (use --batch %d or more)", ts->batch, shards, shards);
    const struct dl_graph *g = &net->graph;
    struct dl_data_want want = {g->input, g->classes, g->positions, g->id_limit};
    rc = dl_dataset_load_for(&net->data, 1, &want, ts->seed, &tr->train, err);
    if (!rc)
        rc = dl_dataset_load_for(&net->data, 0, &want, ts->seed, &tr->test, err);
    if (!rc)
        rc = dl_batcher_init(&tr->batcher, &tr->train, ts->batch, tr->layout.data_rank, shards, 1, ts->seed, 0, err);
    if (!rc)
        dl_batcher_set_warning(&tr->batcher, forward_warning, tr);
    const struct dl_layer *loss = g->loss >= 0 ? &g->layers[g->loss] : NULL;
    tr->counts_labels = loss && loss->kind->ignored_label && loss->kind->ignored_label(loss->attr, &tr->ignored_label);
    tr->test_label_norm = -1;
    if (!rc && tr->counts_labels)
        dl_batcher_count_labels(&tr->batcher, tr->ignored_label);
    int chunks = dl_pipeline_chunks(o->pipeline_chunks, o->grid.pp);
    if (!rc)
        dl_batcher_min_slice(&tr->batcher, chunks);
    if (!rc)
        rc = zero_refusal(tr, err);
    if (!rc)
        rc = init_pipeline(tr, dl_batcher_max_local(&tr->batcher), chunks, err);
    long n_opt = rc ? 0 : dl_pipeline_exec(&tr->pipe)->n_weights;
    if (!rc && tr->zero) { /* ZeRO stage 1: the optimizer holds this rank's block */
        dl_zero_shard_of(n_opt, tr->data_comm->size, tr->data_comm->rank, &tr->zero_shard);
        n_opt = tr->zero_shard.n;
    }
    if (!rc)
        rc = dl_optim_init_on(&tr->optim, &ts->optim, n_opt, dl_exec_device(dl_pipeline_exec(&tr->pipe)), err);
    tr->optim.offset = tr->zero ? tr->zero_shard.lo : 0;
    struct dl_parallel_opts po = o->parallel;
    if (chunks > 1) /* the gradients are final after the last chunk only */
        po.overlap = 0;
    const struct dl_strategy_ops *model = dl_strategy_model(&po);
    if (!rc && ts->optim.no_decay && ts->optim.weight_decay > 0 && !model->supports_no_decay)
        rc = dl_errorf(err, DL_ERR_SPEC, "train.optimizer.no_decay: the parameter server (--consistency ssp or "
                       "async) decays every weight; leave no_decay out or train with sync, local-sgd, gossip or easgd");
    if (!rc && ts->optim.no_decay) { /* the rank's stages share slot 0's weights */
        struct dl_exec *stages[tr->pipe.V > 0 ? tr->pipe.V : 1];
        for (int v = 0; v < tr->pipe.V; v++)
            stages[v] = &tr->pipe.slot[tr->pipe.first_slot[v]];
        rc = dl_no_decay_apply(stages, tr->pipe.V, dl_pipeline_exec(&tr->pipe)->weights, ts->optim.no_decay,
                               &tr->optim, NULL, err);
    }
    if (!rc && ts->clip_grad_norm > 0 && !model->supports_clip_grad_norm)
        rc = dl_errorf(err, DL_ERR_SPEC, "--clip-grad-norm: the parameter server (--consistency ssp or async) "
                       "applies each worker's gradient on its own; clip with sync, local-sgd, gossip or easgd");
    if (!rc)
        rc = dl_strategy_create(tr->data_comm, dl_pipeline_exec(&tr->pipe), &tr->optim, &po, ts->seed,
                                forward_warning, tr, &tr->strategy, err);
    if (!rc && tr->sharded)
        rc = dl_tied_create(dl_pipeline_exec(&tr->pipe), tr->comm, &tr->tied, err);
    if (!rc && tr->tied && !model->supports_tied_across_ranks)
        rc = dl_errorf(err, DL_ERR_SPEC, "a tied parameter (share:) whose layers run in two pipeline ranks' stages: "
                       "the parameter server (--consistency ssp or async) updates the copies on their own; train "
                       "with sync, local-sgd, gossip or easgd");
    if (!rc) {
        tr->strategy->clip_norm = ts->clip_grad_norm;
        if (tr->sharded) { /* the other parts of the model are on the tensor and pipeline groups */
            tr->strategy->model_sum = model_norm_sum;
            tr->strategy->model_ctx = tr;
        }
        if (tr->tied) {
            tr->strategy->before_update = tied_sum;
            tr->strategy->update_ctx = tr->tied;
        }
    }
    if (!rc)
        rc = dl_batch_ahead_init(&tr->batches, &tr->batcher, dl_exec_device(dl_pipeline_exec(&tr->pipe)),
                                 dl_batcher_max_local(&tr->batcher), dl_shape_count(net->graph.input), tr->trace,
                                 err);
    if (rc)
        return rc;
    tr->steps_per_epoch = dl_batcher_steps_per_epoch(&tr->batcher);
    tr->total_steps = tr->steps_per_epoch * ts->epochs;
    if (ts->max_steps > 0 && ts->max_steps < tr->total_steps)
        tr->total_steps = ts->max_steps;
    return DL_OK;
}

static void teardown(struct trainer *tr)
{
    dl_batch_ahead_free(&tr->batches);
    dl_strategy_free(tr->strategy);
    dl_tied_free(tr->tied);
    dl_optim_free(&tr->optim);
    dl_pipeline_free(&tr->pipe);
    if (tr->sharded)
        dl_shard_free(&tr->shard);
    dl_comm_close(tr->tensor_device_comm);
    dl_grid_close(&tr->grid); /* (nothing without a grid) */
    dl_watchdog_stop(tr->watchdog);
    dl_batcher_free(&tr->batcher);
    dl_dataset_free(&tr->train);
    dl_dataset_free(&tr->test);
    dl_trace_free(tr->trace);
    if (tr->dump_batches)
        fclose(tr->dump_batches);
    if (tr->own_comm)
        dl_comm_close(tr->comm);
}

/* --debug-slow-rank: this rank sleeps every step. */
static void slow_down(const struct trainer *tr)
{
    const struct dl_parallel_opts *po = &tr->opts->parallel;
    if (po->slow_rank == tr->comm->rank && po->slow_rank_ms > 0) {
        struct timespec ts = {(time_t)(po->slow_rank_ms / 1000),
                              (long)(fmod(po->slow_rank_ms, 1000.0) * 1e6)};
        nanosleep(&ts, NULL);
    }
}

/* --debug-hold-at-step: waits for a stop signal (polling every 10 ms, at
 * most 10 minutes); the next step then sees it on every rank. */
static void hold_for_signal(const struct trainer *tr, long global_step)
{
    if (tr->opts->hold_at_step <= 0 || global_step != tr->opts->hold_at_step)
        return;
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 60000 && !dl_signals_pending(); i++)
        nanosleep(&tick, NULL);
}

/* ------------------------------------------------------------ checkpoints */
/* 1 when checkpoints move the executor's vectors by messages or device
 * copies (checkpoint_grid.h): a grid's shards, or a device without host
 * memory; else the file is written from and read into them in place. */
static int through_copies(struct trainer *tr)
{
    return tr->sharded || !dl_exec_device(dl_pipeline_exec(&tr->pipe))->host_memory;
}

/* The optimizer a checkpoint holds: the run's, or with ZeRO a whole one
 * (state allocated for every weight; with gather, every rank's block
 * gathered into it: collective over the data-parallel group).  Freed by
 * whole_optim_free. */
static int whole_optim(struct trainer *tr, int gather, struct dl_optim *out, struct dl_error *err)
{
    *out = tr->optim;
    if (!tr->zero)
        return DL_OK;
    out->n = dl_pipeline_exec(&tr->pipe)->n_weights;
    out->offset = 0;
    int slots = tr->optim.algo->state_vectors;
    out->state = dl_calloc((size_t)(out->n * slots > 0 ? out->n * slots : 1), sizeof *out->state, err);
    if (!out->state)
        return DL_ERR_NOMEM;
    return gather ? dl_zero_gather_state(tr->data_comm, &tr->zero_shard, &tr->optim, out, err) : DL_OK;
}

static void whole_optim_free(struct trainer *tr, struct dl_optim *whole)
{
    if (tr->zero)
        free(whole->state);
}

/* --resume: every rank loads the same file before the first batch (with a
 * grid, the whole tensors, keeping its slices; with ZeRO, its block of the
 * optimizer's state). */
static int resume(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    char path[1100], warnings[2048] = "";
    int found = 1, rc = DL_OK;
    if (o->resume_path)
        snprintf(path, sizeof path, "%s", o->resume_path);
    else if (o->checkpoint_dir)
        rc = dl_checkpoint_find_latest(o->checkpoint_dir, path, sizeof path, &found, warnings, sizeof warnings, err);
    else
        return dl_errorf(err, DL_ERR_SPEC, "--resume needs --checkpoint-dir DIR or --resume FILE");
    if (rc)
        return rc;
    if (*warnings)
        warn(tr, warnings);
    if (!found) {
        char msg[1300];
        snprintf(msg, sizeof msg, "no checkpoint in %s: starting from the beginning", o->checkpoint_dir);
        warn(tr, msg);
        return DL_OK;
    }
    struct dl_optim whole;
    rc = whole_optim(tr, 0, &whole, err);
    if (rc)
        return rc;
    struct dl_checkpoint_limits limits = {tr->steps_per_epoch, tr->train.n, tr->net->graph.positions};
    struct dl_run_view v = {&tr->net->graph, dl_pipeline_exec(&tr->pipe), &whole, &limits};
    rc = through_copies(tr) ? dl_checkpoint_load_sliced(path, &v, &tr->resume, err)
                            : dl_checkpoint_load(path, &v, &tr->resume, err);
    if (!rc && tr->zero)
        dl_zero_take_state(&tr->zero_shard, &whole, &tr->optim);
    else if (!rc)
        tr->optim.t = whole.t;
    whole_optim_free(tr, &whole);
    if (rc)
        return rc;
    if (tr->resume.seed != tr->net->train.seed)
        return dl_errorf(err, DL_ERR_SPEC, "%s was written with seed %llu, this run has seed %llu: the data order "
                         "would differ (pass --seed %llu)", path, (unsigned long long)tr->resume.seed,
                         (unsigned long long)tr->net->train.seed, (unsigned long long)tr->resume.seed);
    if (tr->resume.net_crc32 && tr->net_crc && tr->resume.net_crc32 != tr->net_crc) {
        char msg[1300];
        snprintf(msg, sizeof msg, "warning: the network file changed since %s was written", path);
        warn(tr, msg);
    }
    rc = dl_batcher_seek(&tr->batcher, tr->resume.epoch, tr->resume.step, err);
    if (rc)
        return rc;
    tr->resumed = 1;
    tr->start_epoch = tr->resume.epoch;
    tr->start_step = tr->resume.global_step;
    res->resumed_step = tr->resume.global_step;
    char msg[1300];
    snprintf(msg, sizeof msg, "resuming from %s: step %ld (epoch %ld, batch %ld), written by %d rank%s", path,
             tr->resume.global_step, tr->resume.epoch + 1, tr->resume.step, tr->resume.world_size,
             tr->resume.world_size == 1 ? "" : "s");
    warn(tr, msg);
    return DL_OK;
}

/* The checkpoint writer's clock decides; every rank learns it with the
 * step's metrics. */
static int checkpoint_due(struct trainer *tr)
{
    const struct dl_train_opts *o = tr->opts;
    tr->steps_since_checkpoint++;
    return tr->comm->rank == tr->layout.checkpoint_writer && o->checkpoint_dir &&
           dl_checkpoint_due(&(struct dl_checkpoint_every){o->every_steps, o->every_seconds},
                             tr->steps_since_checkpoint, dl_clock_now() - tr->last_checkpoint_time);
}

/* The weights after global step `global_step` are finite (else DL_ERR_DATA
 * naming the first bad parameter): an update can make them NaN or infinite
 * with a finite loss (the last step's), and neither a checkpoint nor the
 * evaluation nor --dump-weights may go on with them.  The ranks of a grid
 * hold different parts and agree; data-parallel ranks hold the same weights
 * wherever this is called (a consistent step, the run's end). */
static int check_weights(struct trainer *tr, long global_step, struct dl_error *err)
{
    struct dl_nonfinite nf;
    int found = dl_numerics_first_nonfinite_param(dl_pipeline_exec(&tr->pipe), &nf, err);
    if (found < 0)
        return err->code ? err->code : DL_ERR_INTERNAL;
    double bad = found;
    if (tr->sharded) {
        int rc = dl_comm_sum_small(tr->grid.tensor, &bad, 1, err);
        if (!rc)
            rc = dl_comm_sum_small(tr->grid.pipeline, &bad, 1, err);
        if (rc)
            return rc;
    }
    if (bad == 0)
        return DL_OK;
    tr->nonfinite_stop = 1; /* every rank stops here */
    return dl_numerics_param_error(&tr->net->graph, global_step, found ? &nf : NULL, err);
}

/* The checkpoint writer saves the state after global step `global_step`;
 * with a grid every rank takes part (the writer gathers the shards), which
 * the step's agreed flags make them do at the same step.  A failed write
 * keeps the previous checkpoint and, unless the user asked for strictness,
 * lets training go on. */
static int save_checkpoint(struct trainer *tr, long global_step, const struct epoch_tally *tally,
                           struct dl_train_result *res, struct dl_error *err)
{
    tr->steps_since_checkpoint = 0;
    tr->last_checkpoint_time = dl_clock_now();
    int rc = check_weights(tr, global_step, err);
    if (rc)
        return rc;
    int writer = tr->comm->rank == tr->layout.checkpoint_writer;
    struct dl_optim whole; /* with ZeRO, every data-parallel rank's block gathered */
    rc = whole_optim(tr, 1, &whole, err);
    if (rc)
        return rc;
    if (!writer && !tr->sharded) {
        whole_optim_free(tr, &whole);
        return DL_OK;
    }
    const struct dl_train_opts *o = tr->opts;
    struct dl_checkpoint_meta meta = {
        .global_step = global_step, .epoch = tr->batcher.epoch, .step = dl_batch_ahead_cursor(&tr->batches),
        .seed = tr->net->train.seed, .epoch_loss_sum = tally->loss_sum, .epoch_seen = tally->seen,
        .epoch_correct = (long)tally->correct, .net_crc32 = tr->net_crc, .world_size = tr->comm->size,
        .dp = tr->layout.data_ranks, .tp = 1, .pp = 1};
    if (tr->sharded)
        meta.tp = o->grid.tp, meta.pp = o->grid.pp;
    struct dl_run_view v = {&tr->net->graph, dl_pipeline_exec(&tr->pipe), &whole};
    char path[1100];
    struct dl_error e = {0};
    double t0 = tr->trace ? dl_clock_now() : 0;
    rc = dl_checkpoint_path(path, sizeof path, o->checkpoint_dir, global_step, &e);
    if (!rc)
        rc = through_copies(tr) ? dl_checkpoint_save_gathered(path, tr->comm, &v, &meta, &e)
                                : dl_checkpoint_save(path, &v, &meta, &e);
    whole_optim_free(tr, &whole);
    dl_trace_span(tr->trace, DL_TRACE_CHECKPOINT, "checkpoint", t0);
    /* a grid's writer that failed otherwise than writing the file (out of
     * memory for the whole tensors) may have left the others' slices
     * unreceived: the run cannot go on */
    if (rc && (!writer || (tr->sharded && rc != DL_ERR_IO))) {
        *err = e;
        return rc;
    }
    if (!rc && o->keep > 0) {
        int removed;
        rc = dl_checkpoint_rotate(o->checkpoint_dir, o->keep, &removed, &e);
    }
    if (!rc) {
        snprintf(res->last_checkpoint, sizeof res->last_checkpoint, "%s", path);
        return DL_OK;
    }
    if (o->strict_checkpoints) {
        *err = e;
        return rc;
    }
    char msg[1200];
    snprintf(msg, sizeof msg, "warning: checkpoint not written (training goes on; the previous one is kept): %s",
             e.msg);
    warn(tr, msg);
    return DL_OK;
}

/* ------------------------------------------------------------ worker ranks */
/* After a chunk's forward: when its loss is not finite, where the first
 * non-finite value appeared (before backward reuses the memory). */
static void locate_nonfinite(void *ctx, const struct dl_exec *e)
{
    struct dl_nonfinite *nf = ctx;
    if (nf->where == DL_NF_NONE && !isfinite(dl_exec_loss_sum(e)))
        dl_numerics_first_nonfinite_output(e, nf);
}

/* One step on this rank's part of the batch: the schedule's forward and
 * backward passes, the strategy's exchange and update (global_step is
 * 1-based), and with a grid the step's sums agreed over it. */
static int train_step(struct trainer *tr, int local_batch, int global_batch, long global_step, double lr,
                      struct dl_numerics_watch *watch, struct step_outcome *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    dl_watchdog_set_step(tr->watchdog, global_step);
    struct dl_exec *e = dl_pipeline_exec(&tr->pipe);
    dl_exec_zero_grad(e);
    int rc = dl_strategy_begin(tr->strategy, local_batch, global_batch, err);
    if (rc)
        return rc;
    struct dl_step_metrics *m = &out->metrics;
    out->nonfinite.where = DL_NF_NONE;
    struct dl_pipeline_hook hook = {locate_nonfinite, &out->nonfinite};
    dl_numerics_watch_install(watch, e);
    dl_numerics_watch_reset(watch);
    const struct dl_batch_slot *b = tr->batch;
    tr->pipe.x_resident = b->x_device;
    tr->pipe.y_resident = b->y_device;
    tr->pipe.label_norm = tr->counts_labels ? b->label_norm : 0;
    rc = dl_pipeline_step(&tr->pipe, b->x, b->y, local_batch, b->offset, (uint64_t)(global_step - 1), &hook,
                          &m->loss_sum, &m->correct, err);
    tr->pipe.x_resident = NULL;
    tr->pipe.y_resident = NULL;
    if (!rc)
        rc = dl_batch_ahead_release(&tr->batches, err);
    dl_numerics_watch_uninstall(watch);
    if (rc)
        return rc;
    m->samples = local_batch;
    if (out->nonfinite.where == DL_NF_NONE)
        out->nonfinite = watch->first;
    slow_down(tr);
    m->stop_requested = dl_signals_pending() != 0;
    m->checkpoint_due = checkpoint_due(tr);
    rc = dl_strategy_finish(tr->strategy, global_step, lr, m, &out->stats, err);
    if (!rc)
        rc = dl_strategy_consensus(tr->strategy, global_step, &out->stats.consensus_distance, err);
    if (!rc && tr->sharded) {
        double v[DL_STEP_METRICS];
        dl_step_metrics_pack(m, v);
        rc = agree_over_grid(tr, v, DL_STEP_METRICS, DL_STEP_CORRECT + 1, err);
        dl_step_metrics_unpack(v, m);
    }
    return rc;
}

static void report_step(const struct trainer *tr, int epoch, const struct epoch_tally *tally, long global_step,
                        double lr, const struct step_outcome *out, double t_step, double input_seconds)
{
    if (!tr->reporter || !tr->hooks || !tr->hooks->on_step)
        return;
    const struct dl_step_metrics *m = &out->metrics;
    double now = dl_clock_now();
    struct dl_step_report sr = {
        .epoch = epoch + 1, .epochs = tr->net->train.epochs, .step = tally->step,
        .steps_per_epoch = tr->steps_per_epoch, .global_step = global_step, .total_steps = tr->total_steps,
        .loss = m->loss_sum / m->samples, .accuracy = m->correct / (m->samples * tr->net->graph.positions), .lr = lr,
        .samples_per_s = (double)(tally->seen - tally->seen_before) / (now - tally->start + 1e-12),
        .eta_s = (now - tr->run_start) / (double)(global_step - tr->start_step) *
                 (double)(tr->total_steps - global_step),
        .comm_seconds = out->stats.comm_seconds, .exposed_comm_seconds = out->stats.exposed_seconds,
        .bytes_sent = out->stats.bytes_sent, .consensus_distance = out->stats.consensus_distance,
        .grad_norm = tr->strategy->grad_norm, .worker = -1, .step_seconds = now - t_step,
        .input_seconds = input_seconds};
    tr->hooks->on_step(tr->hooks->ctx, &sr);
}

/* The sums start at zero, or where the checkpoint left a resumed epoch (the
 * batcher's cursor is already in place then). */
static void start_epoch(struct trainer *tr, int epoch, struct epoch_tally *tally)
{
    memset(tally, 0, sizeof *tally);
    tally->start = dl_clock_now();
    dl_batch_ahead_reset(&tr->batches); /* (none is read past an epoch's end) */
    if (tr->resumed && epoch == tr->start_epoch) {
        tally->loss_sum = tr->resume.epoch_loss_sum;
        tally->seen = tr->resume.epoch_seen;
        tally->correct = (double)tr->resume.epoch_correct;
        tally->step = tr->resume.step;
        tally->seen_before = tally->seen;
    } else {
        dl_batcher_start_epoch(&tr->batcher, epoch);
    }
}

/* The epoch's report, with a test evaluation when the model is whole on
 * every rank and this is not the last epoch (that one is evaluated after
 * end()). */
static int finish_epoch(struct trainer *tr, int epoch, const struct epoch_tally *tally, long global_step,
                        struct dl_train_result *res, struct dl_error *err)
{
    const struct dl_train_spec *ts = &tr->net->train;
    struct dl_epoch_report er = {.epoch = epoch + 1, .epochs = ts->epochs,
                                 .train_loss = tally->seen ? tally->loss_sum / (double)tally->seen : 0,
                                 .train_accuracy = tally->seen ? tally->correct / ((double)tally->seen *
                                                                                   tr->net->graph.positions) : 0};
    er.seconds = dl_clock_now() - tally->start;
    er.samples_per_s = (double)(tally->seen - tally->seen_before) / (er.seconds + 1e-12);
    er.comm_seconds = tally->comm_seconds;
    er.exposed_comm_seconds = tally->exposed_seconds;
    res->comm_seconds += tally->comm_seconds;
    res->exposed_comm_seconds += tally->exposed_seconds;
    int rc = DL_OK;
    if (tr->layout.eval == DL_EVAL_SPLIT && epoch + 1 < ts->epochs && global_step < tr->total_steps) {
        rc = check_weights(tr, global_step, err);
        if (!rc)
            rc = evaluate(tr, &er, err);
        if (!rc && tr->reporter && tr->hooks && tr->hooks->on_epoch)
            tr->hooks->on_epoch(tr->hooks->ctx, &er);
    }
    res->last = er;
    return rc;
}

/* The steps of one epoch, until its data or the run's steps run out or a
 * stop signal arrives (*stop); *global_step counts the steps done. */
/* --sample-every: rank 0 draws opts->sample_tokens tokens from its
 * executor (the whole network) at temperature 1, seeded by the run's seed
 * and the step, and hands the text to on_sample. */
static int sample(struct trainer *tr, long global_step, struct dl_error *err)
{
    const struct dl_graph *g = &tr->net->graph;
    struct dl_exec *e = dl_pipeline_exec(&tr->pipe);
    int T = g->input.h, C = g->classes, n = tr->opts->sample_tokens > 0 ? tr->opts->sample_tokens : 64;
    struct dl_sampler z;
    int rc = dl_sampler_init(&z, C, 1.0, 0, dl_rng_hash(tr->net->train.seed, (uint64_t)global_step), err);
    if (rc)
        return rc;
    int32_t *ids = dl_calloc((size_t)n + 1, sizeof *ids, err);
    float *x = ids ? dl_calloc((size_t)T, sizeof *x, err) : NULL, *scores = x ? dl_calloc((size_t)C, sizeof *scores, err) : NULL;
    int *labels = scores ? dl_calloc((size_t)T, sizeof *labels, err) : NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = labels ? open_memstream(&text, &len) : NULL;
    rc = f ? DL_OK : dl_errorf(err, DL_ERR_NOMEM, "out of memory for a sample");
    long count = 0;
    if (!rc)
        ids[count++] = tr->bpe ? dl_bpe_end_of_text(tr->bpe) : '\n';
    for (int i = 0; !rc && i < n; i++) {
        rc = dl_sample_window_scores(e, T, ids, count, x, labels, scores, err);
        if (!rc) {
            ids[count] = dl_sampler_draw(&z, scores);
            dl_sample_emit(f, tr->bpe, ids[count++]);
        }
    }
    if (f)
        fclose(f);
    if (!rc && tr->hooks && tr->hooks->on_sample)
        tr->hooks->on_sample(tr->hooks->ctx, global_step, text, len);
    free(text);
    free(labels);
    free(scores);
    free(x);
    free(ids);
    dl_sampler_free(&z);
    return rc;
}

/* --eval-every and --sample-every after a step (the last step's evaluation
 * is the run's own). */
static int between_steps(struct trainer *tr, long global_step, struct dl_error *err)
{
    const struct dl_train_opts *o = tr->opts;
    int rc = DL_OK;
    if (o->eval_every > 0 && global_step % o->eval_every == 0 && global_step < tr->total_steps) {
        struct dl_epoch_report er = {0};
        rc = evaluate(tr, &er, err); /* every rank: its slice, or rank 0 alone */
        if (!rc && tr->reporter && tr->hooks && tr->hooks->on_eval)
            tr->hooks->on_eval(tr->hooks->ctx, global_step, &er);
    }
    if (!rc && o->sample_every > 0 && global_step % o->sample_every == 0 && tr->comm->rank == 0)
        rc = sample(tr, global_step, err);
    return rc;
}

/* --debug-dump-batches: the step's inputs and labels appended. */
static int dump_batch(struct trainer *tr, int local_batch, struct dl_error *err)
{
    const char *path = tr->opts->dump_batches_path;
    if (!tr->dump_batches && !(tr->dump_batches = fopen(path, "wb")))
        return dl_errorf(err, DL_ERR_IO, "--debug-dump-batches: cannot create %s: %s", path, strerror(errno));
    size_t nx = (size_t)local_batch * (size_t)dl_shape_count(tr->net->graph.input);
    size_t ny = (size_t)local_batch * (size_t)tr->net->graph.positions;
    if (fwrite(tr->batch->x, 4, nx, tr->dump_batches) != nx || fwrite(tr->batch->y, 4, ny, tr->dump_batches) != ny ||
        fflush(tr->dump_batches) != 0)
        return dl_errorf(err, DL_ERR_IO, "--debug-dump-batches: cannot write %s: %s", path, strerror(errno));
    return DL_OK;
}

static int run_epoch(struct trainer *tr, int epoch, long *global_step, int *stop, struct dl_train_result *res,
                     struct dl_error *err)
{
    const struct dl_train_spec *ts = &tr->net->train;
    struct dl_numerics_watch watch;
    memset(&watch, 0, sizeof watch);
    struct epoch_tally tally;
    start_epoch(tr, epoch, &tally);
    int rc = DL_OK, local_batch = 0;
    while (!rc && *global_step < tr->total_steps) {
        double t_step = dl_clock_now();
        dl_trace_step_begin(tr->trace, *global_step + 1);
        local_batch = dl_batch_ahead_next(&tr->batches, &tr->batch, err);
        double input_seconds = dl_clock_now() - t_step;
        if (local_batch <= 0) {
            dl_trace_step_end(tr->trace, t_step, 0);
            break;
        }
        if (dl_trace_on(tr->trace))
            dl_trace_span(tr->trace, DL_TRACE_DATA, "batch", t_step);
        if (tr->opts->dump_batches_path && tr->comm->rank == 0 && (rc = dump_batch(tr, local_batch, err)))
            return rc;
        /* without host memory the next batch is read and its copy queued now, to run beside this step */
        if (*global_step + 1 < tr->total_steps)
            rc = dl_batch_ahead_prefetch(&tr->batches, err);
        if (rc)
            return rc;
        double lr = dl_schedule_lr(&ts->sched, ts->optim.lr, *global_step, tr->steps_per_epoch, tr->total_steps);
        struct step_outcome out;
        rc = train_step(tr, local_batch, tr->batch->global, *global_step + 1, lr, &watch, &out, err);
        if (rc)
            return rc;
        const struct dl_step_metrics *m = &out.metrics;
        if (!isfinite(m->loss_sum)) { /* every rank sees the summed loss: all stop here */
            dl_trace_step_end(tr->trace, t_step, 1);
            tr->nonfinite_stop = 1;
            rc = dl_numerics_error(&tr->net->graph, *global_step + 1, m->loss_sum, &out.nonfinite, err);
            dl_error_prefix(err, "lower the learning rate (now %g); no checkpoint written for this step", lr);
            return rc;
        }
        tally.loss_sum += m->loss_sum;
        tally.correct += m->correct;
        tally.seen += m->samples;
        tally.step++;
        ++*global_step;
        tally.comm_seconds += out.stats.comm_seconds;
        tally.exposed_seconds += out.stats.exposed_seconds;
        res->bytes_sent += out.stats.bytes_sent;
        res->dense_bytes += out.stats.dense_bytes;
        report_step(tr, epoch, &tally, *global_step, lr, &out, t_step, input_seconds);
        rc = between_steps(tr, *global_step, err);
        if (rc)
            return rc;
        /* A checkpoint, and with one the stop it comes with, waits for a
         * step after which every rank holds the same state (local SGD: the
         * next average; the signal and the schedule stay pending until then) */
        int hold = tr->opts->checkpoint_dir && !dl_strategy_consistent(tr->strategy);
        if (tr->opts->checkpoint_dir && (m->stop_requested || m->checkpoint_due) && !hold)
            rc = save_checkpoint(tr, *global_step, &tally, res, err);
        dl_trace_step_end(tr->trace, t_step, 1);
        if (!rc && m->stop_requested && !hold) {
            *stop = 1;
            return DL_OK;
        }
        hold_for_signal(tr, *global_step);
    }
    if (!rc && local_batch < 0) /* a sample could not be read (err says which), or its copy failed */
        rc = err->code ? err->code : DL_ERR_INTERNAL;
    return rc ? rc : finish_epoch(tr, epoch, &tally, *global_step, res, err);
}

static int train_epochs(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    long global_step = tr->start_step;
    int rc = DL_OK, stop = 0;
    tr->last_checkpoint_time = dl_clock_now();
    for (int epoch = (int)tr->start_epoch;
         epoch < tr->net->train.epochs && global_step < tr->total_steps && !rc && !stop; epoch++)
        rc = run_epoch(tr, epoch, &global_step, &stop, res, err);
    res->steps = global_step;
    /* Every rank stops at the same step, so end() (collective: the stall
     * watchdog's final messages, local SGD's last average) runs on a stop too;
     * leaving its messages in flight made MPI_Finalize abort. */
    if (!rc)
        rc = dl_strategy_end(tr->strategy, err);
    if (!rc && stop) {
        res->preempted = 1;
        if (!tr->opts->checkpoint_dir)
            warn(tr, "stopped by a signal without --checkpoint-dir: nothing was saved");
        return DL_STOPPED;
    }
    return rc;
}

/* ------------------------------------------------------------ server ranks */
/* A server's view of the run: it reports every update it applies (rank 0)
 * and sums the last epoch's for the final train loss. */
struct served_tally {
    struct trainer *tr;
    double start;
    double loss_sum, correct;   /* over the updates of the last epoch */
    long samples;
};

static double scheduled_lr(void *ctx, long global_step)
{
    const struct trainer *tr = ((struct served_tally *)ctx)->tr;
    const struct dl_train_spec *ts = &tr->net->train;
    return dl_schedule_lr(&ts->sched, ts->optim.lr, global_step, tr->steps_per_epoch, tr->total_steps);
}

static void on_served_update(void *ctx, const struct dl_served_update *u)
{
    struct served_tally *st = ctx;
    const struct trainer *tr = st->tr;
    const struct dl_train_spec *ts = &tr->net->train;
    if (u->step > (long)(ts->epochs - 1) * tr->steps_per_epoch) {
        st->loss_sum += u->loss * u->batch;
        st->correct += u->accuracy * u->batch;
        st->samples += u->batch;
    }
    if (!tr->reporter || !tr->hooks || !tr->hooks->on_step)
        return;
    double now = dl_clock_now();
    long updates_per_step = tr->layout.data_ranks; /* one per worker */
    struct dl_step_report sr = {
        .epoch = (int)((u->step - 1) / tr->steps_per_epoch) + 1, .epochs = ts->epochs,
        .step = (u->step - 1) % tr->steps_per_epoch + 1, .steps_per_epoch = tr->steps_per_epoch,
        .global_step = u->step, .total_steps = tr->total_steps, .loss = u->loss, .accuracy = u->accuracy,
        .lr = u->lr, .samples_per_s = (double)u->updates * u->batch / (now - st->start + 1e-12),
        .eta_s = (now - st->start) / (double)u->updates * (double)(tr->total_steps * updates_per_step - u->updates),
        .staleness = u->staleness, .worker = u->worker, .consensus_distance = NAN, .grad_norm = NAN,
        .step_seconds = NAN, .input_seconds = NAN};
    tr->hooks->on_step(tr->hooks->ctx, &sr);
}

static int serve(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    struct served_tally st = {.tr = tr, .start = dl_clock_now()};
    struct dl_serve_hooks hooks = {.ctx = &st, .lr_at = scheduled_lr, .on_update = on_served_update};
    struct dl_serve_result sr;
    int rc = dl_strategy_serve(tr->strategy, &hooks, &sr, err);
    res->steps = sr.steps > 0 ? sr.steps : sr.updates; /* asynchronous EASGD: an update is a round of steps */
    res->max_staleness = sr.max_staleness;
    res->last.train_loss = st.samples ? st.loss_sum / (double)st.samples : 0;
    res->last.train_accuracy = st.samples ? st.correct / (double)st.samples : 0;
    res->last.seconds = dl_clock_now() - st.start;
    res->last.samples_per_s = (double)res->steps * (double)tr->net->train.batch / (double)tr->layout.data_ranks /
                              (res->last.seconds + 1e-12);
    return rc;
}

/* ------------------------------------------------------------ the run */
/* --dump-weights: rank 0 writes the whole network's weights, gathered from
 * the shards of a grid. */
static int dump_weights(struct trainer *tr, struct dl_error *err)
{
    const struct dl_exec *e = dl_pipeline_exec(&tr->pipe);
    long n = dl_exec_param_count(&tr->net->graph, DL_PARAMS_TRAINABLE);
    float *whole = tr->reporter ? dl_calloc((size_t)(n ? n : 1), sizeof *whole, err) : NULL;
    if (tr->reporter && !whole)
        return DL_ERR_NOMEM;
    int rc = dl_exec_gather(e, tr->comm, DL_PARAMS_TRAINABLE, e->weights, whole, err);
    if (!rc && tr->reporter)
        rc = dl_atomic_write_file(tr->opts->dump_weights, whole, sizeof *whole * (size_t)n, err);
    free(whole);
    return rc;
}

/* After the last step: the test evaluation wherever the model now is. */
static int evaluate_final(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    struct dl_epoch_report er = res->last;
    er.epochs = tr->net->train.epochs; /* the epoch the run ended in: --max-steps may end it early */
    if (er.epoch < 1)
        er.epoch = er.epochs;
    int rc = evaluate(tr, &er, err);
    if (!rc && er.evaluated) {
        res->last = er;
        if (tr->reporter && tr->hooks && tr->hooks->on_epoch)
            tr->hooks->on_epoch(tr->hooks->ctx, &er);
    }
    return rc;
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
    int V = stages_per_rank(tr->opts);
    snprintf(schedule, sizeof schedule, V > 1 ? "%s:%d" : "%s", dl_schedule_kind_name(tr->opts->pipeline_schedule), V);
    snprintf(buf, size, "grid dp=%d x tp=%d x pp=%d, %d pipeline chunk%s (%s); data-parallel groups: %s", d->dp, d->tp,
             d->pp, tr->pipe.chunks, tr->pipe.chunks == 1 ? "" : "s", schedule, d->dp > 1 ? strategy : "none");
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
    struct dl_rank_memory mine = {tr->comm->rank, pos.d, pos.t, pos.p, pm.slots, (double)pm.arena_bytes,
                                  (double)pm.weights, (double)pm.state, (double)grads,
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

int dl_train(const struct dl_net *net, const struct dl_train_opts *opts, const struct dl_train_hooks *hooks,
             struct dl_train_result *res, struct dl_error *err)
{
    struct trainer tr;
    memset(&tr, 0, sizeof tr);
    memset(res, 0, sizeof *res);
    tr.net = net;
    tr.opts = opts;
    tr.hooks = hooks;
    int rc = setup(&tr, err);
    if (!rc) {
        res->bf16_layers = bf16_layers(&tr);
        char how[384];
        describe_layout(&tr, how, sizeof how);
        if (tr.reporter && hooks && hooks->on_start)
            hooks->on_start(hooks->ctx, net, tr.train.n, tr.test.n, tr.steps_per_epoch, tr.comm->size, how);
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
                            : dl_hf_gpt2_import(opts->init_from, &tr.net->graph, dl_pipeline_exec(&tr.pipe), err);
            if (rc == DL_OK && tr.comm->rank == 0) {
                char msg[1200];
                snprintf(msg, sizeof msg, "starting from the weights of %s", opts->init_from);
                warn(&tr, msg);
            }
        }
        if (!rc && opts->resume)
            rc = resume(&tr, res, err);
        if (!rc)
            rc = tr.layout.role == DL_ROLE_SERVER ? serve(&tr, res, err) : train_epochs(&tr, res, err);
        if (!rc && tr.layout.role != DL_ROLE_SERVER) /* the last update's weights, before they are used */
            rc = check_weights(&tr, res->steps, err);
        tr.left_loop_together = rc == DL_OK || rc == DL_STOPPED || tr.nonfinite_stop;
    }
    if (rc == DL_STOPPED) {
        res->seconds = dl_clock_now() - tr.run_start;
        rc = finish_trace(&tr, rc, err);
        dl_bpe_free(tr.bpe);
        teardown(&tr);
        return rc;
    }
    if (!rc)
        rc = evaluate_final(&tr, res, err);
    if (!rc && opts->dump_weights)
        rc = dump_weights(&tr, err);
    res->seconds = dl_clock_now() - tr.run_start;
    rc = finish_trace(&tr, rc, err);
    dl_bpe_free(tr.bpe);
    teardown(&tr);
    return rc;
}
