/* trainer.c: the training loop of one rank (see trainer.h).  Every random
 * choice (initial weights, shuffles, dropout masks) derives from train.seed,
 * so two runs with the same seed, thread count and rank count print the same
 * losses bit for bit.  Ranks of a data-parallel job see disjoint slices of
 * the same global batches; a parameter-server job splits the ranks into
 * servers (running dl_ps_serve) and workers (running this loop). */
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/batcher.h"
#include "data/dataset.h"
#include "exec/exec.h"
#include "io/atomic_file.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "parallel/param_server.h"
#include "parallel/sync_bn.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/numerics.h"
#include "train/signals.h"

struct run {
    const struct dl_net *net;
    const struct dl_train_opts *opts;
    const struct dl_train_hooks *hooks;
    struct dl_comm *comm;
    int own_comm;
    int reporter;                   /* rank 0: the one that reports */
    int ps;                         /* parameter-server consistency */
    int server;                     /* this rank is a parameter server */
    int workers, worker;            /* data shards: count and this rank's index */
    struct dl_dataset train, test;
    struct dl_batcher batcher;
    struct dl_exec exec;
    struct dl_optim optim;
    struct dl_strategy *strategy;
    struct dl_sync_bn *sync_bn;
    float *x;
    int *y;
    long steps_per_epoch, total;
    double run_start;
    uint32_t net_crc;
    /* resume point (from a checkpoint) */
    int resumed;
    long start_epoch, start_global;
    struct dl_checkpoint_meta resume;
    /* checkpoint schedule */
    long steps_since_ckpt;
    double last_ckpt_time;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dl_train_opts_defaults(struct dl_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->parallel.consistency = DL_CONS_SYNC;
    o->parallel.allreduce = "auto";
    o->parallel.bucket_bytes = 25u << 20;
    o->parallel.overlap = 1;
    o->parallel.ps_servers = 1;
    o->parallel.stall_warning_s = 60;
    o->parallel.stall_timeout_s = 600;
    o->parallel.slow_rank = -1;
}

int dl_evaluate_range(struct dl_exec *exec, const struct dl_dataset *ds, long first, long count, int batch,
                      double *loss_sum, long *correct, struct dl_error *err)
{
    *loss_sum = 0;
    *correct = 0;
    struct dl_batcher reader;
    int rc = dl_batcher_init_range(&reader, ds, batch, first, count, err), b = 0;
    const float *x;
    const int *y;
    while (!rc && (b = dl_batcher_next_view(&reader, &x, &y)) > 0) {
        dl_exec_forward(exec, x, y, b, 0);
        *loss_sum += dl_exec_loss_sum(exec);
        *correct += dl_exec_correct(exec);
    }
    if (!rc && b < 0) {
        *err = reader.error;
        rc = err->code ? err->code : DL_ERR_INTERNAL;
    }
    dl_batcher_free(&reader);
    return rc;
}

/* Sums n values over the ranks (small metric vectors; float is exact for
 * the sample counts involved). */
static int sum_over_ranks(struct run *r, double *v, int n, struct dl_error *err)
{
    if (r->comm->size == 1)
        return DL_OK;
    float f[8];
    for (int i = 0; i < n; i++)
        f[i] = (float)v[i];
    int rc = r->comm->ops->allreduce(r->comm, f, (size_t)n, err);
    for (int i = 0; i < n; i++)
        v[i] = f[i];
    return rc;
}

/* Test loss and accuracy: every rank of a data-parallel job evaluates its
 * slice of the test split; a parameter-server job evaluates on rank 0. */
static int evaluate(struct run *r, struct dl_epoch_report *er, struct dl_error *err)
{
    long n = r->test.n, first = 0, count = n;
    int p = r->comm->size, k = r->comm->rank;
    if (r->ps) {
        if (!r->reporter)
            return DL_OK;
    } else {
        first = n * k / p;
        count = n * (k + 1) / p - first;
    }
    double loss = 0;
    long correct = 0;
    int rc = dl_evaluate_range(&r->exec, &r->test, first, count, r->net->train.batch, &loss, &correct, err);
    double v[2] = {loss, (double)correct};
    if (!rc && !r->ps)
        rc = sum_over_ranks(r, v, 2, err);
    if (rc)
        return rc;
    er->test_loss = n ? v[0] / (double)n : 0;
    er->test_accuracy = n ? v[1] / (double)n : 0;
    er->test_samples = n;
    er->evaluated = 1;
    return DL_OK;
}

static void stall_warning(void *ctx, const char *msg)
{
    struct run *r = ctx;
    if (r->hooks && r->hooks->on_warning)
        r->hooks->on_warning(r->hooks->ctx, msg);
}

/* The executor, with kernels that sum batch statistics over the ranks when
 * --sync-bn asks for it (whatever the caller's kernel choices). */
static int init_exec(struct run *r, struct dl_error *err)
{
    struct dl_exec_options o = r->opts->exec;
    struct dl_kernel_choices *kernels = dl_calloc(1, sizeof *kernels, err);
    if (!kernels)
        return DL_ERR_NOMEM;
    if (o.kernels)
        *kernels = *o.kernels;
    kernels->sync_stats |= r->opts->parallel.sync_bn;
    o.kernels = kernels;
    int rc = dl_exec_init(&r->exec, &r->net->graph, r->net->train.batch, r->net->train.seed, &o, err);
    free(kernels);
    return rc;
}

static int setup(struct run *r, struct dl_error *err)
{
    const struct dl_net *net = r->net;
    const struct dl_train_spec *ts = &net->train;
    const struct dl_parallel_opts *po = &r->opts->parallel;
    int rc = DL_OK;
    if (r->opts->comm)
        r->comm = r->opts->comm;
    else {
        rc = dl_comm_open("self", NULL, NULL, &r->comm, err);
        r->own_comm = 1;
        if (rc)
            return rc;
    }
    int p = r->comm->size, k = r->comm->rank;
    r->reporter = k == 0;
    r->ps = p > 1 && (po->consistency == DL_CONS_SSP || po->consistency == DL_CONS_ASYNC);
    r->workers = p;
    r->worker = k;
    if (r->ps) {
        int servers = dl_ps_servers(po, p);
        r->server = k < servers;
        r->workers = p - servers;
        r->worker = k - servers;
    }
    if (r->ps && (r->opts->checkpoint_dir || r->opts->resume))
        return dl_errorf(err, DL_ERR_SPEC, "checkpoints are not supported with a parameter server (ssp, async) yet; "
                         "use sync or local-sgd");
    if (r->opts->net_path && r->opts->checkpoint_dir)
        rc = dl_checkpoint_net_hash(r->opts->net_path, &r->net_crc, err);
    if (!rc && r->opts->checkpoint_dir && mkdir(r->opts->checkpoint_dir, 0777) != 0 && errno != EEXIST)
        rc = dl_errorf(err, DL_ERR_IO, "%s: cannot create the checkpoint folder: %s", r->opts->checkpoint_dir,
                       strerror(errno));
    if (rc)
        return rc;
    if (ts->batch < r->workers)
        return dl_errorf(err, DL_ERR_SPEC, "batch %d is smaller than the %d data-parallel ranks: each needs at least one "
                         "sample (use --batch %d or more)", ts->batch, r->workers, r->workers);
    rc = dl_dataset_load(&net->data, 1, net->graph.input, net->graph.classes, ts->seed, &r->train, err);
    if (!rc)
        rc = dl_dataset_load(&net->data, 0, net->graph.input, net->graph.classes, ts->seed, &r->test, err);
    if (!rc)
        rc = dl_batcher_init(&r->batcher, &r->train, ts->batch, r->server ? 0 : r->worker, r->workers, 1, ts->seed, 0,
                             err);
    if (!rc) {
        dl_batcher_set_warning(&r->batcher, stall_warning, r);
        rc = init_exec(r, err);
    }
    if (!rc)
        rc = dl_optim_init(&r->optim, &ts->optim, r->exec.n_weights, err);
    if (!rc && po->sync_bn && p > 1 && !r->ps) {
        rc = dl_sync_bn_create(r->comm, &r->sync_bn, err);
        r->exec.sync_sum = dl_sync_bn_sum;
        r->exec.sync_ctx = r->sync_bn;
    }
    if (!rc && !r->server)
        rc = dl_strategy_create(r->comm, &r->exec, &r->optim, po, ts->seed, stall_warning, r, &r->strategy, err);
    if (!rc) {
        int local = dl_batcher_max_local(&r->batcher);
        r->x = dl_calloc((size_t)local * (size_t)dl_shape_count(net->graph.input), sizeof *r->x, err);
        r->y = dl_calloc((size_t)local, sizeof *r->y, err);
        if (!r->x || !r->y)
            rc = DL_ERR_NOMEM;
    }
    if (rc)
        return rc;
    r->steps_per_epoch = dl_batcher_steps_per_epoch(&r->batcher);
    r->total = r->steps_per_epoch * ts->epochs;
    if (ts->max_steps > 0 && ts->max_steps < r->total)
        r->total = ts->max_steps;
    return DL_OK;
}

static void teardown(struct run *r)
{
    free(r->x);
    free(r->y);
    dl_strategy_free(r->strategy);
    dl_sync_bn_free(r->sync_bn);
    dl_optim_free(&r->optim);
    dl_exec_free(&r->exec);
    dl_batcher_free(&r->batcher);
    dl_dataset_free(&r->train);
    dl_dataset_free(&r->test);
    if (r->own_comm)
        dl_comm_close(r->comm);
}

static void slow_down(const struct run *r)
{
    const struct dl_parallel_opts *po = &r->opts->parallel;
    if (po->slow_rank == r->comm->rank && po->slow_rank_ms > 0) {
        struct timespec ts = {(time_t)(po->slow_rank_ms / 1000),
                              (long)(fmod(po->slow_rank_ms, 1000.0) * 1e6)};
        nanosleep(&ts, NULL);
    }
}

/* --debug-hold-at-step: waits for a stop signal (polling every 10 ms, at
 * most 10 minutes); the next step then sees it on every rank. */
static void hold_for_signal(const struct run *r, long global)
{
    if (r->opts->hold_at_step <= 0 || global != r->opts->hold_at_step)
        return;
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 60000 && !dl_signals_pending(); i++)
        nanosleep(&tick, NULL);
}

