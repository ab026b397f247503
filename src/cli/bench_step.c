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

#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/threads.h"
#include "exec/exec.h"
#include "io/trace.h"
#include "optim/optim.h"
#include "train/no_decay.h"
#include "parallel/trace_ranks.h"
#include "tune/tune.h"

enum { OPT_STEPS = DL_OPT_FIRST_LOCAL, OPT_WARMUP, OPT_NO_PEAK, OPT_TRACE, OPT_TRACE_STEPS };

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
               dl_layout_names[e->act_layout[i]], 1e3 * f, 1e3 * b, gf);
    }
}

int dl_cli_bench_step(int argc, char **argv)
{
    static const struct option long_opts[] = {DL_NET_OPTIONS,
                                              {"steps", required_argument, 0, OPT_STEPS},
                                              {"warmup", required_argument, 0, OPT_WARMUP},
                                              {"no-peak", no_argument, 0, OPT_NO_PEAK},
                                              {"trace", required_argument, 0, OPT_TRACE},
                                              {"trace-steps", required_argument, 0, OPT_TRACE_STEPS},
                                              {0, 0, 0, 0}};
    struct dl_net_options net_options;
    dl_net_options_init(&net_options);
    int opt, steps = 10, warmup = 3, peak = 1;
    const char *trace_path = NULL;
    long trace_steps = TRACE_DEFAULT_STEPS;
    optind = 1;
    while ((opt = dl_getopt(argc, argv, long_opts, "dltrain bench step")) != -1) {
        int r = dl_net_option(&net_options, opt, optarg, "dltrain bench step");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_STEPS:
        case OPT_WARMUP: {
            struct dl_error perr = {0};
            if (dl_option_refused("dltrain bench step",
                                  dl_parse_int(opt == OPT_STEPS ? "--steps" : "--warmup", optarg,
                                               opt == OPT_STEPS ? 1 : 0, 100000,
                                               opt == OPT_STEPS ? &steps : &warmup, &perr), &perr))
                return 2;
            break;
        }
        case OPT_NO_PEAK: peak = 0; break;
        case OPT_TRACE: trace_path = optarg; break;
        case OPT_TRACE_STEPS: {
            struct dl_error perr = {0};
            if (dl_option_refused("dltrain bench step",
                                  dl_parse_long("--trace-steps", optarg, 0, 1L << 40, &trace_steps, &perr), &perr))
                return 2;
            break;
        }
        case DL_OPT_HELP: help(); return 0;
        case DL_OPT_VERSION: dl_print_version("dltrain bench step"); return 0;
        default: return 2;
        }
    }
    struct dl_net net;
    int status = dl_net_options_load(&net_options, &net, "dltrain bench step");
    if (status)
        return status;
    const struct dl_graph *g = &net.graph;
    int N = net.train.batch;
    struct dl_error err = {0};
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&net_options, &eo);
    struct dl_optim o = {0};
    float *x = NULL;
    int *y = NULL;
    double *t = malloc(sizeof *t * (size_t)steps);
    int rc = !t ? dl_errorf(&err, DL_ERR_NOMEM, "out of memory") : dl_bench_random_batch(g, N, &x, &y, &err);
    struct dl_trace *trace = NULL;
    if (!rc && trace_path) {
        trace = dl_trace_create(trace_steps, 0, 0, 0, 0, &err);
        rc = trace ? dl_trace_align(trace, NULL, &err) : DL_ERR_NOMEM;
        eo.trace = trace;
    }
    if (!rc)
        rc = dl_exec_init(&e, g, N, net.train.seed, &eo, &err);
    if (!rc && (rc = dl_optim_init_on(&o, &net.train.optim, e.n_weights, dl_exec_device(&e), &err)) != 0)
        dl_exec_free(&e);
    struct dl_exec *one = &e;
    if (!rc && (rc = dl_no_decay_apply(&one, 1, e.weights, net.train.optim.no_decay, &o, NULL, &err)) != 0) {
        dl_optim_free(&o);
        dl_exec_free(&e);
    }
    if (rc) {
        fprintf(stderr, "dltrain bench step: %s\n", err.msg);
        free(x), free(y), free(t);
        dl_trace_free(trace);
        dl_net_free(&net);
        return 1;
    }
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup)
            dl_exec_timing_enable(&e, &err);
        dl_trace_step_begin(trace, s + 1);
        double t0 = dl_clock_now();
        dl_exec_zero_grad(&e);
        dl_exec_forward(&e, x, y, N, 1);
        dl_exec_backward(&e);
        double t_optim = dl_trace_now(trace);
        dl_optim_step(&o, net.train.optim.lr, e.weights, e.dweights);
        if (dl_trace_on(trace))
            dl_trace_span(trace, DL_TRACE_OPTIMIZER, "optimizer", t_optim);
        if (s >= warmup)
            t[s - warmup] = dl_clock_now() - t0;
        dl_trace_step_end(trace, t0, 1);
    }
    if (trace && dl_trace_gather_write(trace, NULL, trace_path, &err)) {
        fprintf(stderr, "dltrain bench step: %s\n", err.msg);
        rc = 1;
    }
    if (e.status) {
        fprintf(stderr, "dltrain bench step: %s\n", e.err.msg);
        rc = 1;
    } else {
        double flops = 0;
        for (int i = 0; i < g->n; i++)
            flops += g->layers[i].flops;
        double med = dl_median(t, steps), gflops = 3 * flops * N / med / 1e9;
        printf("network %s, batch %d, %d threads, %d timed steps after %d warm-up, %d reorder steps\n", net.name,
               N, dl_threads_get(), steps, warmup, dl_exec_reorders(&e));
        print_layers(&e, steps);
        printf("step time: %.3f ms (median; min %.3f, max %.3f)\n", 1e3 * med, 1e3 * t[0], 1e3 * t[steps - 1]);
        printf("samples/s: %.1f\n", N / med);
        printf("achieved: %.1f GFLOP/s (%.3f GFLOP per step)\n", gflops, 3 * flops * N / 1e9);
        printf("planned arena: %zu bytes (%.1f MiB; %.1f MiB without reuse); parameters %.1f MiB\n", e.stats.arena_bytes,
               e.stats.arena_bytes / 1048576.0, e.stats.unplanned_bytes / 1048576.0, 3.0 * e.n_weights * 4 / 1048576.0);
        if (peak) {
            const char *lib, *core, *impl;
            double p = dl_kernel_sgemm_peak(1024, &lib, &core);
            printf("sgemm peak: %.1f GFLOP/s (%s, 1024^3; OpenBLAS core %s); share %.1f%%\n", p, lib, core,
                   p > 0 ? 100 * gflops / p : 0);
            if (net.train.precision && (p = dl_kernel_bf16_gemm_peak(1024, &impl)) > 0) /* bf16: its own peak */
                printf("bf16 GEMM peak: %.1f GFLOP/s (oneDNN matmul %s, 1024^3, f32 sums); share %.1f%%\n", p, impl,
                       100 * gflops / p);
        }
    }
    dl_optim_free(&o);
    dl_exec_free(&e);
    dl_trace_free(trace);
    free(x), free(y), free(t);
    dl_net_free(&net);
    return rc;
}
