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
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

#include "optim/optim.h"
#include "parallel/zero_grads.h"
#include "parallel/zero_weights.h"
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
        char copy[120] = "";
        for (int j = 0; j < v->n_params; j++) { /* tied to a layer of another pipeline rank: a copy (op.h's replica) */
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (p->shares && dl_stages_rank(&s->stages, s->layer[i].stage) !=
                                 dl_stages_rank(&s->stages, s->layer[p->share_layer].stage)) {
                params += v->param[j].count; /* this tensor rank's slice */
                snprintf(copy, sizeof copy, " (a copy of %s.%s)", g->layers[p->share_layer].name, p->name);
            }
        }
        printf("%-4d %-28s %-5d %-50s %12ld%s\n", i, g->layers[i].name, dl_stages_of(&s->stages, i),
               dl_shard_describe(s, i, how, sizeof how), params, copy);
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

/* Every (t, p) position's memory into out->rows. */
static int plan_memory(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_exec_options *eo,
                       struct dl_check_grid_plan *out, struct dl_error *err)
{
    const struct dl_graph *g = &net->graph;
    const struct dl_grid_dims *d = &out->d;
    int max_local = (net->train.batch + d->dp - 1) / d->dp; /* the batcher's largest part of a mini-batch */
    out->chunks = dl_pipeline_chunks(c->chunks ? c->chunks : net->parallel.micro_batches, d->pp);
    out->rows = dl_calloc((size_t)d->tp * (size_t)d->pp, sizeof *out->rows, err);
    if (!out->rows)
        return DL_ERR_NOMEM;
    for (int p = 0; p < d->pp; p++)
        for (int t = 0; t < d->tp; t++) {
            struct dl_shard s;
            struct dl_pipeline_memory m;
            int rank = dl_grid_rank(d, (struct dl_grid_pos){t, 0, p});
            int rc = dl_shard_make(g, d, c->V, rank, NULL, &s, err);
            if (!rc) {
                struct dl_exec_options o = *eo;
                o.shard = &s;
                rc = dl_pipeline_plan_memory(g, &o, max_local, out->chunks, c->schedule, c->V, &m, err);
                if (rc)
                    dl_shard_free(&s);
            }
            if (rc) {
                dl_error_prefix(err, "--grid %s: rank %d (t=%d p=%d)", c->grid, rank, t, p);
                return rc;
            }
            struct dl_check_grid_row *r = &out->rows[out->n++];
            r->t = t, r->p = p, r->slots = m.slots;
            size_t used = 0;
            for (int dd = 0; dd < d->dp && used < sizeof r->ranks; dd++)
                used += (size_t)snprintf(r->ranks + used, sizeof r->ranks - used, "%s%d", dd ? "," : "",
                                         dl_grid_rank(d, (struct dl_grid_pos){t, dd, p}));
            layer_range(&s, r->layers, sizeof r->layers);
            int blocks = net->parallel.zero ? d->dp : 1; /* ZeRO: the optimizer's state a block a data-parallel rank */
            long grads = m.weights, arena = 0, gathered = 0;
            struct dl_zero_shard zs;
            dl_zero_shard_of(m.weights, d->dp, 0, &zs);
            if (net->parallel.zero >= 2 && d->dp > 1) { /* ZeRO-2 and 3: the buckets (the default size) */
                struct dl_exec e;
                struct dl_exec_options o = *eo;
                o.shard = &s;
                rc = dl_exec_plan(&e, g, max_local, &o, err);
                if (!rc) {
                    rc = dl_zero_grads_plan_arena(&e, 0, &arena, err);
                    if (net->parallel.zero == 3) /* beside the block */
                        gathered = dl_zero_weights_gathered_of(&e);
                    dl_exec_free(&e);
                }
                if (rc) {
                    dl_shard_free(&s);
                    return rc;
                }
            }
            if (net->parallel.zero && d->dp > 1) /* with the block's sums and the staging */
                grads = dl_zero_grad_values(&zs, m.weights, net->parallel.zero, arena, 0, DL_F32);
            long held = dl_zero_held_weights(&zs, m.weights, d->dp > 1 ? net->parallel.zero : 0, gathered);
            r->weights = 4.0 * (double)held, r->gradients = 4.0 * (double)grads, r->state = 4.0 * (double)m.state;
            r->optimizer = dl_optim_state_bytes(&net->train.optim, (double)m.weights, blocks);
            r->arena = (double)m.arena_bytes;
            r->peak = r->arena + dl_optim_param_bytes(&net->train.optim, (double)m.weights, (double)held, (double)grads,
                                                      (double)m.state, blocks);
            if (r->peak > out->peak)
                out->peak = r->peak;
            dl_shard_free(&s);
        }
    return DL_OK;
}