/* ------------------------------------------------------------ checkpoints */
static void warn(struct run *r, const char *msg)
{
    if (r->reporter && r->hooks && r->hooks->on_warning)
        r->hooks->on_warning(r->hooks->ctx, msg);
}

/* --resume: every rank loads the same file before the first batch. */
static int resume(struct run *r, struct dl_train_result *res, struct dl_error *err)
{
    const struct dl_train_opts *o = r->opts;
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
        warn(r, warnings);
    if (!found) {
        char msg[1300];
        snprintf(msg, sizeof msg, "no checkpoint in %s: starting from the beginning", o->checkpoint_dir);
        warn(r, msg);
        return DL_OK;
    }
    struct dl_run_view v = {&r->net->graph, &r->exec, &r->optim};
    rc = dl_checkpoint_load(path, &v, &r->resume, err);
    if (rc)
        return rc;
    if (r->resume.seed != r->net->train.seed)
        return dl_errorf(err, DL_ERR_SPEC, "%s was written with seed %llu, this run has seed %llu: the data order "
                         "would differ (pass --seed %llu)", path, (unsigned long long)r->resume.seed,
                         (unsigned long long)r->net->train.seed, (unsigned long long)r->resume.seed);
    if (r->resume.net_crc32 && r->net_crc && r->resume.net_crc32 != r->net_crc) {
        char msg[1300];
        snprintf(msg, sizeof msg, "warning: the network file changed since %s was written", path);
        warn(r, msg);
    }
    rc = dl_batcher_seek(&r->batcher, r->resume.epoch, r->resume.step, err);
    if (rc)
        return rc;
    r->resumed = 1;
    r->start_epoch = r->resume.epoch;
    r->start_global = r->resume.global_step;
    res->resumed_step = r->resume.global_step;
    char msg[1300];
    snprintf(msg, sizeof msg, "resuming from %s: step %ld (epoch %ld, batch %ld), written by %d rank%s", path,
             r->resume.global_step, r->resume.epoch + 1, r->resume.step, r->resume.world_size,
             r->resume.world_size == 1 ? "" : "s");
    warn(r, msg);
    return DL_OK;
}

