/* trainer_epochs.c: a worker rank's epochs of steps.  A step's forward and
 * backward passes are a schedule's (train/pipeline.h): with a grid of tensor
 * and pipeline ranks this rank runs its shard of the network over chunks of
 * its batch, the strategy works on the data-parallel group, and the step's
 * sums are agreed over the grid.  Batches come through train/batch_ahead.h:
 * on a device without host memory the next one is read and its copy queued
 * before a step computes.  Between steps: --eval-every, --sample-every,
 * checkpoints and stop signals. */
#include "train/trainer_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "io/trace.h"
#include "optim/schedule.h"
#include "train/numerics.h"
#include "train/sample.h"
#include "train/signals.h"

/* What one training step produced. */
struct step_outcome {
    struct dl_step_metrics metrics;
    struct dl_step_stats stats;
    struct dl_nonfinite nonfinite;  /* where a NaN or infinity first appeared */
    double expert_max_load, expert_dropped; /* expert_load's; NaN without routing layers */
};

/* The routing layers' counts of the step (op.h's stats: the choices each
 * expert took, those dropped, all), the mini-batch's samples (every
 * data-parallel rank's, when they step together: sync) through every
 * stage's layers (tensor ranks' copies once): the largest load of an
 * expert of a layer over its layer's mean (1: balanced), and the share of
 * the choices dropped; NaN for both without such layers. */
