/* tuner.c: from measurements to a micro-batch plan.  A layer's units are its
 * directions (or one unit for all of them when its kernels keep state from
 * forward to backward, which must then see the same split).  Without a
 * total budget every unit gets the dynamic program's best split under the
 * per-layer limit, every layer the kernel group with the smallest sum, and
 * all share one workspace.  With --workspace-total the ILP picks one
 * desirable configuration per unit, and each unit gets its own slice. */
#include "tune/tune_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

/* A unit of layer L in kernel group grp: its directions and candidates. */
struct unit {
    int layer, group, coupled, dir; /* dir: the direction (coupled: all wanted) */
    int n;
    struct dl_tune_cand *c;
    int n_conf;
    struct dl_tune_config *conf;    /* desirable set (ILP) or [0] the DP's pick */
};

static int coupled(const struct dl_layer *l, const struct dl_tune_layer *L, int grp)
{
    for (int ki = 0; ki < L->n_k; ki++) {
        if (L->group[ki] != grp)
            continue;
        if (L->want[DL_DIR_BACKWARD_WEIGHTS] && dl_kernel_weights_in_data(L->k[ki]))
            return 1;
        for (int si = 0; si < L->n_sizes; si++)
            if (L->have[ki * L->n_sizes + si] && DL_TUNE_ROW(L, ki, si)[0].saved > 0)
                return 1;
    }
    return 0;
}

static int fill_cands(const struct dl_tune_layer *L, struct unit *u, int only_B, int B)
{
    u->n = 0;
    for (int ki = 0; ki < L->n_k; ki++) {
        if (L->group[ki] != u->group)
            continue;
        for (int si = 0; si < L->n_sizes; si++) {
            if (!L->have[ki * L->n_sizes + si] || (only_B && L->sizes[si] != B))
                continue;
            const struct dl_tune_row *r = DL_TUNE_ROW(L, ki, si);
            double t = 0;
            size_t ws = 0;
            for (int d = 0; d < DL_N_DIRS; d++) {
                if (!L->want[d] || (!u->coupled && d != u->dir))
                    continue;
                t += r[d].time_s < 0 || isnan(r[d].time_s) ? NAN : r[d].time_s;
                ws = r[d].ws > ws ? r[d].ws : ws;
            }
            if (!isnan(t))
                u->c[u->n++] = (struct dl_tune_cand){ki, L->sizes[si], t, ws};
        }
    }
    return u->n;
}

/* The units of every tunable layer and group. */
static int make_units(const struct dl_graph *g, const struct dl_tune_layer *L, struct unit **out, int *n_out,
                      struct dl_error *err)
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += L[i].tunable ? L[i].n_groups * DL_N_DIRS : 0;
    struct unit *u = dl_calloc((size_t)(n ? n : 1), sizeof *u, err);
    if (!u)
        return DL_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < g->n; i++)
        for (int grp = 0; L[i].tunable && grp < L[i].n_groups; grp++) {
            int cp = coupled(&g->layers[i], &L[i], grp);
            for (int d = 0; d < DL_N_DIRS; d++) {
                if (!L[i].want[d] || (cp && d != DL_DIR_FORWARD))
                    continue;
                u[k] = (struct unit){.layer = i, .group = grp, .coupled = cp, .dir = d};
                u[k].c = dl_calloc((size_t)(L[i].n_k * L[i].n_sizes) + 1, sizeof *u[k].c, err);
                if (!u[k++].c) {
                    *out = u, *n_out = k;
                    return DL_ERR_NOMEM;
                }
            }
        }
    *out = u;
    *n_out = k;
    return DL_OK;
}

static void free_units(struct unit *u, int n)
{
    for (int i = 0; u && i < n; i++) {
        free(u[i].c);
        free(u[i].conf);
    }
    free(u);
}

/* The least workspace of unit u's candidates, timed or not (a candidate
 * above the limit is recorded untimed, with its workspace); SIZE_MAX when
 * no kernel of its group can run it. */