/* Rank 0 writes the checkpoint of the state after global step `global`.  A
 * failed write keeps the previous checkpoint and, unless the user asked
 * for strictness, lets training go on. */
static int save_checkpoint(struct run *r, long global, double loss_sum, long seen, long correct,
                           struct dl_train_result *res, struct dl_error *err)
{
    r->steps_since_ckpt = 0;
    r->last_ckpt_time = now_s();
    if (!r->reporter)
        return DL_OK;
    const struct dl_train_opts *o = r->opts;
    struct dl_checkpoint_meta m = {.global_step = global, .epoch = r->batcher.epoch, .step = r->batcher.step,
                                   .seed = r->net->train.seed, .epoch_loss_sum = loss_sum, .epoch_seen = seen,
                                   .epoch_correct = correct, .net_crc32 = r->net_crc, .world_size = r->comm->size,
                                   .dp = r->workers, .tp = 1, .pp = 1};
    struct dl_run_view v = {&r->net->graph, &r->exec, &r->optim};
    char path[1100];
    struct dl_error e = {0};
    int rc = dl_checkpoint_path(path, sizeof path, o->checkpoint_dir, global, &e);
    if (!rc)
        rc = dl_checkpoint_save(path, &v, &m, &e);
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
    warn(r, msg);
    return DL_OK;
}

