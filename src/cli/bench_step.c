/* bench_step.c: `dltrain bench step --net FILE --batch N [--threads N]`:
 * times whole training steps (zero grad, forward, backward, optimizer) on
 * random data of the network's input shape and prints per-layer forward and
 * backward times with the kernel and layout of each layer, then the step
 * time (median), samples/s, achieved GFLOP/s (3x the forward FLOPs: forward,
 * backward data, backward weights) and its share of the machine's measured
 * sgemm peak (under --precision bf16 also of its measured bf16 GEMM peak),
 * and the planned arena bytes.  --trace FILE writes the steps'
 * timeline (io/trace_json.h). */
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
#include "graph/model_flops.h"
#include "graph/random_batch.h"
#include "io/trace.h"
#include "optim/optim.h"
#include "train/no_decay.h"
#include "train/param_spans.h"
#include "parallel/trace_ranks.h"
#include "tune/tune.h"

/* Steps --trace records unless --trace-steps says (warm-up steps count). */
#define TRACE_DEFAULT_STEPS 20

static void help(void)
{
    fputs("Usage: dltrain bench step --net FILE [--batch N] [--threads N] [options]\n"
          "Times training steps on random data and prints per-layer forward/backward times, the step time,\n"
          "samples/s, GFLOP/s and the share of the measured sgemm peak.\n\n"
          "  --steps N             timed steps (default 10; the median is reported)\n"
          "  --warmup N            untimed steps first (default 3)\n"
          "  --no-peak             skip measuring the sgemm peak (and, with --precision bf16,\n"
          "                        the bf16 GEMM peak)\n"
          "  --trace FILE          write the steps' timeline (Chrome trace-event JSON: layers,\n"
          "                        reorders, optimizer) for chrome://tracing or ui.perfetto.dev\n"
          "  --trace-steps N       steps it records, warm-up included (default 20; 0: all)\n\n",
          stdout);
    dl_net_options_help(stdout);
}

static void print_layers(const struct dl_exec *e, int steps)
{
    const struct dl_graph *g = e->g;
    printf("%-4s %-26s %-15s %-12s %-8s %10s %10s %9s\n", "#", "layer", "type", "kernel", "layout", "fwd ms",
           "bwd ms", "GFLOP/s");
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        double f = e->stats.time_fwd[i] / steps, b = e->stats.time_bwd[i] / steps;
        double gf = f + b > 0 ? 3 * l->flops * e->run.batch / (f + b) / 1e9 : 0;
        printf("%-4d %-26s %-15s %-12s %-8s %10.3f %10.3f %9.1f\n", i, l->name, l->kind->name,
               e->fused[i] ? "fused" : e->kernel[i]->name,
               dl_layout_names[e->act[i].layout], 1e3 * f, 1e3 * b, gf);
    }
}

/* Everything the command line asks for. */
struct bench_step_command {
    struct dl_net_options net_options;
    int steps, warmup, peak;
    const char *trace_path;
    long trace_steps;
};

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct bench_step_command *cmd)
{
    static const struct dl_option options[] = {
        DL_OPTION_INT("steps", struct bench_step_command, steps, 1, 100000),
        DL_OPTION_INT("warmup", struct bench_step_command, warmup, 0, 100000),
        DL_OPTION_FLAG("no-peak", struct bench_step_command, peak, 0),
        DL_OPTION_STRING("trace", struct bench_step_command, trace_path),
        DL_OPTION_LONG("trace-steps", struct bench_step_command, trace_steps, 0, 1L << 40), DL_OPTION_END};
    struct dl_command_line line = {"dltrain bench step", options, cmd, &cmd->net_options, help, .version = 1};
    int first_argument;
    return dl_options_parse(&line, argc, argv, &first_argument);
}

/* What the timed steps run on. */
struct step_bench {
    struct dl_exec e;
    struct dl_optim o;
    void *x;
    int *y;
    double *t;               /* each timed step's seconds */
    struct dl_trace *trace;  /* --trace, else NULL */
};

/* The executor, the optimizer, a random batch and the trace; on failure
 * the executor and the optimizer are freed (the rest by free_bench). */
static int setup(struct bench_step_command *cmd, const struct dl_net *net, struct step_bench *b,
                 struct dl_error *err)
{
    const struct dl_graph *g = &net->graph;
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd->net_options, &eo);
    b->t = malloc(sizeof *b->t * (size_t)cmd->steps);
    int rc = !b->t ? dl_errorf(err, DL_ERR_NOMEM, "out of memory")
                   : dl_graph_random_batch(g, net->train.batch, &b->x, &b->y, err);
    if (!rc && cmd->trace_path) {
        b->trace = dl_trace_create(cmd->trace_steps, 0, 0, 0, 0, err);
        rc = b->trace ? dl_trace_align(b->trace, NULL, err) : DL_ERR_NOMEM;
        eo.trace = b->trace;
    }
    if (!rc)
        rc = dl_exec_init(&b->e, g, net->train.batch, net->train.seed, &eo, err);
    if (!rc && (rc = dl_optim_init_on(&b->o, &net->train.optim, b->e.n_weights, dl_exec_device(&b->e), err)) != 0)
        dl_exec_free(&b->e);
    struct dl_exec *one = &b->e;
    if (!rc && ((rc = dl_no_decay_apply(&one, 1, b->e.weights, net->train.optim.no_decay, &b->o, NULL, err)) != 0 ||
                (rc = dl_param_spans_apply(&one, 1, b->e.weights, &b->o, NULL, err)) != 0)) {
        dl_optim_free(&b->o);
        dl_exec_free(&b->e);
    }
    return rc;
}