int dl_check_grid_plan(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_exec_options *eo,
                       struct dl_check_grid_plan *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    struct dl_grid_dims want = {0, 0, 0};
    struct dl_shard s;
    if (dl_grid_parse(c->grid, &want, err)) /* its message names --grid */
        return DL_ERR_SPEC;
    int world = c->ranks ? c->ranks
                         : (want.dp ? want.dp : 1) * dl_grid_ep(&want) * (want.tp ? want.tp : 1) * (want.pp ? want.pp : 1);
    int bad = dl_grid_resolve(DL_PAR_HYBRID, want, world, &out->d, err);
    out->d.sp = net->parallel.sequence_parallel;
    if (bad || dl_shard_make(&net->graph, &out->d, c->V, 0, NULL, &s, err)) {
        dl_error_prefix(err, "--grid %s%s", c->grid, c->ranks ? " --ranks" : "");
        return DL_ERR_SPEC;
    }
    dl_shard_free(&s);
    return plan_memory(net, c, eo, out, err);
}

const char *dl_check_size(double v, int bytes, char *buf, size_t size)
{
    if (bytes)
        snprintf(buf, size, "%.0f", v);
    else
        dl_bytes_str(v, buf, size);
    return buf;
}

void dl_check_grid_print(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_check_grid_plan *p)
{
    struct dl_shard s;
    struct dl_error err = {0};
    if (dl_shard_make(&net->graph, &p->d, c->V, 0, NULL, &s, &err) == DL_OK) { /* made once already */
        print_layers(&net->graph, &s, &p->d);
        dl_shard_free(&s);
    }
    int batch = net->train.batch, vectors = dl_optim_state_vectors(&net->train.optim);
    char sched[48];
    snprintf(sched, sizeof sched, c->V > 1 ? "%s:%d" : "%s", dl_schedule_kind_name(c->schedule), c->V);
    printf("\nmemory per rank (batch %d, %d per data-parallel rank, %d chunk%s, %s; %s keeps %d vector%s per "
           "weight): parameters, their gradients, the optimizer's state, other state (batch-norm\n"
           "statistics), and the arenas of the executors (activations, their gradients, kernel state, workspace: one "
           "per chunk in flight); peak = their sum\n",
           batch, (batch + p->d.dp - 1) / p->d.dp, p->chunks, p->chunks == 1 ? "" : "s", sched,
           dl_optim_names[net->train.optim.kind], vectors, vectors == 1 ? "" : "s");
    printf("%-3s %-3s %-14s %-36s %5s %11s %11s %11s %11s %11s %11s\n", "t", "p", "ranks", "layers", "execs",
           "params", "gradients", "optimizer", "state", "arena", "peak");
    for (int i = 0; i < p->n; i++) {
        const struct dl_check_grid_row *r = &p->rows[i];
        char w[32], gr[32], o[32], st[32], a[32], pk[32];
        printf("%-3d %-3d %-14s %-36s %5d %11s %11s %11s %11s %11s %11s\n", r->t, r->p, r->ranks, r->layers, r->slots,
               dl_check_size(r->weights, c->bytes, w, sizeof w), dl_check_size(r->gradients, c->bytes, gr, sizeof gr),
               dl_check_size(r->optimizer, c->bytes, o, sizeof o),
               dl_check_size(r->state, c->bytes, st, sizeof st), dl_check_size(r->arena, c->bytes, a, sizeof a),
               dl_check_size(r->peak, c->bytes, pk, sizeof pk));
    }
}

void dl_check_grid_plan_free(struct dl_check_grid_plan *p)
{
    free(p->rows);
    p->rows = NULL;
}