/* ------------------------------------------------------------ workers */
static int train_epochs(struct run *r, struct dl_train_result *res, struct dl_error *err)
{
    const struct dl_train_spec *ts = &r->net->train;
    long global = r->start_global;
    int rc = DL_OK, stop = 0;
    struct dl_numerics_watch watch;
    memset(&watch, 0, sizeof watch);
    r->last_ckpt_time = now_s();
    for (int epoch = (int)r->start_epoch; epoch < ts->epochs && global < r->total && !rc && !stop; epoch++) {
        double epoch_start = now_s(), loss_sum = 0, correct = 0, comm_s = 0, exposed_s = 0;
        long seen = 0, step = 0, seen_before = 0; /* seen_before: samples of this epoch done before a resume */
        if (r->resumed && epoch == r->start_epoch) { /* the cursor is already in place */
            loss_sum = r->resume.epoch_loss_sum;
            seen = r->resume.epoch_seen;
            correct = (double)r->resume.epoch_correct;
            step = r->resume.step;
            seen_before = seen;
        } else
            dl_batcher_start_epoch(&r->batcher, epoch);
        int b = 0;
        while (!rc && global < r->total && (b = dl_batcher_next(&r->batcher, r->x, r->y)) > 0) {
            int gb = r->batcher.last_global;
            double lr = dl_schedule_lr(&ts->sched, ts->optim.lr, global, r->steps_per_epoch, r->total);
            dl_exec_zero_grad(&r->exec);
            rc = r->strategy->ops->begin(r->strategy, b, gb, err);
            if (rc)
                break;
            dl_exec_forward(&r->exec, r->x, r->y, b, 1);
            double m[DL_STEP_METRICS] = {dl_exec_loss_sum(&r->exec), (double)dl_exec_correct(&r->exec)};
            /* Where a NaN first appeared must be found now: backward reuses the memory. */
            struct dl_nonfinite nf = {.where = DL_NF_NONE};
            if (!isfinite(m[0]))
                dl_numerics_first_nonfinite_output(&r->exec, &nf);
            dl_numerics_watch_install(&watch, &r->exec);
            dl_numerics_watch_reset(&watch);
            dl_exec_backward(&r->exec);
            dl_numerics_watch_uninstall(&watch);
            if (nf.where == DL_NF_NONE)
                nf = watch.first;
            if ((rc = dl_sync_bn_status(r->sync_bn, err)))
                break;
            slow_down(r);
            r->steps_since_ckpt++;
            m[2] = dl_signals_pending() ? 1 : 0;
            m[3] = r->reporter && r->opts->checkpoint_dir &&
                   dl_checkpoint_due(&(struct dl_checkpoint_every){r->opts->every_steps, r->opts->every_seconds},
                                     r->steps_since_ckpt, now_s() - r->last_ckpt_time);
            struct dl_step_stats st = {0};
            rc = r->strategy->ops->finish(r->strategy, global + 1, lr, m, &st, err);
            if (rc)
                break;
            int batch = r->ps ? b : gb;
            if (!isfinite(m[0])) { /* every rank sees the summed loss: all stop here */
                rc = dl_numerics_error(&r->net->graph, global + 1, m[0], &nf, err);
                dl_error_prefix(err, "lower the learning rate (now %g); no checkpoint written for this step", lr);
                break;
            }
            loss_sum += m[0];
            correct += m[1];
            seen += gb;
            step++;
            global++;
            comm_s += st.comm_seconds;
            exposed_s += st.exposed_seconds;
            res->bytes_sent += st.bytes_sent;
            res->dense_bytes += st.dense_bytes;
            if (r->reporter && r->hooks && r->hooks->on_step) {
                double t = now_s();
                struct dl_step_report sr = {
                    .epoch = epoch + 1, .epochs = ts->epochs, .step = step, .steps_per_epoch = r->steps_per_epoch,
                    .global_step = global, .total_steps = r->total, .loss = m[0] / batch,
                    .accuracy = m[1] / batch, .lr = lr, .samples_per_s = (double)(seen - seen_before) / (t - epoch_start + 1e-12),
                    .eta_s = (t - r->run_start) / (double)(global - r->start_global) * (double)(r->total - global),
                    .comm_seconds = st.comm_seconds, .exposed_comm_seconds = st.exposed_seconds, .worker = -1};
                r->hooks->on_step(r->hooks->ctx, &sr);
            }
            if (r->opts->checkpoint_dir && (m[2] > 0 || m[3] > 0))
                rc = save_checkpoint(r, global, loss_sum, seen, (long)correct, res, err);
            if (!rc && m[2] > 0) {
                stop = 1;
                break;
            }
            hold_for_signal(r, global);
        }
        if (!rc && b < 0) {
            *err = r->batcher.error;
            rc = err->code ? err->code : DL_ERR_INTERNAL;
        }
        if (rc || stop)
            break;
        struct dl_epoch_report er = {.epoch = epoch + 1, .epochs = ts->epochs,
                                     .train_loss = seen ? loss_sum / (double)seen : 0,
                                     .train_accuracy = seen ? correct / (double)seen : 0};
        er.seconds = now_s() - epoch_start;
        er.samples_per_s = (double)(seen - seen_before) / (er.seconds + 1e-12);
        er.comm_seconds = comm_s;
        er.exposed_comm_seconds = exposed_s;
        res->comm_seconds += comm_s;
        res->exposed_comm_seconds += exposed_s;
        if (!r->ps && epoch + 1 < ts->epochs && global < r->total) { /* the last one comes after end() */
            rc = evaluate(r, &er, err);
            if (!rc && r->reporter && r->hooks && r->hooks->on_epoch)
                r->hooks->on_epoch(r->hooks->ctx, &er);
        }
        res->last = er;
    }
    res->steps = global;
    /* Every rank stops at the same step, so end() (collective: the stall
     * watchdog's final messages, local SGD's last average) runs on a stop too;
     * leaving its messages in flight made MPI_Finalize abort. */
    if (!rc)
        rc = r->strategy->ops->end(r->strategy, err);
    if (!rc && stop) {
        res->preempted = 1;
        if (!r->opts->checkpoint_dir)
            warn(r, "stopped by a signal without --checkpoint-dir: nothing was saved");
        return DL_STOPPED;
    }
    return rc;
}