static void free_bench(struct step_bench *b)
{
    free(b->x), free(b->y), free(b->t);
    dl_trace_free(b->trace);
}

/* The warm-up steps, then the timed ones (zero grad, forward, backward, optimizer). */
static void run_steps(const struct bench_step_command *cmd, const struct dl_net *net, struct step_bench *b)
{
    struct dl_error err = {0};
    int N = net->train.batch;
    for (int s = 0; s < cmd->warmup + cmd->steps; s++) {
        if (s == cmd->warmup)
            dl_exec_timing_enable(&b->e, &err);
        dl_trace_step_begin(b->trace, s + 1);
        double t0 = dl_clock_now();
        dl_exec_zero_grad(&b->e);
        dl_exec_forward(&b->e, b->x, b->y, N, 1);
        dl_exec_backward(&b->e);
        double t_optim = dl_trace_now(b->trace);
        dl_optim_step(&b->o, net->train.optim.lr, b->e.weights, b->e.dweights);
        if (dl_trace_on(b->trace))
            dl_trace_span(b->trace, DL_TRACE_OPTIMIZER, "optimizer", t_optim);
        if (s >= cmd->warmup)
            b->t[s - cmd->warmup] = dl_clock_now() - t0;
        dl_trace_step_end(b->trace, t0, 1);
    }
}

/* The measured GEMM peaks and the step's share of them; for a language
 * model, its model FLOPs utilisation (graph/model_flops.h) of the peak of
 * the precision it trains in. */
static void print_peaks(const struct dl_net *net, double gflops, double tokens_per_s)
{
    const char *lib, *core, *impl;
    double p = dl_kernel_sgemm_peak(1024, &lib, &core), per_token = dl_graph_model_flops_per_token(&net->graph);
    printf("sgemm peak: %.1f GFLOP/s (%s, 1024^3; OpenBLAS core %s); share %.1f%%\n", p, lib, core,
           p > 0 ? 100 * gflops / p : 0);
    if (net->train.precision && (p = dl_kernel_bf16_gemm_peak(1024, &impl)) > 0) /* bf16: its own peak */
        printf("bf16 GEMM peak: %.1f GFLOP/s (oneDNN matmul %s, 1024^3, f32 sums); share %.1f%%\n", p, impl,
               100 * gflops / p);
    if (per_token > 0 && p > 0)
        printf("MFU: %.1f%% (%.0f tokens/s x %.4g model FLOPs a token, of the %s peak)\n",
               100 * per_token * tokens_per_s / (p * 1e9), tokens_per_s, per_token,
               net->train.precision ? "bf16" : "sgemm");
}

static void print_results(const struct bench_step_command *cmd, const struct dl_net *net, struct step_bench *b)
{
    const struct dl_graph *g = &net->graph;
    const struct dl_exec *e = &b->e;
    int N = net->train.batch, steps = cmd->steps;
    double flops = 0;
    for (int i = 0; i < g->n; i++)
        flops += g->layers[i].flops;
    double med = dl_median(b->t, steps), gflops = 3 * flops * N / med / 1e9;
    printf("network %s, batch %d, %d threads, %d timed steps after %d warm-up, %d reorder steps\n", net->name,
           N, dl_threads_get(), steps, cmd->warmup, dl_exec_reorders(e));
    print_layers(e, steps);
    printf("step time: %.3f ms (median; min %.3f, max %.3f)\n", 1e3 * med, 1e3 * b->t[0], 1e3 * b->t[steps - 1]);
    printf("samples/s: %.1f\n", N / med);
    if (g->id_limit > 0)
        printf("tokens/s: %.1f\n", N * (double)g->input.h / med);
    printf("achieved: %.1f GFLOP/s (%.3f GFLOP per step)\n", gflops, 3 * flops * N / 1e9);
    printf("planned arena: %zu bytes (%.1f MiB; %.1f MiB without reuse); parameters %.1f MiB\n", e->stats.arena_bytes,
           e->stats.arena_bytes / 1048576.0, e->stats.unplanned_bytes / 1048576.0, 3.0 * e->n_weights * 4 / 1048576.0);
    if (cmd->peak)
        print_peaks(net, gflops, N * (double)g->input.h / med);
}

int dl_cli_bench_step(int argc, char **argv)
{
    struct bench_step_command cmd = {.steps = 10, .warmup = 3, .peak = 1, .trace_steps = TRACE_DEFAULT_STEPS};
    dl_net_options_init(&cmd.net_options);
    int status = parse_args(argc, argv, &cmd);
    if (status >= 0)
        return status;
    struct dl_net net;
    status = dl_net_options_load(&cmd.net_options, &net, "dltrain bench step");
    if (status)
        return status;
    struct dl_error err = {0};
    struct step_bench b = {0};
    int rc = setup(&cmd, &net, &b, &err);
    if (rc) {
        fprintf(stderr, "dltrain bench step: %s\n", err.msg);
        free_bench(&b);
        dl_net_free(&net);
        return 1;
    }
    run_steps(&cmd, &net, &b);
    if (b.trace && dl_trace_gather_write(b.trace, NULL, cmd.trace_path, &err)) {
        fprintf(stderr, "dltrain bench step: %s\n", err.msg);
        rc = 1;
    }
    if (b.e.status) {
        fprintf(stderr, "dltrain bench step: %s\n", b.e.err.msg);
        rc = 1;
    } else {
        print_results(&cmd, &net, &b);
    }
    dl_optim_free(&b.o);
    dl_exec_free(&b.e);
    free_bench(&b);
    dl_net_free(&net);
    return rc;
}
