/* bench_pipeline.c: `dltrain bench pipeline --net FILE --ranks P`: the
 * pipeline bubble of each schedule without the ranks competing for the
 * CPU.  It measures every layer's forward, backward-input and
 * backward-weights time on one chunk of the batch in this one process,
 * cuts the network into each schedule's stages as training would, and runs
 * the schedule's action lists in the simulator (parallel/schedule.h) on
 * those per-stage times: the step time and idle fraction the schedule would
 * have on P ranks of this machine's speed, next to the bubble formula.
 * (Training on P ranks oversubscribed on fewer cores measures the
 * contention as much as the schedule.) */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/threads.h"
#include "exec/exec.h"
#include "graph/random_batch.h"
#include "parallel/schedule.h"
#include "plan/stages.h"


#define PROG "dltrain bench pipeline"

static void help(void)
{
    fputs("Usage: dltrain bench pipeline --net FILE [--ranks P] [--pipeline-chunks M] [options]\n"
          "Measures each layer's forward, backward-input and backward-weights time on one chunk in this\n"
          "process and simulates every schedule on P pipeline ranks with those per-stage times: the step\n"
          "time and pipeline bubble of each schedule without the ranks competing for the CPU.\n\n"
          "  --ranks P             pipeline ranks (default 4)\n"
          "  --pipeline-chunks M   chunks per mini-batch (default 4*P)\n"
          "  --schedules LIST      comma-separated (default gpipe,1f1b,interleaved:2,zb-h1)\n"
          "  --steps N             timed passes per layer, median (default 9, after 2 untimed)\n"
          "  --send-latency MS     time a message takes between stages (default 0)\n"
          "  --cut-by-times        cut the stages by the measured layer times (default: as training\n"
          "                        cuts them, by estimated costs, unless the network file sets them)\n\n",
          stdout);
    dl_net_options_help(stdout);
}

/* Per-layer seconds of one chunk's passes, the median of `steps` runs
 * (the machine may be shared: a mean takes in every other job's burst),
 * and (by_times) their sums as the costs the stages are cut by. */
struct layer_times {
    double *fwd, *bwd_in, *bwd_w, *total;
    int by_times;
};

/* Into med[i], the median over the steps of run[step][i] - run[step - 1][i]
 * (run[0]: before the first step); col: scratch of steps values. */
static void step_medians(const double *run, int n, int steps, double *col, double *med)
{
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < steps; s++)
            col[s] = run[(size_t)(s + 1) * (size_t)n + (size_t)i] - run[(size_t)s * (size_t)n + (size_t)i];
        med[i] = dl_median(col, steps);
    }
}

/* Runs forward, backward-input and backward-weights on `chunk` random
 * samples, twice untimed, then `steps` times. */
static int measure(struct dl_exec *e, int chunk, int steps, struct layer_times *t, struct dl_error *err)
{
    const struct dl_graph *g = e->g;
    size_t n = (size_t)g->n, per = (size_t)(steps + 1) * n;
    double *run = malloc(sizeof *run * (3 * per + (size_t)steps)); /* cumulative fwd, bwd_in, bwd_w per step */
    if (!run)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    void *x;
    int *y;
    int warmup = 2, rc = dl_graph_random_batch(g, chunk, &x, &y, err);
    for (int s = 0; s < warmup + steps + 1 && !rc && !e->status; s++) {
        if (s == warmup)
            rc = dl_exec_timing_enable(e, err);
        if (s >= warmup) { /* the sums so far: before the first timed step, after each */
            memcpy(run + (size_t)(s - warmup) * n, e->stats.time_fwd, sizeof *run * n);
            memcpy(run + per + (size_t)(s - warmup) * n, e->stats.time_bwd, sizeof *run * n);
            memcpy(run + 2 * per + (size_t)(s - warmup) * n, e->stats.time_wgt, sizeof *run * n);
        }
        if (s == warmup + steps)
            break;
        dl_exec_zero_grad(e);
        dl_exec_forward(e, x, y, chunk, 1);
        dl_exec_backward_input(e);
        dl_exec_backward_weights(e);
    }
    if (!rc && e->status) {
        *err = e->err;
        rc = e->status;
    }
    if (!rc) {
        double *col = run + 3 * per;
        step_medians(run, g->n, steps, col, t->fwd);
        step_medians(run + per, g->n, steps, col, t->bwd_in);
        step_medians(run + 2 * per, g->n, steps, col, t->bwd_w);
        for (int i = 0; i < g->n; i++)
            t->total[i] = t->fwd[i] + t->bwd_in[i] + t->bwd_w[i];
    }
    free(x), free(y), free(run);
    return rc;
}