static int expert_load(struct trainer *tr, double *max_load, double *dropped, struct dl_error *err)
{
    const struct dl_graph *g = &tr->net->graph;
    long n = tr->pipe.stats_n;
    *max_load = *dropped = NAN;
    if (!n)
        return DL_OK;
    if (!tr->expert_counts) { /* the first step: a place for each layer's counts */
        int layers = 0;
        for (int i = 0; i < g->n; i++)
            layers += g->layers[i].kind->stats != NULL;
        tr->expert_counts = dl_calloc((size_t)n, sizeof *tr->expert_counts, err);
        tr->expert_layers = dl_calloc((size_t)layers, sizeof *tr->expert_layers, err);
        if (!tr->expert_counts || !tr->expert_layers)
            return DL_ERR_NOMEM;
    }
    float *v = tr->expert_counts;
    long *offset = dl_calloc((size_t)g->n, sizeof *offset, err);
    int rc = offset ? DL_OK : DL_ERR_NOMEM;
    for (long i = 0; !rc && i < n; i++)
        v[i] = tr->sharded && tr->shard.pos.t != 0 ? 0 : (float)tr->pipe.stats[i];
    if (!rc && tr->sharded)
        rc = tr->grid.tensor->ops->allreduce(tr->grid.tensor, v, DL_F32, (size_t)n, err);
    if (!rc && tr->sharded)
        rc = tr->grid.pipeline->ops->allreduce(tr->grid.pipeline, v, DL_F32, (size_t)n, err);
    if (!rc && tr->data_comm->size > 1 && tr->opts->parallel.consistency == DL_CONS_SYNC)
        rc = tr->data_comm->ops->allreduce(tr->data_comm, v, DL_F32, (size_t)n, err);
    double most = 0, lost = 0, all = 0;
    if (!rc)
        dl_exec_stats_count(g, offset);
    tr->n_expert_layers = 0;
    for (int i = 0; !rc && i < g->n; i++) {
        if (!g->layers[i].kind->stats)
            continue;
        int E = g->layers[i].kind->stats_count(g->layers[i].attr) - 2;
        const float *c = v + offset[i];
        double sum = 0, top = 0;
        for (int e = 0; e < E; e++)
            sum += c[e], top = c[e] > top ? c[e] : top;
        most = sum > 0 && top * E / sum > most ? top * E / sum : most;
        lost += c[E], all += c[E + 1];
        tr->expert_layers[tr->n_expert_layers++] =
            (struct dl_expert_layer_load){g->layers[i].name, E, c, c[E], c[E + 1]};
    }
    if (!rc && all > 0)
        *max_load = most, *dropped = lost / all;
    free(offset);
    return rc;
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

/* --debug-poison-grad: the first weight gradient this rank holds starts
 * from value, so that backward's sums carry it (host memory). */
static void poison_gradient(struct dl_exec *e, double value)
{
    for (int i = 0; i < e->g->n; i++)
        for (int j = 0; j < e->g->layers[i].n_params; j++)
            if (e->dparam[i] && e->dparam[i][j] && e->g->layers[i].param[j].trainable) {
                e->dparam[i][j][0] = (dl_real)value;
                return;
            }
}

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
    dl_flight_set_step(tr->flight, global_step);
    struct dl_exec *e = dl_pipeline_exec(&tr->pipe);
    dl_exec_zero_grad(e);
    if (global_step == tr->opts->poison_step && tr->comm->rank == tr->opts->poison_rank)
        poison_gradient(e, tr->opts->poison_value);
    int rc = dl_strategy_begin(tr->strategy, local_batch, global_batch, err);
    if (rc)
        return rc;
    struct dl_step_metrics *m = &out->metrics;
    out->nonfinite.where = DL_NF_NONE;
    struct dl_pipeline_hook hook = {locate_nonfinite, &out->nonfinite};
    dl_numerics_watch_install(watch, e);
    dl_numerics_watch_reset(watch);
    const struct dl_batch_slot *b = tr->data.batch;
    tr->pipe.x_resident = b->x_device;
    tr->pipe.y_resident = b->y_device;
    tr->pipe.label_norm = tr->data.counts_labels ? b->label_norm : 0;
    rc = dl_pipeline_step(&tr->pipe, b->x, b->y, local_batch, b->offset, (uint64_t)(global_step - 1), &hook,
                          &m->loss_sum, &m->correct, err);
    tr->pipe.x_resident = NULL;
    tr->pipe.y_resident = NULL;
    if (!rc)
        rc = dl_batch_ahead_release(&tr->data.batches, err);
    dl_numerics_watch_uninstall(watch);
    if (rc)
        return rc;
    m->samples = local_batch;
    /* the layers' own losses: each stage's once (its tensor ranks hold copies) */
    m->added_loss_sum = tr->sharded && tr->shard.pos.t != 0 ? 0 : tr->pipe.added_loss_sum;
    if (out->nonfinite.where == DL_NF_NONE)
        out->nonfinite = watch->first;
    slow_down(tr);
    m->stop_requested = dl_signals_pending() != 0;
    m->checkpoint_due = dl_trainer_checkpoint_due(tr);
    rc = dl_strategy_finish(tr->strategy, global_step, lr, m, &out->stats, err);
    if (!rc)
        rc = dl_strategy_consensus(tr->strategy, global_step, &out->stats.consensus_distance, err);
    if (!rc && tr->sharded) {
        double v[DL_STEP_METRICS];
        dl_step_metrics_pack(m, v);
        rc = dl_trainer_agree_over_grid(tr, v, DL_STEP_METRICS, DL_STEP_CORRECT + 1, err);
        dl_step_metrics_unpack(v, m);
    }
    m->loss_sum += m->added_loss_sum; /* the objective: the loss and the layers' own */
    if (!rc)
        rc = expert_load(tr, &out->expert_max_load, &out->expert_dropped, err);
    return rc;
}

/* The step guards skipped max_in_a_row updates in a row, the last this
 * one (global_step + 1): its batch counts as consumed, a checkpoint of
 * the weights as the last applied step left them is written where
 * checkpoints are, and the run stops with the reason (every rank alike). */
