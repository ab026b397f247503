/* tied.c: the copies of tied parameters across pipeline stages (see
 * tied.h).  For each owner parameter whose layers run on several pipeline
 * ranks, the holders are those ranks in pipeline order; each sends its
 * gradient to the others and adds theirs up in that order, so all get the
 * same sum. */
#include "train/tied.h"

#include <stdlib.h>
#include <string.h>

#include "comm/tags.h"
#include "plan/shard.h"

struct tied_param {
    dl_real *grad;           /* this rank's gradient of it (the owner's, or its copy's) */
    long n;
    int *holders;            /* world ranks, in pipeline order */
    int n_holders, me;       /* me: this rank's index among them */
};

struct dl_tied {
    struct dl_comm *world;
    const struct dl_device *dev;
    struct tied_param *p;
    int n;
    dl_real *work;           /* the holders' gradients side by side, and their sum */
    long work_n;
};

/* The pipeline rank that runs layer i. */
static int runner(const struct dl_shard *sh, int i)
{
    return dl_stages_rank(&sh->stages, sh->layer[i].stage);
}

/* Adds owner (o, jo)'s holders to t when this rank is one and there are
 * two or more. */
static int add_owner(struct dl_tied *t, const struct dl_exec *e, int o, int jo, struct dl_error *err)
{
    const struct dl_shard *sh = e->shard;
    const struct dl_graph *g = sh->g;
    int P = sh->dims.pp, mine = -1, users_here = 0;
    int *on = dl_calloc((size_t)P, sizeof *on, err);
    if (!on)
        return DL_ERR_NOMEM;
    on[runner(sh, o)] = 1;
    for (int i = o + 1; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (!p->shares || p->share_layer != o || p->share_param != jo)
                continue;
            on[runner(sh, i)] = 1;
            if (dl_shard_runs(sh, i) && !dl_shard_runs(sh, o)) {
                if (users_here++) {
                    free(on);
                    return dl_errorf(err, DL_ERR_SPEC, "layers '%s' and '%s' share layer '%s''s %s (share:) on a "
                                     "pipeline rank that does not run '%s'; one such layer a rank is supported (move "
                                     "the stage cuts)", g->layers[mine].name, g->layers[i].name, g->layers[o].name,
                                     g->layers[o].param[jo].name, g->layers[o].name);
                }
                mine = i;
            }
        }
    /* n: this tensor rank's slice of it */
    struct tied_param tp = {.n = sh->local.layers[o].param[jo].count, .me = -1, .holders = on};
    for (int p = 0; p < P; p++) /* in place: holder k's pipeline rank is at least k */
        if (on[p]) {
            struct dl_grid_pos at = sh->pos;
            at.p = p;
            if (p == sh->pos.p)
                tp.me = tp.n_holders;
            tp.holders[tp.n_holders++] = dl_grid_rank(&sh->dims, at);
        }
    if (tp.n_holders < 2 || tp.me < 0) {
        free(on);
        return DL_OK;
    }
    if (dl_shard_runs(sh, o)) {
        tp.grad = e->dparam[o][jo];
    } else {
        int ju = 0;
        while (g->layers[mine].param[ju].share_layer != o || g->layers[mine].param[ju].share_param != jo ||
               !g->layers[mine].param[ju].shares)
            ju++;
        tp.grad = e->dparam[mine][ju];
    }
    struct tied_param *grown = realloc(t->p, sizeof *grown * (size_t)(t->n + 1));
    if (!grown) {
        free(on);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    }
    t->p = grown;
    t->p[t->n++] = tp;
    long need = tp.n * (tp.n_holders + 1);
    t->work_n = need > t->work_n ? need : t->work_n;
    return DL_OK;
}

int dl_tied_create(const struct dl_exec *e, struct dl_comm *world, struct dl_tied **out, struct dl_error *err)
{
    *out = NULL;
    const struct dl_shard *sh = e->shard;
    if (!sh || sh->dims.pp < 2)
        return DL_OK;
    struct dl_tied *t = dl_calloc(1, sizeof *t, err);
    if (!t)
        return DL_ERR_NOMEM;
    t->world = world;
    t->dev = dl_exec_device(e);
    const struct dl_graph *g = sh->g;
    int rc = DL_OK;
    for (int o = 0; o < g->n && !rc; o++)
        for (int jo = 0; jo < g->layers[o].n_params && !rc; jo++) {
            int used = 0;
            for (int i = o + 1; i < g->n && !used; i++)
                for (int j = 0; j < g->layers[i].n_params; j++)
                    used |= g->layers[i].param[j].shares && g->layers[i].param[j].share_layer == o &&
                            g->layers[i].param[j].share_param == jo;
            if (used)
                rc = add_owner(t, e, o, jo, err);
        }
    if (!rc && t->n && !(t->work = dl_calloc((size_t)t->work_n, sizeof *t->work, err)))
        rc = DL_ERR_NOMEM;
    if (rc || !t->n) {
        dl_tied_free(t);
        return rc;
    }
    *out = t;
    return DL_OK;
}

/* Copies n values between the executor's memory and the host's. */
static int move(const struct dl_tied *t, dl_real *dst, const dl_real *src, long n, enum dl_copy_dir kind,
                struct dl_error *err)
{
    if (t->dev->host_memory) {
        memcpy(dst, src, sizeof *dst * (size_t)n);
        return DL_OK;
    }
    return t->dev->copy(dst, src, sizeof *dst * (size_t)n, kind, err);
}

static int sum_one(struct dl_tied *t, const struct tied_param *tp, struct dl_error *err)
{
    long n = tp->n;
    dl_real *at = t->work, *sum = t->work + n * tp->n_holders; /* holder h's gradient at at + h n */
    struct dl_comm *w = t->world;
    struct dl_comm_req req[2 * tp->n_holders];
    int reqs = 0, rc = move(t, at + n * tp->me, tp->grad, n, DL_COPY_TO_HOST, err);
    for (int h = 0; h < tp->n_holders && !rc; h++) {
        if (h == tp->me)
            continue;
        rc = w->ops->irecv(w, at + n * h, sizeof *at * (size_t)n, tp->holders[h], DL_TAG_TIED, &req[reqs], err);
        reqs += !rc;
        if (!rc)
            rc = w->ops->isend(w, at + n * tp->me, sizeof *at * (size_t)n, tp->holders[h], DL_TAG_TIED, &req[reqs],
                               err);
        reqs += !rc;
    }
    for (int r = 0; r < reqs; r++) {
        int wrc = w->ops->wait(w, &req[r], err);
        rc = rc ? rc : wrc;
    }
    if (rc)
        return rc;
    for (long k = 0; k < n; k++) { /* in pipeline order on every holder: the same bits */
        dl_real s = at[k];
        for (int h = 1; h < tp->n_holders; h++)
            s += at[n * h + k];
        sum[k] = s;
    }
    return move(t, tp->grad, sum, n, DL_COPY_TO_DEVICE, err);
}

int dl_tied_sum(struct dl_tied *t, struct dl_error *err)
{
    int rc = DL_OK;
    for (int i = 0; t && i < t->n && !rc; i++)
        rc = sum_one(t, &t->p[i], err);
    return rc;
}

long dl_tied_values(const struct dl_tied *t)
{
    long n = 0;
    for (int i = 0; t && i < t->n; i++)
        n += t->p[i].n * (t->p[i].n_holders - 1);
    return n;
}

void dl_tied_free(struct dl_tied *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        free(t->p[i].holders);
    free(t->p);
    free(t->work);
    free(t);
}