static size_t unit_least_workspace(const struct dl_tune_layer *L, const struct unit *u)
{
    size_t least = SIZE_MAX;
    for (int ki = 0; ki < L->n_k; ki++)
        for (int si = 0; L->group[ki] == u->group && si < L->n_sizes; si++) {
            const struct dl_tune_row *r = DL_TUNE_ROW(L, ki, si);
            size_t ws = 0;
            int runs = L->have[ki * L->n_sizes + si];
            for (int d = 0; d < DL_N_DIRS; d++)
                if (L->want[d] && (u->coupled || d == u->dir)) {
                    runs &= !(r[d].time_s < 0);
                    ws = r[d].ws > ws ? r[d].ws : ws;
                }
            least = runs && ws < least ? ws : least;
        }
    return least;
}

/* The least workspace limit under which the layer of units [a, end) has a
 * plan: over its kernel groups, the largest of the units' least
 * workspaces; SIZE_MAX when nothing can run it. */
static size_t least_workspace(const struct dl_tune_layer *L, const struct unit *u, int a, int end)
{
    size_t least = SIZE_MAX;
    while (a < end) {
        size_t group_need = 0;
        int b = a;
        for (; b < end && u[b].group == u[a].group; b++) {
            size_t need = unit_least_workspace(L, &u[b]);
            group_need = need > group_need ? need : group_need;
        }
        least = group_need < least ? group_need : least;
        a = b;
    }
    return least;
}

/* The DP's pick for every unit under limit (only_B: undivided only); for
 * each layer the group with the smallest total; chosen[u] = 1 for the units
 * of that group.  Layers where nothing fits get no chosen unit. */
static void dp_plan(const struct dl_graph *g, const struct dl_tune_layer *L, struct unit *u, int n, int B,
                    size_t limit, int only_B, int *chosen, double *layer_time)
{
    for (int i = 0; i < n; i++) {
        chosen[i] = 0;
        fill_cands(&L[u[i].layer], &u[i], only_B, B);
        u[i].n_conf = dl_tune_dp(u[i].c, u[i].n, B, limit, &u[i].conf[0]) == 0;
    }
    for (int i = 0; i < n;) { /* units of one layer are consecutive, grouped by group */
        int layer = u[i].layer, best_first = -1, end = i;
        double best = INFINITY;
        while (end < n && u[end].layer == layer)
            end++;
        for (int a = i; a < end;) {
            int b = a;
            double t = 0;
            while (b < end && u[b].group == u[a].group) {
                t += u[b].n_conf ? u[b].conf[0].time_s : INFINITY;
                b++;
            }
            if (t < best) {
                best = t;
                best_first = a;
            }
            a = b;
        }
        for (int a = best_first; a >= 0 && a < end && u[a].group == u[best_first].group; a++)
            chosen[a] = 1;
        layer_time[layer] = best;
        i = end;
    }
}

static int fill_dir(struct dl_mbplan_dir *d, const struct dl_tune_layer *L, const struct dl_tune_config *c,
                    size_t offset, struct dl_error *err)
{
    memset(d, 0, sizeof *d);
    for (int p = 0; p < c->n; p++) {
        int rc = dl_mbplan_dir_add(d, L->k[c->part[p].kernel], c->part[p].mb, c->part[p].count, err);
        if (rc)
            return rc;
    }
    d->ws_offset = offset;
    d->ws_bytes = c->ws;
    d->time_s = c->time_s;
    return DL_OK;
}

/* Writes the chosen configuration of every chosen unit into the plan. */
static int to_plan(const struct dl_tune_layer *L, const struct unit *u, int n, const int *pick, int divided,
                   struct dl_mbplan *plan, struct dl_error *err)
{
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (pick[i] < 0)
            continue;
        const struct dl_tune_config *c = &u[i].conf[pick[i]];
        struct dl_mbplan_layer *pl = &plan->layer[u[i].layer];
        pl->tuned = 1;
        for (int d = 0; d < DL_N_DIRS; d++) {
            if (d != u[i].dir && !(u[i].coupled && L[u[i].layer].want[d]))
                continue;
            int rc = fill_dir(&pl->dir[d], &L[u[i].layer], c, divided ? offset : 0, err);
            if (rc)
                return rc;
            if (u[i].coupled && d != u[i].dir)
                pl->dir[d].time_s = 0; /* the unit's time is counted once, on its first direction */
        }
        offset += divided ? (c->ws + 63) / 64 * 64 : 0;
    }
    dl_mbplan_finish(plan);
    return DL_OK;
}

