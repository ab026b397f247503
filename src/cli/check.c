/* check.c: `dltrain check --net FILE`: validates a network file and prints a
 * table of its layers with output shapes, parameter counts and forward FLOPs
 * per sample, and the totals; with --grid, how a grid's tensor rank 0
 * runs each layer (its pipeline stage, split and parameters) and every grid
 * position's planned memory (check_grid.c); with --consistency and --ranks,
 * what that consistency model does on that many ranks (gossip: its mixing
 * matrices; the network file is optional then). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/check_grid.h"
#include "cli/options.h"
#include "core/parse.h"
#include "exec/exec.h"
#include "parallel/strategy.h"

static void help(void)
{
    fputs("Usage: dltrain check --net FILE [options]\n"
          "Validates FILE (every error names file:line:col and exits with status 2) and prints\n"
          "each layer's type, inputs, output shape, trainable parameters and forward FLOPs per sample.\n\n",
          stdout);
    fputs("  --grid dp=D,tp=T,pp=P also print, for that grid (a factor left out is 1), each layer's\n"
          "                        pipeline stage, its tensor-parallel split on tensor rank 0 and how its\n"
          "                        inputs reach it, and its parameters on that rank; then per rank (one\n"
          "                        row per tensor x pipeline position) the layers it holds and the bytes of\n"
          "                        its parameters, gradients, optimizer state and executor arenas, as\n"
          "                        training on that grid plans them (not with --tune)\n"
          "  --ranks N             the world size: for --grid, dp takes the ranks the other factors\n"
          "                        leave; for --consistency, the rank count (default 4)\n"
          "  --pipeline-chunks M   --pipeline-schedule S  as dltrain train's, for the memory per rank\n",
          stdout);
    fputs("  --consistency MODE    with --ranks P: what MODE does on P ranks; for gossip:TOPOLOGY the\n"
          "                        mixing matrix W (row i: the weights rank i gives every rank's vector),\n"
          "                        one per step of a time-varying topology (--net optional then)\n",
          stdout);
    dl_net_options_help(stdout);
}

enum { OPT_GRID = DL_OPT_FIRST_LOCAL, OPT_CONSISTENCY, OPT_RANKS, OPT_CHUNKS, OPT_SCHEDULE };

/* What --consistency does on `ranks` ranks: gossip's mixing matrices (one
 * per step of the period), EASGD's alpha; 2 when the pair is refused. */
static int print_consistency(const char *text, int ranks)
{
    struct dl_parallel_opts po;
    struct dl_error err = {0};
    dl_parallel_opts_defaults(&po);
    if (dl_consistency_parse(text, &po, &err) || dl_parallel_opts_check(&po, ranks, &err)) {
        fprintf(stderr, "dltrain check: %s\n", err.msg);
        return 2;
    }
    if (po.consistency == DL_CONS_EASGD || po.consistency == DL_CONS_EASGD_ASYNC) {
        int workers = dl_easgd_workers(&po, ranks);
        double alpha = dl_easgd_alpha(&po, workers);
        if (po.consistency == DL_CONS_EASGD)
            printf("easgd on %d ranks: every %d step%s x_i -= %g (x_i - c), c += %g sum_i (x_i - c) (beta = %g)\n",
                   ranks, po.easgd_tau, po.easgd_tau > 1 ? "s" : "", alpha, alpha, alpha * workers);
        else
            printf("easgd-async on %d ranks: %d server%s holding the center, %d workers; every %d step%s a worker's "
                   "d = %g (x_i - c), x_i -= d, c += d, one worker at a time\n", ranks, ranks - workers,
                   ranks - workers > 1 ? "s" : "", workers, po.easgd_tau, po.easgd_tau > 1 ? "s" : "", alpha);
        return 0;
    }
    if (po.consistency != DL_CONS_GOSSIP) {
        printf("%s on %d ranks: no mixing matrix (only gossip:TOPOLOGY has one)\n", text, ranks);
        return 0;
    }
    int period = dl_mixing_period(po.topology, ranks), offsets[DL_MIXING_MAX_RANKS];
    double *w = malloc(sizeof *w * (size_t)ranks * (size_t)ranks);
    if (!w) {
        fprintf(stderr, "dltrain check: out of memory for a %d x %d matrix\n", ranks, ranks);
        return 1;
    }
    for (int t = 0; t < period; t++) {
        int peers = dl_mixing_offsets(po.topology, ranks, t, offsets, DL_MIXING_MAX_RANKS);
        printf("gossip:%s on %d ranks", dl_topology_names[po.topology], ranks);
        if (period > 1)
            printf(", step t with t mod %d = %d", period, t);
        printf(": rank i receives from i -");
        for (int k = 0; k < peers; k++)
            printf("%s%d", k ? ", " : " ", offsets[k]);
        printf(" and sends to i +");
        for (int k = 0; k < peers; k++)
            printf("%s%d", k ? ", " : " ", offsets[k]);
        printf(" (mod %d); %d x %.0f bytes per parameter per step\nW =\n", ranks, peers, (double)sizeof(float));
        dl_mixing_matrix(po.topology, ranks, t, w);
        for (int i = 0; i < ranks; i++) {
            for (int j = 0; j < ranks; j++) {
                if (w[i * ranks + j] > 0)
                    printf(" %6.4f", w[i * ranks + j]);
                else
                    printf(" %6s", "0");
            }
            printf("\n");
        }
    }
    free(w);
    return 0;
}

