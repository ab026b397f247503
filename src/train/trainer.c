/* trainer.c: the single-process training loop (see trainer.h).  Every random
 * choice (initial weights, shuffles, dropout masks) derives from the
 * train.seed, so two runs with the same seed and thread count print the same
 * losses bit for bit. */
#include "train/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/batcher.h"
#include "data/dataset.h"
#include "exec/exec.h"
#include "optim/optim.h"
#include "optim/schedule.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dl_evaluate(struct dl_exec *exec, const struct dl_dataset *ds, int batch, double *loss, double *accuracy)
{
    long count = dl_shape_count(ds->shape);
    double loss_sum = 0;
    long correct = 0;
    for (long start = 0; start < ds->n; start += batch) {
        int b = (int)(ds->n - start < batch ? ds->n - start : batch);
        dl_exec_forward(exec, ds->x + start * count, ds->y + start, b, 0);
        loss_sum += dl_exec_loss_sum(exec);
        correct += dl_exec_correct(exec);
    }
    *loss = ds->n ? loss_sum / (double)ds->n : 0;
    *accuracy = ds->n ? (double)correct / (double)ds->n : 0;
}

int dl_train(const struct dl_net *net, const struct dl_train_hooks *hooks, struct dl_train_result *res,
             struct dl_error *err)
{
    const struct dl_train_spec *ts = &net->train;
    const struct dl_graph *g = &net->graph;
    struct dl_dataset train = {0}, test = {0};
    struct dl_batcher batcher = {0};
    struct dl_exec exec = {0};
    struct dl_optim opt = {0};
    float *x = NULL;
    int *y = NULL;
    memset(res, 0, sizeof *res);
    int rc = dl_dataset_load(&net->data, 1, g->input, g->classes, ts->seed, &train, err);
    if (!rc)
        rc = dl_dataset_load(&net->data, 0, g->input, g->classes, ts->seed, &test, err);
    if (!rc)
        rc = dl_batcher_init(&batcher, &train, ts->batch, 0, 1, 1, ts->seed, 0, err);
    if (!rc)
        rc = dl_exec_init(&exec, g, ts->batch, ts->seed, err);
    if (!rc)
        rc = dl_optim_init(&opt, &ts->optim, exec.n_weights, err);
    if (!rc) {
        x = dl_calloc((size_t)ts->batch * (size_t)dl_shape_count(g->input), sizeof *x, err);
        y = dl_calloc((size_t)ts->batch, sizeof *y, err);
        if (!x || !y)
            rc = DL_ERR_NOMEM;
    }
    if (rc)
        goto done;
    long steps_per_epoch = dl_batcher_steps_per_epoch(&batcher);
    long total = steps_per_epoch * ts->epochs;
    if (ts->max_steps > 0 && ts->max_steps < total)
        total = ts->max_steps;
    if (hooks && hooks->on_start)
        hooks->on_start(hooks->ctx, net, train.n, test.n, steps_per_epoch);
    double run_start = now_s();
    long global = 0;
    for (int epoch = 0; epoch < ts->epochs && global < total; epoch++) {
        dl_batcher_start_epoch(&batcher, epoch);
        double epoch_start = now_s(), loss_sum = 0;
        long seen = 0, correct = 0;
        int b;
        long step = 0;
        while (global < total && (b = dl_batcher_next(&batcher, x, y)) > 0) {
            double lr = dl_schedule_lr(&ts->sched, ts->optim.lr, global, steps_per_epoch, total);
            dl_exec_zero_grad(&exec);
            dl_exec_forward(&exec, x, y, b, 1);
            double loss = dl_exec_loss_sum(&exec);
            int ok = dl_exec_correct(&exec);
            if (!isfinite(loss)) {
                rc = dl_errorf(err, DL_ERR_DATA, "epoch %d step %ld: the loss is %g (not finite); lower the "
                               "learning rate (now %g)", epoch + 1, step + 1, loss, lr);
                goto done;
            }
            dl_exec_backward(&exec);
            dl_optim_step(&opt, lr, exec.weights, exec.dweights);
            loss_sum += loss;
            correct += ok;
            seen += b;
            step++;
            global++;
            if (hooks && hooks->on_step) {
                double t = now_s();
                struct dl_step_report r = {
                    .epoch = epoch + 1, .epochs = ts->epochs, .step = step, .steps_per_epoch = steps_per_epoch,
                    .global_step = global, .total_steps = total, .loss = loss / b,
                    .accuracy = (double)ok / b, .lr = lr,
                    .samples_per_s = (double)seen / (t - epoch_start + 1e-12),
                    .eta_s = (t - run_start) / (double)global * (double)(total - global)};
                hooks->on_step(hooks->ctx, &r);
            }
        }
        struct dl_epoch_report er = {.epoch = epoch + 1, .epochs = ts->epochs,
                                     .train_loss = seen ? loss_sum / (double)seen : 0,
                                     .train_accuracy = seen ? (double)correct / (double)seen : 0};
        er.seconds = now_s() - epoch_start;
        er.samples_per_s = (double)seen / (er.seconds + 1e-12);
        dl_evaluate(&exec, &test, ts->batch, &er.test_loss, &er.test_accuracy);
        er.test_samples = test.n;
        res->last = er;
        if (hooks && hooks->on_epoch)
            hooks->on_epoch(hooks->ctx, &er);
    }
    res->steps = global;
    res->seconds = now_s() - run_start;
done:
    free(x);
    free(y);
    dl_optim_free(&opt);
    dl_exec_free(&exec);
    dl_batcher_free(&batcher);
    dl_dataset_free(&train);
    dl_dataset_free(&test);
    return rc;
}