static void report_layers(const struct unit *u, int n, const int *pick, const int *undiv,
                          struct dl_tune_report *rep)
{
    for (int i = 0; i < n; i++) {
        struct dl_tune_layer_report *r = &rep->layer[u[i].layer];
        r->tuned = 1;
        if (pick[i] >= 0) {
            const struct dl_tune_config *c = &u[i].conf[pick[i]];
            r->time_s += c->time_s;
            r->dir_time[u[i].dir] = c->time_s;
            r->ws = c->ws > r->ws ? c->ws : r->ws;
        }
        if (undiv[i]) {
            r->undivided_s += u[i].conf[1].time_s;
            r->dir_undivided[u[i].dir] = u[i].conf[1].time_s;
            r->undivided_ws = u[i].conf[1].ws > r->undivided_ws ? u[i].conf[1].ws : r->undivided_ws;
        }
    }
}

/* Measured defaults: a layer the database holds only in part is left to
 * the built-in table (it is not tuned). */
static void drop_partly_measured(const struct dl_graph *g, struct dl_tune_layer *L)
{
    for (int i = 0; i < g->n; i++)
        for (int c = 0; L[i].tunable && c < L[i].n_k * L[i].n_sizes; c++)
            if (!L[i].have[c])
                L[i].tunable = 0;
}

/* Measured defaults: the time the database holds for layer L's built-in
 * kernel at the whole batch (its wanted directions), or NAN. */
static double builtin_time(const struct dl_tune_layer *L, const struct dl_kernel *builtin)
{
    double t = NAN;
    for (int ki = 0; ki < L->n_k; ki++)
        if (L->k[ki] == builtin && L->have[ki * L->n_sizes + L->n_sizes - 1]) {
            const struct dl_tune_row *r = DL_TUNE_ROW(L, ki, L->n_sizes - 1);
            t = 0;
            for (int d = 0; d < DL_N_DIRS; d++)
                t += L->want[d] ? (r[d].time_s < 0 ? NAN : r[d].time_s) : 0;
        }
    return t;
}

/* Measured defaults: a layer keeps the built-in table's kernel (its units
 * unpicked, so it stays unplanned and keeps its fused ReLU) unless the
 * database's pick beats it by more than DEFAULTS_MARGIN and by more than
 * DEFAULTS_FLOOR_S a step: timings differ by a few percent from run to
 * run, and a gain of microseconds does not pay for a ReLU pass no longer
 * fused or a layout reorder. */
#define DEFAULTS_MARGIN 1.05
#define DEFAULTS_FLOOR_S 10e-6
static void keep_builtin_choices(const struct dl_graph *g, const struct dl_tune_layer *L, const struct unit *u, int n,
                                 const struct dl_kernel_choices *ch, int *pick)
{
    for (int i = 0, end; i < n; i = end) {
        const struct dl_tune_layer *Li = &L[u[i].layer];
        double picked = 0;
        for (end = i; end < n && u[end].layer == u[i].layer; end++)
            picked += pick[end] >= 0 ? u[end].conf[pick[end]].time_s : 0;
        double builtin = builtin_time(Li, dl_kernel_select(&g->layers[u[i].layer], ch));
        int keep = !isnan(builtin) && /* the built-in kernel unmeasured (or failing): the pick stands */
                   !(builtin > picked * DEFAULTS_MARGIN && builtin > picked + DEFAULTS_FLOOR_S);
        for (int j = i; keep && j < end; j++)
            pick[j] = -1;
    }
}

