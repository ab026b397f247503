/* layout_memory.c: a layout's memory per rank from the executor's memory
 * planner (see layout_memory.h). */
#include "planner/layout_memory.h"

#include "optim/optim.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "exec/exec.h"
#include "parallel/zero_grads.h"
#include "parallel/zero_weights.h"

int dl_layout_staged_graph(const struct dl_graph *g, const struct dl_plan_layout *l, struct dl_graph *staged,
                           struct dl_error *err)
{
    *staged = *g;
    staged->layers = dl_calloc((size_t)g->n, sizeof *staged->layers, err);
    if (!staged->layers) {
        staged->layers = g->layers;
        return DL_ERR_NOMEM;
    }
    memcpy(staged->layers, g->layers, sizeof *g->layers * (size_t)g->n);
    for (int s = 0; s < dl_layout_stages(l); s++)
        for (int i = l->first[s]; i < l->first[s + 1]; i++)
            staged->layers[i].stage = l->dims.pp > 1 ? s : -1;
    for (int k = 0; k < l->n_whole; k++)
        staged->layers[l->whole[k]].split = DL_SPLIT_NONE;
    if (l->by_samples)
        dl_split_by_samples(staged);
    return DL_OK;
}

/* Pipeline rank p's arenas for one chunk, arena[V] (one per stage), and
 * its parameters' bytes. */
static int rank_usage(const struct dl_graph *staged, const struct dl_plan_layout *l, int p, int per_chunk,
                      const struct dl_exec_options *eo, const struct dl_optim_spec *optim, size_t *arena,
                      size_t *param_bytes, struct dl_error *err)
{
    struct dl_shard s;
    int rank = dl_grid_rank(&l->dims, (struct dl_grid_pos){0, 0, p});
    const int V = dl_layout_V(l);
    int rc = dl_shard_make(staged, &l->dims, V, rank, NULL, &s, err);
    if (rc)
        return rc;
    struct dl_exec_options o = eo ? *eo : (struct dl_exec_options){0};
    o.plan = NULL;
    o.tuner = (struct dl_exec_tuner){0};
    o.shard = &s;
    o.split_backward = l->schedule == DL_SCHED_ZB_H1; /* as dl_pipeline_init plans it */
    /* Planning sends nothing; the executor only checks the groups' sizes
     * (their position: the shard's), so stand-ins without operations do. */
    struct dl_comm tensor = {.size = l->dims.tp, .rank = 0}, pipeline = {.size = l->dims.pp, .rank = p};
    o.tensor_comm = l->dims.tp > 1 ? &tensor : NULL;
    o.pipeline_comm = l->dims.pp > 1 ? &pipeline : NULL;
    long buckets = 0, gathered = 0; /* ZeRO-2 and 3 (no pipeline): the buckets' arena; 3: the layers gathered */
    for (int v = 0; !rc && v < V; v++) {
        struct dl_exec e;
        o.stage = v;
        rc = dl_exec_plan(&e, staged, per_chunk, &o, err);
        if (!rc) {
            arena[v] = e.stats.arena_bytes;
            if (l->zero >= 2 && l->dims.dp > 1 && V == 1 && l->dims.pp == 1)
                rc = dl_zero_grads_plan_arena(&e, l->bucket_bytes, &buckets, err);
            if (l->zero == 3)
                gathered = dl_zero_weights_gathered_of(&e);
            dl_exec_free(&e);
        }
    }
    if (!rc) {
        double trainable = 0, state = 0;
        for (int i = 0; i < staged->n; i++) {
            if (!dl_shard_runs(&s, i))
                continue;
            dl_layer_param_tally(&s.local.layers[i], &trainable, &state);
        }
        double grads = trainable; /* ZeRO: with its block's sums and staging (zero.h) */
        struct dl_zero_shard zs;
        dl_zero_shard_of((long)trainable, l->dims.dp, 0, &zs);
        if (l->zero && l->dims.dp > 1)
            grads = (double)dl_zero_grad_values(&zs, (long)trainable, l->zero, buckets, l->bucket_bytes,
                                                l->grad_dtype);
        double held = (double)dl_zero_held_weights(&zs, (long)trainable, l->dims.dp > 1 ? l->zero : 0, gathered);
        *param_bytes = (size_t)dl_optim_param_bytes(optim, trainable, held, grads, state, l->zero ? l->dims.dp : 1);
    }
    dl_shard_free(&s);
    return rc;
}

int dl_layout_arenas(const struct dl_graph *g, const struct dl_plan_layout *l, int batch,
                     const struct dl_exec_options *eo, const struct dl_optim_spec *optim, size_t *arena,
                     size_t *params, struct dl_error *err)
{
    struct dl_graph staged;
    int rc = dl_layout_staged_graph(g, l, &staged, err);
    int per_chunk = dl_layout_chunk_batch(batch, l->dims.dp, l->chunks);
    for (int p = 0; !rc && p < l->dims.pp; p++)
        rc = rank_usage(&staged, l, p, per_chunk, eo, optim, &arena[(size_t)p * dl_layout_V(l)], &params[p], err);
    if (staged.layers != g->layers)
        free(staged.layers);
    return rc;
}

int dl_layout_slots(const struct dl_plan_layout *l, int *slots, struct dl_error *err)
{
    struct dl_schedule sched = {0};
    int rc = dl_schedule_make(l->schedule, l->dims.pp, l->chunks, dl_layout_V(l), &sched, err);
    for (int p = 0; !rc && p < l->dims.pp; p++)
        dl_schedule_stage_slots(&sched, p, &slots[(size_t)p * dl_layout_V(l)]);
    dl_schedule_free(&sched);
    return rc;
}

size_t dl_layout_memory_of(int P, int V, const size_t *arena, const size_t *params, const int *slots,
                           size_t *per_rank)
{
    size_t most = 0;
    for (int p = 0; p < P; p++) {
        size_t b = params[p];
        for (int v = 0; v < V; v++)
            b += (size_t)slots[p * V + v] * arena[p * V + v];
        if (per_rank)
            per_rank[p] = b;
        most = b > most ? b : most;
    }
    return most;
}

int dl_layout_memory(const struct dl_graph *g, const struct dl_plan_layout *l, int batch,
                     const struct dl_exec_options *eo, const struct dl_optim_spec *optim, size_t *bytes,
                     size_t *per_rank, struct dl_error *err)
{
    const size_t P = (size_t)l->dims.pp, S = (size_t)dl_layout_stages(l);
    size_t *arena = dl_calloc(S, sizeof *arena, err), *params = dl_calloc(P, sizeof *params, err);
    int *slots = dl_calloc(S, sizeof *slots, err);
    int rc = arena && params && slots ? DL_OK : DL_ERR_NOMEM;
    if (!rc)
        rc = dl_layout_arenas(g, l, batch, eo, optim, arena, params, err);
    if (!rc)
        rc = dl_layout_slots(l, slots, err);
    if (!rc)
        *bytes = dl_layout_memory_of(l->dims.pp, dl_layout_V(l), arena, params, slots, per_rank);
    free(arena), free(params), free(slots);
    return rc;
}
