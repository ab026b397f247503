/* trainer_checkpoints.c: a rank's run and its checkpoints: what a checkpoint
 * cannot hold (refused before anything loads), --resume, the writer's
 * schedule, and the saves (with a grid or ZeRO, gathered from the ranks). */
#include "train/trainer_impl.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "io/trace.h"
#include "parallel/zero_weights.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_grid.h"

/* --checkpoint-dir or --resume where one rank's state, which a checkpoint
 * holds, is not the run's and a resume could not continue the same
 * training: the parameter-server strategies; codec residuals and momentum
 * correction, which differ from rank to rank (--compress); local SGD with
 * an optimizer whose state each rank keeps for itself (its averages cover
 * the weights and batch-norm statistics only; a checkpoint is taken right
 * after one, see run_epoch). */
int dl_trainer_refuse_checkpoints(const struct trainer *tr, struct dl_error *err)
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

int dl_trainer_weights_whole(struct trainer *tr, int whole, struct dl_error *err)
{
    struct dl_zero_weights *z = tr->strategy ? tr->strategy->zero_weights : NULL;
    return z ? dl_zero_weights_hold_all(z, whole, err) : DL_OK;
}

/* --resume: every rank loads the same file before the first batch (with a
 * grid, the whole tensors, keeping its slices; with ZeRO, its block of the
 * optimizer's state). */
int dl_trainer_resume(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
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
        dl_trainer_warn(tr, warnings);
    if (!found) {
        char msg[1300];
        snprintf(msg, sizeof msg, "no checkpoint in %s: starting from the beginning", o->checkpoint_dir);
        dl_trainer_warn(tr, msg);
        return DL_OK;
    }
    struct dl_optim whole;
    rc = whole_optim(tr, 0, &whole, err);
    if (rc)
        return rc;
    struct dl_checkpoint_limits limits = {tr->steps_per_epoch, tr->data.train.n, tr->net->graph.positions};
    struct dl_run_view v = {&tr->net->graph, dl_pipeline_exec(&tr->pipe), &whole, &limits};
    rc = through_copies(tr) ? dl_checkpoint_load_sliced(path, &v, &tr->resume.meta, err)
                            : dl_checkpoint_load(path, &v, &tr->resume.meta, err);
    if (!rc && tr->zero)
        dl_zero_take_state(&tr->zero_shard, &whole, &tr->optim);
    else if (!rc)
        tr->optim.t = whole.t;
    if (!rc) /* ZeRO stage 3: this rank's block of what was read kept */
        rc = dl_trainer_weights_whole(tr, 0, err);
    whole_optim_free(tr, &whole);
    if (rc)
        return rc;
    if (tr->resume.meta.seed != tr->net->train.seed)
        return dl_errorf(err, DL_ERR_SPEC, "%s was written with seed %llu, this run has seed %llu: the data order "
                         "would differ (pass --seed %llu)", path, (unsigned long long)tr->resume.meta.seed,
                         (unsigned long long)tr->net->train.seed, (unsigned long long)tr->resume.meta.seed);
    if (tr->resume.meta.net_crc32 && tr->checkpoints.net_crc && tr->resume.meta.net_crc32 != tr->checkpoints.net_crc) {
        char msg[1300];
        snprintf(msg, sizeof msg, "warning: the network file changed since %s was written", path);
        dl_trainer_warn(tr, msg);
    }
    rc = dl_batcher_seek(&tr->data.batcher, tr->resume.meta.epoch, tr->resume.meta.step, err);
    if (rc)
        return rc;
    tr->resume.done = 1;
    tr->resume.epoch = tr->resume.meta.epoch;
    tr->resume.step = tr->resume.meta.global_step;
    res->resumed_step = tr->resume.meta.global_step;
    char msg[1300];
    snprintf(msg, sizeof msg, "resuming from %s: step %ld (epoch %ld, batch %ld), written by %d rank%s", path,
             tr->resume.meta.global_step, tr->resume.meta.epoch + 1, tr->resume.meta.step, tr->resume.meta.world_size,
             tr->resume.meta.world_size == 1 ? "" : "s");
    dl_trainer_warn(tr, msg);
    return DL_OK;
}

/* The checkpoint writer's clock decides; every rank learns it with the
 * step's metrics. */
int dl_trainer_checkpoint_due(struct trainer *tr)
{
    const struct dl_train_opts *o = tr->opts;
    tr->checkpoints.steps_since++;
    return tr->comm->rank == tr->layout.checkpoint_writer && o->checkpoint_dir &&
           dl_checkpoint_due(&(struct dl_checkpoint_every){o->every_steps, o->every_seconds},
                             tr->checkpoints.steps_since, dl_clock_now() - tr->checkpoints.last_time);
}

/* What happens after a checkpoint's write: the folder rotated (--keep);
 * rc and e the write's outcome, then the rotation's. */
static int after_write(const struct trainer *tr, int rc, struct dl_error *e)
{
    if (!rc && tr->opts->keep > 0) {
        int removed;
        rc = dl_checkpoint_rotate(tr->opts->checkpoint_dir, tr->opts->keep, &removed, e);
    }
    return rc;
}