/* The desirable set of every unit, then the ILP over all of them. */
static int ilp_plan(const struct dl_tune_layer *L, struct unit *u, int n, int B, size_t total, int *pick,
                    struct dl_error *err)
{
    struct dl_tune_unit *iu = dl_calloc((size_t)(n ? n : 1), sizeof *iu, err);
    if (!iu)
        return DL_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        fill_cands(&L[u[i].layer], &u[i], 0, B);
        free(u[i].conf);
        u[i].conf = dl_calloc((size_t)u[i].n + 2, sizeof *u[i].conf, err);
        if (!u[i].conf) {
            free(iu);
            return DL_ERR_NOMEM;
        }
        u[i].n_conf = dl_tune_desirable(u[i].c, u[i].n, B, u[i].conf);
        iu[i] = (struct dl_tune_unit){u[i].layer, u[i].group, u[i].n_conf, u[i].conf};
    }
    /* a (layer, group) with a unit that has no configuration cannot be picked: drop the group */
    int m = 0;
    int *map = dl_calloc((size_t)(n ? n : 1), sizeof *map, err);
    if (!map) {
        free(iu);
        return DL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        int ok = 1;
        for (int j = 0; j < n; j++)
            ok &= !(u[j].layer == u[i].layer && u[j].group == u[i].group && u[j].n_conf == 0);
        if (ok)
            iu[m] = iu[i], map[m++] = i;
    }
    int *ch = dl_calloc((size_t)(m ? m : 1), sizeof *ch, err);
    double t;
    int rc = ch ? dl_tune_ilp(iu, m, total, ch, &t, err) : DL_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        pick[i] = -1;
    for (int k = 0; !rc && k < m; k++)
        pick[map[k]] = ch[k];
    free(ch), free(map), free(iu);
    return rc;
}

int dl_tune_net(const struct dl_graph *g, int batch, const struct dl_tune_options *o, struct dl_mbplan *plan,
                struct dl_tune_report *rep, struct dl_error *err)
{
    struct dl_tune_report own = {0};
    if (!rep)
        rep = &own;
    memset(rep, 0, sizeof *rep);
    double t0 = dl_clock_now();
    memset(plan, 0, sizeof *plan);
    size_t limit = o->workspace_limit ? o->workspace_limit : SIZE_MAX;
    int *sizes = dl_calloc((size_t)batch + 1, sizeof *sizes, err);
    struct dl_tune_layer *L = dl_calloc((size_t)g->n, sizeof *L, err);
    rep->layer = dl_calloc((size_t)g->n, sizeof *rep->layer, err);
    rep->n_layers = g->n;
    struct unit *u = NULL;
    int n = 0, *pick = NULL, *undiv = NULL;
    double *layer_time = NULL;
    int rc = !sizes || !L || !rep->layer ? DL_ERR_NOMEM : DL_OK;
    int n_sizes = rc ? 0 : dl_tune_policy_sizes(o->from_database ? DL_TUNE_UNDIVIDED : o->policy, batch, sizes);
    if (!rc)
        rc = dl_tune_gather(g, batch, o, sizes, n_sizes, L, rep, err);
    if (!rc && o->from_database)
        drop_partly_measured(g, L);
    if (!rc)
        rc = make_units(g, L, &u, &n, err);
    if (!rc) {
        pick = dl_calloc((size_t)n + 1, sizeof *pick, err);
        undiv = dl_calloc((size_t)n + 1, sizeof *undiv, err);
        layer_time = dl_calloc((size_t)g->n, sizeof *layer_time, err);
        rc = !pick || !undiv || !layer_time ? DL_ERR_NOMEM : DL_OK;
    }
    for (int i = 0; !rc && i < n; i++)
        rc = (u[i].conf = dl_calloc(2, sizeof *u[i].conf, err)) ? DL_OK : DL_ERR_NOMEM;
    if (!rc) { /* the best undivided plan within the limit, for the report: conf[1] */
        dp_plan(g, L, u, n, batch, limit, 1, undiv, layer_time);
        for (int i = 0; i < n; i++) {
            u[i].conf[1] = u[i].conf[0];
            undiv[i] = undiv[i] && u[i].n_conf;
        }
        dp_plan(g, L, u, n, batch, limit, 0, pick, layer_time);
        for (int i = 0; i < n; i++)
            pick[i] = pick[i] && u[i].n_conf ? 0 : -1;
        for (int i = 0, end; i < n; i = end) { /* units of one layer are consecutive */
            for (end = i; end < n && u[end].layer == u[i].layer;)
                end++;
            struct dl_tune_layer_report *r = &rep->layer[u[i].layer];
            r->least_ws = least_workspace(&L[u[i].layer], u, i, end);
            if (!rc && !isfinite(layer_time[u[i].layer]) && !o->from_database)
                rc = r->least_ws == SIZE_MAX
                         ? dl_errorf(err, DL_ERR_SPEC, "layer '%s': no kernel could run it%s",
                                     g->layers[u[i].layer].name,
                                     o->no_measure ? " (--no-measure: the tuning database holds no measurement of "
                                                     "its kernels at this batch; dltrain tune measures them)"
                                                   : "")
                         : dl_errorf(err, DL_ERR_SPEC, "layer '%s': no kernel runs it within %zu bytes of "
                                     "workspace; the least it needs is %zu (raise --workspace-limit)",
                                     g->layers[u[i].layer].name, limit, r->least_ws);
        }
    }
    if (!rc && o->from_database)
        keep_builtin_choices(g, L, u, n, o->kernels, pick);
    if (!rc) {
        report_layers(u, n, pick, undiv, rep);
        if (o->workspace_total) { /* the ILP replaces the per-layer picks */
            rc = ilp_plan(L, u, n, batch, o->workspace_total, pick, err);
            for (int i = 0; !rc && i < g->n; i++)
                rep->layer[i].time_s = 0, rep->layer[i].ws = 0;
            for (int i = 0; !rc && i < n; i++) /* report against the undivided plan found above */
                if (pick[i] >= 0) {
                    struct dl_tune_layer_report *r = &rep->layer[u[i].layer];
                    r->time_s += u[i].conf[pick[i]].time_s;
                    r->dir_time[u[i].dir] = u[i].conf[pick[i]].time_s;
                    r->ws += u[i].conf[pick[i]].ws;
                }
        }
    }
    if (!rc)
        rc = dl_mbplan_alloc(plan, g->n, batch, err);
    if (!rc)
        rc = to_plan(L, u, n, pick, o->workspace_total > 0, plan, err);
    if (rc)
        dl_mbplan_free(plan);
    free_units(u, n);
    free(pick), free(undiv), free(layer_time), free(sizes);
    dl_tune_layers_free(L, g->n);
    free(L);
    rep->total_seconds = dl_clock_now() - t0;
    if (rc || rep == &own)
        dl_tune_report_free(rep);
    return rc;
}

