/* trainer_trace.c: --trace for a rank's run: its recorder opened (the file
 * checked on rank 0 before training) and every rank's events written at the
 * end. */
#include "train/trainer_impl.h"

#include <stdio.h>

#include "io/atomic_file.h"
#include "io/trace.h"
#include "parallel/trace_ranks.h"

/* --trace: this rank's recorder, named by its grid position (data
 * parallelism alone: (rank, 0, 0)), its clock aligned with rank 0's. */
int dl_trainer_open_trace(struct trainer *tr, struct dl_error *err)
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
int dl_trainer_finish_trace(struct trainer *tr, int rc, struct dl_error *err)
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
            dl_trainer_forward_warning(tr, msg);
        }
    }
    if (trc && rc == DL_OK) {
        *err = e;
        return trc;
    }
    if (trc) {
        snprintf(msg, sizeof msg, "warning: %s", e.msg);
        dl_trainer_forward_warning(tr, msg);
    }
    return rc;
}
