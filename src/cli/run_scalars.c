/* run_scalars.c: a training run's reports as TensorBoard scalars (see
 * run_scalars.h). */
#include "cli/run_scalars.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PER_EVENT = 32 }; /* scalars in one event */

/* tags[i] = values[i] at step, in events of at most PER_EVENT. */
static void scalars(struct dl_run_scalars *s, long step, int n, const char *const *tags, const double *values)
{
    for (int i = 0; i < n; i += PER_EVENT)
        dl_tensorboard_scalars(&s->tb, step, n - i < PER_EVENT ? n - i : PER_EVENT, tags + i, values + i);
}

/* scalars() of those of the n values that are finite: a NaN accuracy is
 * one the run has not (a regression loss; top-5 of 5 classes or fewer). */
static void scalars_finite(struct dl_run_scalars *s, long step, int n, const char *const *tags, const double *values)
{
    const char *t[PER_EVENT];
    double v[PER_EVENT];
    int m = 0;
    for (int i = 0; i < n && m < PER_EVENT; i++)
        if (isfinite(values[i]))
            t[m] = tags[i], v[m++] = values[i];
    scalars(s, step, m, t, v);
}

void dl_run_scalars_memory(struct dl_run_scalars *s, int r, int n, double bytes)
{
    if (!s->tb.open)
        return;
    if (!s->memory_bytes && (s->memory_bytes = calloc((size_t)n, sizeof *s->memory_bytes)))
        s->memory_ranks = n;
    if (r < s->memory_ranks)
        s->memory_bytes[r] = bytes;
}

/* The first step: the START event (on which TensorBoard drops what earlier
 * files hold from this step on) and each rank's memory, the step before. */
static void start(struct dl_run_scalars *s, long step)
{
    s->started = 1;
    dl_tensorboard_start(&s->tb, step);
    char names[PER_EVENT][32];
    const char *tags[PER_EVENT];
    double values[PER_EVENT];
    for (int i = 0; i < s->memory_ranks; i += PER_EVENT) {
        int k = 0;
        for (; k < PER_EVENT && i + k < s->memory_ranks; k++) {
            snprintf(names[k], sizeof names[k], "memory/rank%d_bytes", i + k);
            tags[k] = names[k], values[k] = s->memory_bytes[i + k];
        }
        scalars(s, step - 1, k, tags, values);
    }
}

void dl_run_scalars_step(struct dl_run_scalars *s, const struct dl_step_report *r, int n, const char *const *keys,
                         const double *vals)
{
    static const char *const names[][2] = {
        {"loss", "train/loss"}, {"accuracy", "train/accuracy"}, {"lr", "train/lr"},
        {"samples_per_s", "train/samples_per_s"}, {"tokens_per_s", "train/tokens_per_s"}, {"mfu", "train/mfu"}, {"aux_loss", "train/aux_loss"},
        {"expert_max_load", "moe/max_load"}, {"expert_dropped", "moe/dropped"},
        {"comm_s", "comm/seconds"},
        {"exposed_comm_s", "comm/exposed_seconds"}, {"bytes_sent", "comm/bytes_sent"},
        {"staleness", "staleness"}, /* a parameter server's worker's: workerW/staleness */
        {"consensus_distance", "consensus/distance"}, {"grad_norm", "train/grad_norm"},
        {"skipped", "train/skipped"}, {"skipped_steps", "train/skipped_steps"},
        {"step_s", "time/step_seconds"}, {"input_s", "time/input_seconds"}, {"compute_s", "time/compute_seconds"}};
    enum { MAX = sizeof names / sizeof names[0] };
    if (!s->tb.open)
        return;
    s->last_step = r->global_step;
    if (!s->started)
        start(s, r->global_step);
    char worker_tags[MAX][48];
    const char *tags[MAX];
    double values[MAX];
    int m = 0;
    for (int i = 0; i < n && m < MAX; i++)
        for (int j = 0; j < MAX; j++)
            if (!strcmp(keys[i], names[j][0])) {
                if (r->worker >= 0) { /* a worker's steps: curves of its own */
                    snprintf(worker_tags[m], sizeof worker_tags[m], "worker%d/%s", r->worker, keys[i]);
                    tags[m] = worker_tags[m];
                } else
                    tags[m] = names[j][1];
                values[m++] = vals[i];
            }
    scalars(s, r->global_step, m, tags, values);
    for (int i = 0; i < r->n_expert_layers; i++) { /* each routing layer's: moe/LAYER/max_load, .../dropped */
        const struct dl_expert_layer_load *x = &r->expert_layers[i];
        double sum = 0, top = 0;
        for (int e = 0; e < x->experts; e++)
            sum += x->taken[e], top = x->taken[e] > top ? x->taken[e] : top;
        char load[160], lost[160];
        snprintf(load, sizeof load, "moe/%s/max_load", x->layer);
        snprintf(lost, sizeof lost, "moe/%s/dropped", x->layer);
        const char *layer_tags[] = {load, lost};
        const double layer_values[] = {sum > 0 ? top * x->experts / sum : NAN,
                                       x->choices > 0 ? x->dropped / x->choices : NAN};
        scalars(s, r->global_step, 2, layer_tags, layer_values);
    }
    dl_tensorboard_push(&s->tb); /* to the system each step: a killed run keeps its curves */
}

void dl_run_scalars_epoch(struct dl_run_scalars *s, const struct dl_epoch_report *r)
{
    if (!s->tb.open)
        return;
    static const char *const all_tags[] = {"epoch/train_loss", "epoch/train_accuracy", "epoch/seconds",
                                           "epoch/samples_per_s", "epoch/test_loss", "epoch/test_accuracy",
                                           "epoch/test_top5_accuracy"};
    const double all[] = {r->train_loss, r->train_accuracy, r->seconds, r->samples_per_s, r->test_loss,
                          r->test_accuracy, r->test_top5};
    scalars_finite(s, s->last_step, r->evaluated ? 7 : 4, all_tags, all); /* test scores where it evaluated */
    dl_tensorboard_flush(&s->tb, NULL);
}

void dl_run_scalars_eval(struct dl_run_scalars *s, long step, const struct dl_epoch_report *r)
{
    if (!s->tb.open)
        return;
    static const char *const tags[] = {"eval/loss", "eval/accuracy", "eval/top5_accuracy"};
    const double values[] = {r->test_loss, r->test_accuracy, r->test_top5};
    scalars_finite(s, step, 3, tags, values);
    dl_tensorboard_flush(&s->tb, NULL);
}

int dl_run_scalars_close(struct dl_run_scalars *s, struct dl_error *err)
{
    int rc = dl_tensorboard_close(&s->tb, err);
    free(s->memory_bytes);
    s->memory_bytes = NULL, s->memory_ranks = 0;
    return rc;
}
