/* checkpoint_grid.c: checkpoints of a sharded run (see checkpoint_grid.h).
 * A "whole view" is a run view whose executor and optimizer hold the whole
 * network's flat vectors in one process's order (exec.h: graph order,
 * PyTorch layouts), with per-parameter pointers into them; checkpoint.c
 * saves and loads it as it does one process's run.  Between the whole view
 * and the rank's shard, exec/gather.c moves every flat per-parameter
 * vector: the weights and each optimizer slot (the trainable set) and the
 * non-trainable state. */
#include "train/checkpoint_grid.h"

#include <stdlib.h>
#include <string.h>

/* The whole network's vectors, owned; view points into them. */
struct whole {
    struct dl_exec exec;
    struct dl_optim optim;
    struct dl_run_view view;
};

static void whole_free(struct whole *w)
{
    free(w->exec.param);
    free(w->exec.weights);
    free(w->exec.state);
    free(w->exec.counters);
    free(w->exec.rng);
    free(w->optim.state);
}

/* Buffers for the whole network of v->g, with v's optimizer algorithm, spec
 * and step count (the slots zero), and v's RNG states copied. */
static int whole_init(struct whole *w, const struct dl_run_view *v, struct dl_error *err)
{
    const struct dl_graph *g = v->g;
    memset(w, 0, sizeof *w);
    long nw = dl_exec_param_count(g, DL_PARAMS_TRAINABLE), ns = dl_exec_param_count(g, DL_PARAMS_STATE),
         nc = dl_exec_param_count(g, DL_PARAMS_COUNTERS);
    int slots = v->optim ? v->optim->algo->state_vectors : 0;
    struct dl_exec *e = &w->exec;
    e->g = g;
    e->n_weights = nw;
    e->n_state = ns;
    e->param = dl_exec_param_table(g, err);
    e->weights = dl_calloc((size_t)(nw ? nw : 1), sizeof *e->weights, err);
    e->state = dl_calloc((size_t)(ns ? ns : 1), sizeof *e->state, err);
    e->counters = dl_calloc((size_t)(nc ? nc : 1), sizeof *e->counters, err);
    e->n_counters = nc;
    e->rng = dl_calloc((size_t)g->n, sizeof *e->rng, err);
    if (v->optim) {
        w->optim = *v->optim;
        w->optim.n = nw;
        w->optim.state = dl_calloc((size_t)(nw ? nw : 1) * (size_t)(slots ? slots : 1), sizeof(dl_real), err);
    }
    if (!e->param || !e->weights || !e->state || !e->counters || !e->rng || (v->optim && !w->optim.state)) {
        whole_free(w);
        return DL_ERR_NOMEM;
    }
    memcpy(e->rng, v->exec->rng, sizeof *e->rng * (size_t)g->n);
    long wo = 0, so = 0, co = 0;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (p->shares) { /* tied: the earlier layer's */
                e->param[i][j] = e->param[p->share_layer][p->share_param];
                continue;
            }
            if (p->dtype == DL_I64) {
                e->param[i][j] = (dl_real *)(void *)(e->counters + co);
                co += p->count;
                continue;
            }
            e->param[i][j] = p->trainable ? e->weights + wo : e->state + so;
            *(p->trainable ? &wo : &so) += p->count;
        }
    w->view = (struct dl_run_view){g, e, v->optim ? &w->optim : NULL, v->limits};
    return DL_OK;
}

struct dl_checkpoint_snapshot {
    struct whole w;
};

int dl_checkpoint_snapshot_take(struct dl_comm *world, const struct dl_run_view *v,
                                struct dl_checkpoint_snapshot **out, struct dl_error *err)
{
    *out = NULL;
    int writer = world->rank == 0;
    /* rank 0 alone holds the whole vectors */
    struct dl_checkpoint_snapshot *s = writer ? dl_calloc(1, sizeof *s, err) : NULL;
    int rc = writer && !s ? DL_ERR_NOMEM : writer ? whole_init(&s->w, v, err) : DL_OK;
    if (rc) {
        free(s);
        return rc;
    }
    struct whole *w = writer ? &s->w : NULL;
    const struct dl_exec *e = v->exec;
    rc = dl_exec_gather(e, world, DL_PARAMS_TRAINABLE, e->weights, w ? w->exec.weights : NULL, err);
    if (!rc)
        rc = dl_exec_gather(e, world, DL_PARAMS_STATE, e->state, w ? w->exec.state : NULL, err);
    if (!rc)
        rc = dl_exec_gather(e, world, DL_PARAMS_COUNTERS, e->counters, w ? w->exec.counters : NULL, err);
    int slots = v->optim ? v->optim->algo->state_vectors : 0;
    for (int k = 0; k < slots && !rc; k++)
        rc = dl_exec_gather(e, world, DL_PARAMS_TRAINABLE, v->optim->state + (long)k * v->optim->n,
                            w ? w->optim.state + (long)k * w->optim.n : NULL, err);
    if (rc || !writer) {
        dl_checkpoint_snapshot_free(s);
        return rc;
    }
    *out = s;
    return DL_OK;
}

int dl_checkpoint_snapshot_save(const struct dl_checkpoint_snapshot *s, const char *path,
                                const struct dl_checkpoint_meta *meta, struct dl_error *err)
{
    return dl_checkpoint_save(path, &s->w.view, meta, err);
}

void dl_checkpoint_snapshot_free(struct dl_checkpoint_snapshot *s)
{
    if (!s)
        return;
    whole_free(&s->w);
    free(s);
}

int dl_checkpoint_save_gathered(const char *path, struct dl_comm *world, const struct dl_run_view *v,
                                const struct dl_checkpoint_meta *meta, struct dl_error *err)
{
    struct dl_checkpoint_snapshot *s;
    int rc = dl_checkpoint_snapshot_take(world, v, &s, err);
    if (!rc && s)
        rc = dl_checkpoint_snapshot_save(s, path, meta, err);
    dl_checkpoint_snapshot_free(s);
    return rc;
}

int dl_checkpoint_load_sliced(const char *path, const struct dl_run_view *v, struct dl_checkpoint_meta *meta,
                              struct dl_error *err)
{
    struct whole w;
    int rc = whole_init(&w, v, err);
    if (rc)
        return rc;
    rc = dl_checkpoint_load(path, &w.view, meta, err);
    if (!rc) {
        struct dl_exec *e = v->exec;
        rc = dl_exec_take(e, DL_PARAMS_TRAINABLE, w.exec.weights, e->weights, err);
        if (!rc)
            rc = dl_exec_take(e, DL_PARAMS_STATE, w.exec.state, e->state, err);
        if (!rc)
            rc = dl_exec_take(e, DL_PARAMS_COUNTERS, w.exec.counters, e->counters, err);
        int slots = v->optim ? v->optim->algo->state_vectors : 0;
        for (int k = 0; k < slots && !rc; k++)
            rc = dl_exec_take(e, DL_PARAMS_TRAINABLE, w.optim.state + (long)k * w.optim.n,
                              v->optim->state + (long)k * v->optim->n, err);
        memcpy(e->rng, w.exec.rng, sizeof *e->rng * (size_t)v->g->n);
        if (v->optim)
            v->optim->t = w.optim.t;
    }
    whole_free(&w);
    return rc;
}
