/* trainer_serve.c: a server rank's run (the parameter server, asynchronous
 * EASGD's center): it serves the workers, reports every update it applies
 * (rank 0) and sums the last epoch's for the run's train loss. */
#include "train/trainer_impl.h"

#include <math.h>

#include "core/clock.h"
#include "optim/schedule.h"

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
    return dl_schedule_lr(&ts->sched, dl_schedule_base_lr(ts), global_step, tr->steps_per_epoch, tr->total_steps);
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
        .step_seconds = NAN, .input_seconds = NAN, .added_loss = NAN, .expert_max_load = NAN,
        .expert_dropped = NAN};
    tr->hooks->on_step(tr->hooks->ctx, &sr);
}

int dl_trainer_serve(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
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