/* ------------------------------------------------------------ servers */
struct server_ctx {
    struct run *r;
    long updates_per_step;   /* workers: one update each per global step */
    double start;
    double loss_sum, correct; /* over the updates of the last epoch */
    long samples;
};

/* Each worker's gradient averages B/W samples, so W updates stand for one
 * synchronous step of batch B: each gets lr/W, which keeps the expected
 * progress per epoch that of synchronous SGD with the same settings. */
static double server_lr(void *ctx, long update)
{
    struct server_ctx *s = ctx;
    const struct dl_train_spec *ts = &s->r->net->train;
    return dl_schedule_lr(&ts->sched, ts->optim.lr, update / s->updates_per_step, s->r->steps_per_epoch,
                          s->r->total) / (double)s->updates_per_step;
}

static void server_update(void *ctx, const struct dl_ps_update *u)
{
    struct server_ctx *s = ctx;
    struct run *r = s->r;
    const struct dl_train_spec *ts = &r->net->train;
    if (u->clock > (long)(ts->epochs - 1) * r->steps_per_epoch) {
        s->loss_sum += u->loss * u->batch;
        s->correct += u->accuracy * u->batch;
        s->samples += u->batch;
    }
    if (!r->reporter || !r->hooks || !r->hooks->on_step)
        return;
    double t = now_s();
    long step = (u->clock - 1) % r->steps_per_epoch + 1;
    struct dl_step_report sr = {
        .epoch = (int)((u->clock - 1) / r->steps_per_epoch) + 1, .epochs = ts->epochs, .step = step,
        .steps_per_epoch = r->steps_per_epoch, .global_step = u->clock, .total_steps = r->total, .loss = u->loss,
        .accuracy = u->accuracy, .lr = server_lr(s, u->updates - 1),
        .samples_per_s = (double)u->updates * u->batch / (t - s->start + 1e-12),
        .eta_s = (t - s->start) / (double)u->updates * (double)(r->total * s->updates_per_step - u->updates),
        .staleness = u->staleness, .worker = u->worker};
    r->hooks->on_step(r->hooks->ctx, &sr);
}