void dl_tune_report_free(struct dl_tune_report *r)
{
    free(r->layer);
    memset(r, 0, sizeof *r);
}

int dl_tune_exec_defaults(void *ctx, const struct dl_graph *g, int batch, const struct dl_kernel_choices *kernels,
                          struct dl_mbplan *out, struct dl_error *err)
{
    struct dl_tune_defaults *d = ctx;
    struct dl_tune_options o = *d->options;
    char path[1024];
    memset(out, 0, sizeof *out);
    if (o.db_path && strcmp(o.db_path, "none") == 0)
        return DL_OK;
    struct dl_error quiet = {0};
    if (!o.db_path && dl_tune_db_default_path(path, sizeof path, &quiet) == DL_OK)
        o.db_path = path;
    if (!o.db_path || access(o.db_path, R_OK | W_OK) != 0) /* no database yet: nothing measured here */
        return DL_OK;
    o.kernels = kernels;
    o.no_measure = 1;
    o.from_database = 1;
    o.workspace_total = 0;
    if (dl_tune_net(g, batch, &o, out, NULL, &quiet) != DL_OK) { /* an unreadable cache: the built-in table */
        dl_mbplan_free(out);
        return DL_OK;
    }
    int moved = 0;
    for (int i = 0; i < out->n_layers; i++)
        moved += out->layer[i].tuned;
    if (!moved) /* the built-in table throughout: no plan at all */
        dl_mbplan_free(out);
    d->layers = moved > d->layers ? moved : d->layers; /* a run's executors of one graph move the same layers */
    (void)err; /* nothing here fails a run */
    return DL_OK;
}

int dl_tune_exec_plan(void *ctx, const struct dl_graph *g, int batch, const struct dl_kernel_choices *kernels,
                      struct dl_mbplan *out, struct dl_error *err)
{
    struct dl_tune_options o = *(const struct dl_tune_options *)ctx;
    o.kernels = kernels;
    return dl_tune_net(g, batch, &o, out, NULL, err);
}