/* The bubble formula of a kind with uniform stages (zb-h1's with t_F = t_B = t_W). */
static double formula(enum dl_pipe_schedule kind, int P, int M, int V)
{
    double chunks = kind == DL_SCHED_INTERLEAVED ? (double)V * M : kind == DL_SCHED_ZB_H1 ? 3.0 * M : M;
    return (P - 1) / (chunks + P - 1);
}

/* One schedule's row: its stages' costs from the layer times, simulated,
 * or why the schedule refuses these ranks and chunks. */
static void simulate_one(const char *spec, const struct dl_graph *g, const struct layer_times *t, int P, int M,
                        double latency, struct dl_error *err)
{
    enum dl_pipe_schedule kind;
    int V, rc = dl_schedule_parse(spec, &kind, &V, err);
    struct dl_stages st = {0};
    struct dl_schedule sched = {0};
    if (!rc)
        rc = dl_stages_cut(g, P, V, t->by_times ? t->total : NULL, &st, err);
    if (!rc)
        rc = dl_schedule_make(kind, P, M, V, &sched, err);
    double *c = rc ? NULL : calloc(3 * (size_t)st.S + (size_t)P, sizeof *c);
    if (!rc && !c)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    if (!rc) {
        double *fwd = c, *bin = c + st.S, *bw = c + 2 * st.S, *busy = c + 3 * st.S, makespan, idle, slowest = 0;
        for (int i = 0; i < g->n; i++) {
            int s = dl_stages_of(&st, i);
            fwd[s] += t->fwd[i];
            bin[s] += t->bwd_in[i];
            bw[s] += t->bwd_w[i];
        }
        for (int s = 0; s < st.S; s++)
            slowest = fwd[s] + bin[s] + bw[s] > slowest ? fwd[s] + bin[s] + bw[s] : slowest;
        struct dl_sched_costs costs = {fwd, bin, bw, latency};
        rc = dl_schedule_simulate(&sched, &costs, &makespan, busy, &idle, err);
        if (!rc)
            printf("%-16s %6d %12.3f %12.3f %8.3f %8.3f %8d\n", spec, st.S, 1e3 * slowest, 1e3 * makespan, idle,
                   formula(kind, P, M, V), dl_schedule_bound(&sched, 0));
    }
    if (rc)
        printf("%-16s refused: %s\n", spec, err->msg);
    free(c);
    dl_schedule_free(&sched);
    dl_stages_free(&st);
}

/* 1 when every name of the comma-separated list parses (else err says why). */
static int schedules_valid(const char *list, struct dl_error *err)
{
    enum dl_pipe_schedule kind;
    int V, ok = 1;
    char *copy = strdup(list);
    if (!copy)
        return 0;
    for (char *save = NULL, *s = strtok_r(copy, ",", &save); s && ok; s = strtok_r(NULL, ",", &save))
        ok = dl_schedule_parse(s, &kind, &V, err) == DL_OK;
    free(copy);
    return ok;
}