static void human(double v, char *buf, size_t n)
{
    if (v >= 1e9)
        snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

int dl_cli_check(int argc, char **argv)
{
    static const struct option long_opts[] = {DL_NET_OPTIONS, {"grid", required_argument, 0, OPT_GRID},
                                              {"consistency", required_argument, 0, OPT_CONSISTENCY},
                                              {"ranks", required_argument, 0, OPT_RANKS},
                                              {"pipeline-chunks", required_argument, 0, OPT_CHUNKS},
                                              {"pipeline-schedule", required_argument, 0, OPT_SCHEDULE},
                                              {0, 0, 0, 0}};
    struct dl_check_grid grid = {.schedule = DL_SCHED_1F1B, .V = 1};
    const char *consistency = NULL;
    struct dl_error perr = {0};
    struct dl_net_options net_options;
    dl_net_options_init(&net_options);
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        int r = dl_net_option(&net_options, opt, optarg, "dltrain check");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_GRID: grid.grid = optarg; break;
        case OPT_CONSISTENCY: consistency = optarg; break;
        case OPT_RANKS:
            if (dl_option_refused("dltrain check", dl_parse_int("--ranks", optarg, 1, 1 << 20, &grid.ranks, &perr),
                                  &perr))
                return 2;
            break;
        case OPT_CHUNKS:
            if (dl_option_refused("dltrain check", dl_parse_int("--pipeline-chunks", optarg, 1, DL_SCHED_MAX_CHUNKS,
                                                                 &grid.chunks, &perr), &perr))
                return 2;
            break;
        case OPT_SCHEDULE:
            if (dl_option_refused("dltrain check", dl_schedule_parse(optarg, &grid.schedule, &grid.V, &perr), &perr))
                return 2;
            break;
        case DL_OPT_HELP: help(); return 0;
        case DL_OPT_VERSION: dl_print_version("dltrain check"); return 0;
        default: fprintf(stderr, "Try 'dltrain check --help'.\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dltrain check: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (consistency && !net_options.net_path)
        return print_consistency(consistency, grid.ranks ? grid.ranks : 4);
    struct dl_net net;
    int status = dl_net_options_load(&net_options, &net, "dltrain check");
    if (status)
        return status;
    const struct dl_graph *g = &net.graph;
    char shape[64];
    printf("network %s (%s): input %s, %d classes, %d layers\n", net.name, net_options.net_path,
           dl_shape_str(g->input, shape, sizeof shape), g->classes, g->n);
    printf("%-4s %-28s %-22s %-30s %-14s %12s %10s\n", "#", "layer", "type", "inputs", "output", "params",
           "FLOPs");
    double flops = 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        char inputs[256] = "";
        for (int k = 0; k < l->n_in; k++) {
            const char *nm = l->in[k] == DL_GRAPH_INPUT ? "input" : g->layers[l->in[k]].name;
            strncat(inputs, k ? "," : "", sizeof inputs - strlen(inputs) - 1);
            strncat(inputs, nm, sizeof inputs - strlen(inputs) - 1);
        }
        long params = 0;
        for (int j = 0; j < l->n_params; j++)
            if (l->param[j].trainable)
                params += l->param[j].count;
        char f[32];
        human(l->flops, f, sizeof f);
        flops += l->flops;
        printf("%-4d %-28s %-22s %-30s %-14s %12ld %10s\n", i, l->name, l->kind->name, inputs,
               dl_shape_str(l->out_shape, shape, sizeof shape), params, f);
    }
    char f[32];
    human(flops, f, sizeof f);
    printf("total: %ld trainable parameters, %s FLOPs per sample (forward)\n", dl_graph_param_count(g), f);
    struct dl_exec plan;
    struct dl_error err = {0};
    struct dl_exec_options eo;
    dl_net_exec_options(&net_options, &eo);
    if (dl_exec_plan(&plan, g, net.train.batch, &eo, &err) == DL_OK) {
        double params = 3.0 * (double)dl_graph_param_count(g) * sizeof(float); /* weights, gradients, momentum */
        printf("planned peak: %.0f bytes for batch %d (arena %zu bytes: activations, gradients, kernel state and "
               "workspace, %zu without reuse; parameters, gradients and optimizer state %.0f bytes)\n",
               (double)plan.arena_bytes + params, net.train.batch, plan.arena_bytes, plan.unplanned_bytes, params);
        dl_exec_free(&plan);
    } else {
        printf("planned peak: unknown (%s)\n", err.msg);
    }
    status = grid.grid ? dl_check_grid(&net, &grid, &eo) : 0;
    if (!status && consistency) {
        printf("\n");
        status = print_consistency(consistency, grid.ranks ? grid.ranks : 4);
    }
    dl_net_free(&net);
    return status;
}