static int serve(struct run *r, struct dl_train_result *res, struct dl_error *err)
{
    struct server_ctx sc = {.r = r, .updates_per_step = r->workers, .start = now_s()};
    /* The configured momentum, per update: W updates decay the velocity as
     * much as mu^W, and asynchrony adds momentum of its own (about 1 - 1/W,
     * Mitliagkas et al. 2016); together they land near mu per global step.
     * Measured, LeNet-5, 4 ranks (3 workers), 3 epochs, per-update momentum
     * 0.7 (the 1-(1-mu)W correction) / 0.8 / 0.85 / 0.9 / 0.965 (mu^(1/W)):
     * ssp:2 87.2 / 88.1 / 88.4 / 89.1 / 87.9%, async 87.2 / 88.2 / 88.6 /
     * 89.4 / 86.9%; sync 89.3%. */
    struct dl_optim_spec spec = r->net->train.optim;
    struct dl_ps_server_args a = {.comm = r->comm, .exec = &r->exec, .optim = &spec,
                                  .servers = r->comm->size - r->workers,
                                  .staleness = r->opts->parallel.consistency == DL_CONS_ASYNC ? -1
                                                                                                : r->opts->parallel.staleness,
                                  .lr_at = server_lr, .lr_ctx = &sc, .on_update = server_update, .update_ctx = &sc};
    struct dl_ps_result pr;
    int rc = dl_ps_serve(&a, &pr, err);
    res->steps = pr.updates;
    res->max_staleness = pr.max_staleness;
    res->last.train_loss = sc.samples ? sc.loss_sum / (double)sc.samples : 0;
    res->last.train_accuracy = sc.samples ? sc.correct / (double)sc.samples : 0;
    res->last.seconds = now_s() - sc.start;
    res->last.samples_per_s = (double)pr.updates * (double)r->net->train.batch / (double)r->workers /
                              (res->last.seconds + 1e-12);
    return rc;
}

int dl_train(const struct dl_net *net, const struct dl_train_opts *opts, const struct dl_train_hooks *hooks,
             struct dl_train_result *res, struct dl_error *err)
{
    struct run r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    r.net = net;
    r.opts = opts;
    r.hooks = hooks;
    int rc = setup(&r, err);
    if (!rc) {
        char how[256];
        if (r.ps)
            snprintf(how, sizeof how, "%s parameter server: %d server%s, %d workers, lr/%d and momentum %g per "
                     "update", opts->parallel.consistency == DL_CONS_ASYNC ? "asynchronous" : "stale-synchronous",
                     r.comm->size - r.workers, r.comm->size - r.workers > 1 ? "s" : "", r.workers, r.workers,
                     net->train.optim.momentum);
        else
            snprintf(how, sizeof how, "%s", r.strategy->ops->name);
        if (r.reporter && hooks && hooks->on_start)
            hooks->on_start(hooks->ctx, net, r.train.n, r.test.n, r.steps_per_epoch, r.comm->size, how);
        r.run_start = now_s();
        if (opts->resume)
            rc = resume(&r, res, err);
        if (!rc)
            rc = r.server ? serve(&r, res, err) : train_epochs(&r, res, err);
    }
    if (rc == DL_STOPPED) {
        res->seconds = now_s() - r.run_start;
        teardown(&r);
        return rc;
    }
    if (!rc) {
        struct dl_epoch_report er = res->last; /* the epoch the run ended in (--max-steps may end it early) */
        er.epochs = net->train.epochs;
        if (er.epoch < 1)
            er.epoch = net->train.epochs;
        rc = evaluate(&r, &er, err);
        if (!rc && er.evaluated) {
            res->last = er;
            if (r.reporter && hooks && hooks->on_epoch)
                hooks->on_epoch(hooks->ctx, &er);
        }
    }
    if (!rc && r.reporter && opts->dump_weights)
        rc = dl_atomic_write_file(opts->dump_weights, r.exec.weights, sizeof(float) * (size_t)r.exec.n_weights, err);
    res->seconds = now_s() - r.run_start;
    if (rc && r.comm && r.comm->size > 1)
        dl_error_prefix(err, "rank %d", r.comm->rank);
    teardown(&r);
    return rc;
}