/* Everything the command line asks for. */
struct bench_pipeline_command {
    struct dl_net_options net_options;
    int P, M, steps, by_times;  /* --ranks, --pipeline-chunks (0: 4 P), --steps, --cut-by-times */
    double latency_ms;         /* --send-latency */
    const char *schedules;
};

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct bench_pipeline_command *cmd)
{
    static const struct dl_option options[] = {
        DL_OPTION_INT("ranks", struct bench_pipeline_command, P, 1, DL_SCHED_MAX_STAGES),
        DL_OPTION_INT("pipeline-chunks", struct bench_pipeline_command, M, 1, DL_SCHED_MAX_CHUNKS),
        DL_OPTION_STRING("schedules", struct bench_pipeline_command, schedules),
        DL_OPTION_INT("steps", struct bench_pipeline_command, steps, 1, 100000),
        DL_OPTION_DOUBLE("send-latency", struct bench_pipeline_command, latency_ms, 0, 1e6),
        DL_OPTION_FLAG("cut-by-times", struct bench_pipeline_command, by_times, 1), DL_OPTION_END};
    struct dl_command_line line = {PROG, options, cmd, &cmd->net_options, help, .version = 1};
    int first_argument;
    return dl_options_parse(&line, argc, argv, &first_argument);
}

int dl_cli_bench_pipeline(int argc, char **argv)
{
    struct bench_pipeline_command cmd = {.P = 4, .steps = 9, .schedules = "gpipe,1f1b,interleaved:2,zb-h1"};
    dl_net_options_init(&cmd.net_options);
    int status = parse_args(argc, argv, &cmd);
    if (status >= 0)
        return status;
    int P = cmd.P, M = cmd.M, steps = cmd.steps, by_times = cmd.by_times;
    double latency_ms = cmd.latency_ms;
    const char *schedules = cmd.schedules;
    struct dl_error err = {0};
    if (!M)
        M = 4 * P;
    if (!schedules_valid(schedules, &err)) {
        fprintf(stderr, PROG ": --schedules '%s': %s\n", schedules, err.msg);
        return 2;
    }
    struct dl_net net;
    status = dl_net_options_load(&cmd.net_options, &net, PROG);
    if (status)
        return status;
    const struct dl_graph *g = &net.graph;
    int chunk = net.train.batch / M;
    if (chunk < 1) {
        fprintf(stderr, PROG ": --pipeline-chunks %d: the batch of %d has fewer samples than chunks\n", M,
                net.train.batch);
        dl_net_free(&net);
        return 2;
    }
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd.net_options, &eo);
    eo.split_backward = 1;
    double *times = calloc(4 * (size_t)g->n, sizeof *times);
    struct layer_times t = {times, times + g->n, times + 2 * g->n, times + 3 * g->n, by_times};
    int rc = !times ? dl_errorf(&err, DL_ERR_NOMEM, "out of memory")
                                             : dl_exec_init(&e, g, chunk, net.train.seed, &eo, &err);
    if (!rc) {
        rc = measure(&e, chunk, steps, &t, &err);
        dl_exec_free(&e);
    }
    if (rc) {
        fprintf(stderr, PROG ": %s\n", err.msg);
    } else {
        double total = 0;
        for (int i = 0; i < g->n; i++)
            total += t.total[i];
        printf("network %s, batch %d in %d chunks of %d, %d pipeline ranks, %d threads; per-layer times of one "
               "chunk measured here (median of %d), stages cut %s, send latency %.3f ms\n", net.name,
               net.train.batch, M, chunk, P, dl_threads_get(), steps,
               by_times ? "by those times" : "as training cuts them", latency_ms);
        printf("one process: %.3f ms per chunk, %.3f ms per step; perfect balance on %d ranks: %.3f ms\n",
               1e3 * total, 1e3 * total * M, P, 1e3 * total * M / P);
        printf("%-16s %6s %12s %12s %8s %8s %8s\n", "schedule", "stages", "slowest ms", "step ms", "bubble",
               "formula", "in-flight");
        char *list = strdup(schedules);
        for (char *save = NULL, *s = list ? strtok_r(list, ",", &save) : NULL; s; s = strtok_r(NULL, ",", &save))
            simulate_one(s, g, &t, P, M, latency_ms / 1e3, &err); /* a refusal is its row */
        free(list);
    }
    free(times);
    dl_net_free(&net);
    return rc == DL_ERR_SPEC ? 2 : rc ? 1 : 0;
}
