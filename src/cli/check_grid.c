/* check_grid.c: `dltrain check --grid` (see check_grid.h).  The memory of a
 * grid position is what its rank's training executors would hold, planned
 * by the same code that makes them (train/pipeline.h's
 * dl_pipeline_plan_memory: the schedule's slots, each with the planned
 * arena of its stage's layers for a chunk of the rank's part of the batch)
 * plus its parameters, their gradients and the optimizer's state.  Ranks
 * that differ only in their data-parallel index hold the same, so there is
 * one row per (tensor, pipeline) position. */
#include "cli/check_grid.h"

#include <stdio.h>
#include <string.h>

#include "optim/optim.h"
#include "plan/shard.h"
#include "train/pipeline.h"

/* The grid table: what tensor rank 0 of each stage runs for each layer. */
static void print_layers(const struct dl_graph *g, const struct dl_shard *s, const struct dl_grid_dims *d)
{
    char grid[64], how[200];
    printf("\ngrid %s: tensor rank 0 of each stage runs\n", dl_grid_str(d, grid, sizeof grid));
    printf("%-4s %-28s %-5s %-50s %12s\n", "#", "layer", "stage", "tensor-parallel split", "params/rank");
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *v = &s->local.layers[i];
        long params = dl_layer_param_count(v);
        printf("%-4d %-28s %-5d %-50s %12ld\n", i, g->layers[i].name, dl_stages_of(&s->stages, i),
               dl_shard_describe(s, i, how, sizeof how), params);
    }
    for (int i = 0; i < g->n; i++)
        if (s->layer[i].whole_because)
            printf("layer '%s' stays whole on every tensor rank: %s\n", g->layers[i].name, s->layer[i].whole_because);
}

/* "conv1..fc3" (first and last layer the rank runs) into buf. */
static const char *layer_range(const struct dl_shard *s, char *buf, size_t size)
{
    int first = -1, last = -1;
    for (int i = 0; i < s->g->n; i++)
        if (dl_shard_runs(s, i)) {
            first = first < 0 ? i : first;
            last = i;
        }
    if (first < 0)
        snprintf(buf, size, "none");
    else
        snprintf(buf, size, "%d-%d %s..%s", first, last, s->g->layers[first].name, s->g->layers[last].name);
    return buf;
}

/* One row per (t, p) position; returns the exit status. */
static int print_memory(const struct dl_net *net, const struct dl_grid_dims *d, const struct dl_check_grid *c,
                        const struct dl_exec_options *eo)
{
    const struct dl_graph *g = &net->graph;
    int batch = net->train.batch, chunks = dl_pipeline_chunks(c->chunks ? c->chunks : net->parallel.micro_batches,
                                                              d->pp);
    int max_local = (batch + d->dp - 1) / d->dp; /* the batcher's largest part of a mini-batch */
    int vectors = dl_optim_state_vectors(&net->train.optim);
    char sched[48];
    snprintf(sched, sizeof sched, c->V > 1 ? "%s:%d" : "%s", dl_schedule_kind_name(c->schedule), c->V);
    printf("\nmemory per rank (batch %d, %d per data-parallel rank, %d chunk%s, %s; %s keeps %d vector%s per "
           "weight): bytes of parameters, their gradients, the optimizer's state, other state (batch-norm\n"
           "statistics), and the arenas of the executors (activations, their gradients, kernel state, workspace: one "
           "per chunk in flight); peak = their sum\n",
           batch, max_local, chunks, chunks == 1 ? "" : "s", sched, dl_optim_names[net->train.optim.kind], vectors,
           vectors == 1 ? "" : "s");
    printf("%-3s %-3s %-14s %-36s %5s %13s %13s %13s %10s %13s %13s\n", "t", "p", "ranks", "layers", "execs",
           "params", "gradients", "optimizer", "state", "arena", "peak");
    for (int p = 0; p < d->pp; p++)
        for (int t = 0; t < d->tp; t++) {
            struct dl_shard s;
            struct dl_error err = {0};
            struct dl_pipeline_memory m;
            int rank = dl_grid_rank(d, (struct dl_grid_pos){t, 0, p});
            int rc = dl_shard_make(g, d, c->V, rank, NULL, &s, &err);
            if (!rc) {
                struct dl_exec_options o = *eo;
                o.shard = &s;
                rc = dl_pipeline_plan_memory(g, &o, max_local, chunks, c->schedule, c->V, &m, &err);
                if (rc)
                    dl_shard_free(&s);
            }
            if (rc) {
                fprintf(stderr, "dltrain check: --grid %s: rank %d (t=%d p=%d): %s\n", c->grid, rank, t, p, err.msg);
                return rc == DL_ERR_SPEC ? 2 : 1;
            }
            char ranks[64] = "", layers[128];
            size_t used = 0;
            for (int dd = 0; dd < d->dp && used < sizeof ranks; dd++)
                used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", dd ? "," : "",
                                         dl_grid_rank(d, (struct dl_grid_pos){t, dd, p}));
            double w = 4.0 * (double)m.weights, opt = w * vectors, st = 4.0 * (double)m.state;
            printf("%-3d %-3d %-14s %-36s %5d %13.0f %13.0f %13.0f %10.0f %13zu %13.0f\n", t, p, ranks,
                   layer_range(&s, layers, sizeof layers), m.slots, w, w, opt, st, m.arena_bytes,
                   2 * w + opt + st + (double)m.arena_bytes);
            dl_shard_free(&s);
        }
    return 0;
}

int dl_check_grid(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_exec_options *eo)
{
    struct dl_grid_dims want = {0, 0, 0}, d;
    struct dl_error err = {0};
    struct dl_shard s;
    if (dl_grid_parse(c->grid, &want, &err)) {
        fprintf(stderr, "dltrain check: --grid: %s\n", err.msg);
        return 2;
    }
    int world = c->ranks ? c->ranks : (want.dp ? want.dp : 1) * (want.tp ? want.tp : 1) * (want.pp ? want.pp : 1);
    if (dl_grid_resolve(DL_PAR_HYBRID, want, world, &d, &err) ||
        dl_shard_make(&net->graph, &d, c->V, 0, NULL, &s, &err)) {
        fprintf(stderr, "dltrain check: --grid %s%s: %s\n", c->grid, c->ranks ? " --ranks" : "", err.msg);
        return 2;
    }
    print_layers(&net->graph, &s, &d);
    dl_shard_free(&s);
    return print_memory(net, &d, c, eo);
}