static int guard_stop(struct trainer *tr, long *global_step, const struct step_outcome *out,
                      const struct epoch_tally *tally, double lr, struct dl_train_result *res, struct dl_error *err)
{
    const struct dl_step_guard *g = &tr->guard;
    long last = ++*global_step, first = last - g->in_a_row + 1;
    tr->nonfinite_stop = 1;
    int rc = tr->opts->checkpoint_dir ? dl_trainer_save_checkpoint(tr, last, tally, res, 1, err) : DL_OK;
    if (rc)
        return rc;
    char where[160] = "";
    if (!isfinite(out->metrics.loss_sum) && out->nonfinite.where != DL_NF_NONE) {
        struct dl_error located = {0};
        dl_numerics_error(&tr->net->graph, last, out->metrics.loss_sum, &out->nonfinite, &located);
        snprintf(where, sizeof where, " (%s)", located.msg);
    }
    return dl_errorf(err, DL_ERR_DATA, "steps %ld-%ld: %d updates in a row skipped, the last for %s%s; the weights "
                     "are those after step %ld%s; lower the learning rate (now %g) or check the data", first, last,
                     g->in_a_row, g->why, where, first - 1,
                     tr->opts->checkpoint_dir ? ", saved in the last checkpoint" : "", lr);
}

/* 1 when a layer of g adds a loss of its own (op.h's added_loss). */
static int has_added_loss(const struct dl_graph *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->layers[i].kind->added_loss)
            return 1;
    return 0;
}

/* The share of `samples` samples' labels that `correct` is (0 for none);
 * NaN for a regression loss, which has no classes to be right about. */
static double accuracy_of(const struct trainer *tr, double correct, double samples)
{
    const struct dl_graph *g = &tr->net->graph;
    return g->float_targets ? NAN : samples > 0 ? correct / (samples * g->positions) : 0;
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
        .loss = m->loss_sum / m->samples,
        .added_loss = has_added_loss(&tr->net->graph) ? m->added_loss_sum / m->samples : NAN,
        .expert_max_load = out->expert_max_load, .expert_dropped = out->expert_dropped,
        .skipped = tr->guarded && tr->strategy->skipped, .guard_why = tr->guard.why,
        .skipped_steps = tr->guard.skipped,
        .n_expert_layers = isfinite(out->expert_max_load) ? tr->n_expert_layers : 0,
        .expert_layers = tr->expert_layers, .accuracy = accuracy_of(tr, m->correct, m->samples), .lr = lr,
        .samples_per_s = (double)(tally->seen - tally->seen_before) / (now - tally->start + 1e-12),
        .eta_s = (now - tr->run_start) / (double)(global_step - tr->resume.step) *
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
    dl_batch_ahead_reset(&tr->data.batches); /* (none is read past an epoch's end) */
    if (tr->resume.done && epoch == tr->resume.epoch) {
        tally->loss_sum = tr->resume.meta.epoch_loss_sum;
        tally->seen = tr->resume.meta.epoch_seen;
        tally->correct = (double)tr->resume.meta.epoch_correct;
        tally->step = tr->resume.meta.step;
        tally->seen_before = tally->seen;
    } else {
        dl_batcher_start_epoch(&tr->data.batcher, epoch);
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
                                 .train_accuracy = accuracy_of(tr, tally->correct, (double)tally->seen)};
    er.seconds = dl_clock_now() - tally->start;
    er.samples_per_s = (double)(tally->seen - tally->seen_before) / (er.seconds + 1e-12);
    er.comm_seconds = tally->comm_seconds;
    er.exposed_comm_seconds = tally->exposed_seconds;
    res->comm_seconds += tally->comm_seconds;
    res->exposed_comm_seconds += tally->exposed_seconds;
    int rc = DL_OK;
    if (tr->layout.eval == DL_EVAL_SPLIT && epoch + 1 < ts->epochs && global_step < tr->total_steps) {
        rc = dl_trainer_check_weights(tr, global_step, err);
        if (!rc)
            rc = dl_trainer_evaluate(tr, &er, err);
        if (!rc && tr->reporter && tr->hooks && tr->hooks->on_epoch)
            tr->hooks->on_epoch(tr->hooks->ctx, &er);
    }
    res->last = er;
    return rc;
}

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
    int32_t *x = ids ? dl_calloc((size_t)T, sizeof *x, err) : NULL;
    float *scores = x ? dl_calloc((size_t)C, sizeof *scores, err) : NULL;
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
        rc = dl_trainer_evaluate(tr, &er, err); /* every rank: its slice, or rank 0 alone */
        if (!rc && tr->reporter && tr->hooks && tr->hooks->on_eval)
            tr->hooks->on_eval(tr->hooks->ctx, global_step, &er);
    }
    if (!rc && o->sample_every > 0 && global_step % o->sample_every == 0) {
        rc = dl_trainer_weights_whole(tr, 1, err); /* ZeRO stage 3: rank 0 runs the whole network alone */
        if (!rc && tr->comm->rank == 0)
            rc = sample(tr, global_step, err);
        if (!rc)
            rc = dl_trainer_weights_whole(tr, 0, err);
    }
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
    const struct dl_batch_slot *b = tr->data.batch;
    if (fwrite(b->x, 4, nx, tr->dump_batches) != nx || fwrite(b->y, 4, ny, tr->dump_batches) != ny ||
        fflush(tr->dump_batches) != 0)
        return dl_errorf(err, DL_ERR_IO, "--debug-dump-batches: cannot write %s: %s", path, strerror(errno));
    return DL_OK;
}