/* A failed write: training goes on with a warning, or (strict) stops. */
static int write_failed(struct trainer *tr, int rc, const struct dl_error *e, struct dl_error *err)
{
    if (tr->opts->strict_checkpoints) {
        *err = *e;
        return rc;
    }
    char msg[1200];
    snprintf(msg, sizeof msg, "warning: checkpoint not written (training goes on; the previous one is kept): %s",
             e->msg);
    dl_trainer_warn(tr, msg);
    return DL_OK;
}

static void *write_snapshot(void *ctx)
{
    struct trainer *tr = ctx;
    struct trainer_checkpoints *c = &tr->checkpoints;
    c->err = (struct dl_error){0};
    c->rc = after_write(tr, dl_checkpoint_snapshot_save(c->snapshot, c->path, &c->meta, &c->err), &c->err);
    return NULL;
}

int dl_trainer_checkpoint_wait(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    struct trainer_checkpoints *c = &tr->checkpoints;
    if (!c->writing)
        return DL_OK;
    pthread_join(c->thread, NULL);
    c->writing = 0;
    dl_checkpoint_snapshot_free(c->snapshot);
    c->snapshot = NULL;
    if (c->rc)
        return write_failed(tr, c->rc, &c->err, err);
    if (res)
        snprintf(res->last_checkpoint, sizeof res->last_checkpoint, "%s", c->path);
    return DL_OK;
}

/* --checkpoint-async: the state copied (gathered: collective) into a
 * snapshot on the writer, which a thread then writes to path. */
static int save_async(struct trainer *tr, const struct dl_run_view *v, const char *path,
                      const struct dl_checkpoint_meta *meta, struct dl_error *err)
{
    struct trainer_checkpoints *c = &tr->checkpoints;
    int rc = dl_checkpoint_snapshot_take(tr->comm, v, &c->snapshot, err);
    if (rc || !c->snapshot)
        return rc;
    snprintf(c->path, sizeof c->path, "%s", path);
    c->meta = *meta;
    if (pthread_create(&c->thread, NULL, write_snapshot, tr) != 0) { /* written here instead */
        write_snapshot(tr);
        dl_checkpoint_snapshot_free(c->snapshot);
        c->snapshot = NULL;
        if (c->rc)
            *err = c->err;
        return c->rc;
    }
    c->writing = 1;
    return DL_OK;
}

/* The checkpoint writer saves the state after global step `global_step`;
 * with a grid every rank takes part (the writer gathers the shards), which
 * the step's agreed flags make them do at the same step.  A failed write
 * keeps the previous checkpoint and, unless the user asked for strictness,
 * lets training go on.  With --checkpoint-async (unless now, a stop's
 * save) the step waits for the previous write and the state's copy only. */
static int save_checkpoint(struct trainer *tr, long global_step, const struct epoch_tally *tally,
                           struct dl_train_result *res, int now, struct dl_error *err)
{
    tr->checkpoints.steps_since = 0;
    tr->checkpoints.last_time = dl_clock_now();
    int rc = dl_trainer_checkpoint_wait(tr, res, err); /* one write at a time */
    if (!rc)
        rc = dl_trainer_check_weights(tr, global_step, err);
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
        .global_step = global_step, .epoch = tr->data.batcher.epoch, .step = dl_batch_ahead_cursor(&tr->data.batches),
        .seed = tr->net->train.seed, .epoch_loss_sum = tally->loss_sum, .epoch_seen = tally->seen,
        .epoch_correct = (long)tally->correct, .net_crc32 = tr->checkpoints.net_crc, .world_size = tr->comm->size,
        .dp = tr->layout.data_ranks, .tp = 1, .pp = 1};
    if (tr->sharded)
        meta.tp = o->grid.tp, meta.pp = o->grid.pp;
    struct dl_run_view v = {&tr->net->graph, dl_pipeline_exec(&tr->pipe), &whole};
    char path[1100];
    struct dl_error e = {0};
    double t0 = tr->trace ? dl_clock_now() : 0;
    rc = dl_checkpoint_path(path, sizeof path, o->checkpoint_dir, global_step, &e);
    int async = o->checkpoint_async && !now && tr->layout.checkpoint_writer == 0;
    if (!rc && async) {
        rc = save_async(tr, &v, path, &meta, &e);
        whole_optim_free(tr, &whole);
        dl_trace_span(tr->trace, DL_TRACE_CHECKPOINT, "checkpoint copy", t0);
        if (rc) /* the copy failed (out of memory, a message): as a synchronous save's gather */
            *err = e;
        return rc;
    }
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
    rc = after_write(tr, rc, &e);
    if (!rc) {
        snprintf(res->last_checkpoint, sizeof res->last_checkpoint, "%s", path);
        return DL_OK;
    }
    return write_failed(tr, rc, &e, err);
}

int dl_trainer_save_checkpoint(struct trainer *tr, long global_step, const struct epoch_tally *tally,
                               struct dl_train_result *res, int now, struct dl_error *err)
{
    int rc = dl_trainer_weights_whole(tr, 1, err); /* ZeRO stage 3: the whole weights for the file */
    if (!rc)
        rc = save_checkpoint(tr, global_step, tally, res, now, err);
    struct dl_error ignored;
    int back = dl_trainer_weights_whole(tr, 0, &ignored);
    return rc ? rc : back;
}