/* The steps of one epoch, until its data or the run's steps run out or a
 * stop signal arrives (*stop); *global_step counts the steps done. */
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
        local_batch = dl_batch_ahead_next(&tr->data.batches, &tr->data.batch, err);
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
            rc = dl_batch_ahead_prefetch(&tr->data.batches, err);
        if (rc)
            return rc;
        double lr = dl_schedule_lr(&ts->sched, dl_schedule_base_lr(ts), *global_step, tr->steps_per_epoch, tr->total_steps);
        struct step_outcome out;
        rc = train_step(tr, local_batch, tr->data.batch->global, *global_step + 1, lr, &watch, &out, err);
        if (rc)
            return rc;
        const struct dl_step_metrics *m = &out.metrics;
        int skipped = tr->guarded && tr->strategy->skipped; /* every rank judged the same */
        if (skipped && dl_step_guard_exhausted(&tr->guard)) {
            dl_trace_step_end(tr->trace, t_step, 1);
            return guard_stop(tr, global_step, &out, &tally, lr, res, err);
        }
        if (!isfinite(m->loss_sum) && !skipped) { /* every rank sees the summed loss: all stop here */
            dl_trace_step_end(tr->trace, t_step, 1);
            tr->nonfinite_stop = 1;
            rc = dl_numerics_error(&tr->net->graph, *global_step + 1, m->loss_sum, &out.nonfinite, err);
            dl_error_prefix(err, "lower the learning rate (now %g); no checkpoint written for this step", lr);
            return rc;
        }
        if (isfinite(m->loss_sum)) { /* a skipped step's non-finite loss counts in no average */
            tally.loss_sum += m->loss_sum;
            tally.correct += m->correct;
            tally.seen += m->samples;
        }
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
            rc = dl_trainer_save_checkpoint(tr, *global_step, &tally, res, m->stop_requested, err);
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

int dl_trainer_train_epochs(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    long global_step = tr->resume.step;
    int rc = DL_OK, stop = 0;
    tr->checkpoints.last_time = dl_clock_now();
    for (int epoch = (int)tr->resume.epoch;
         epoch < tr->net->train.epochs && global_step < tr->total_steps && !rc && !stop; epoch++)
        rc = run_epoch(tr, epoch, &global_step, &stop, res, err);
    res->steps = global_step;
    /* Every rank stops at the same step, so end() (collective: the stall
     * watchdog's final messages, local SGD's last average) runs on a stop too;
     * leaving its messages in flight made MPI_Finalize abort. */
    if (!rc)
        rc = dl_strategy_end(tr->strategy, err);
    struct dl_error later = {0}; /* an error already stops the run: the write's is only warned about */
    int written = dl_trainer_checkpoint_wait(tr, res, rc ? &later : err); /* the last asynchronous write */
    if (!rc)
        rc = written;
    if (!rc && stop) {
        res->preempted = 1;
        if (!tr->opts->checkpoint_dir)
            dl_trainer_warn(tr, "stopped by a signal without --checkpoint-dir: nothing was saved");
        return DL_STOPPED;
    }
    return rc;
}
