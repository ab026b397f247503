/* layer_times.c: the planner's per-layer times from FLOPs, from a
 * measurement of the whole network, or from the tuning database (see
 * layer_times.h). */
#include "cli/layer_times.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "comm/comm.h"
#include "core/clock.h"
#include "exec/exec.h"
#include "graph/random_batch.h"
#include "optim/optim.h"
#include "plan/stages.h"
#include "tune/tune.h"
#include "tune/tune_impl.h"

void dl_layer_times_flops(const struct dl_graph *g, double rate, struct dl_layer_times *t)
{
    for (int i = 0; i < g->n; i++) {
        double c = dl_stages_layer_cost(&g->layers[i]) / rate;
        t->fwd[i] = c / 3;
        t->bwd[i] = c - c / 3;
        t->wgt[i] = dl_layer_param_count(&g->layers[i]) > 0 ? t->bwd[i] / 2 : 0;
        t->source[i] = DL_TIME_FLOPS;
    }
}

/* Each layer's median forward, backward (weights' included) and weight
 * gradients' seconds over `steps` steps of `batch` samples (after one
 * untimed) into fwd[i], bwd[i], wgt[i]; work: 3 * n * steps values. */
static int median_times(struct dl_exec *e, const void *x, const int *y, int batch, int steps, double *work,
                        double *fwd, double *bwd, double *wgt, struct dl_error *err)
{
    const int n = e->g->n;
    double *f = work, *b = work + (size_t)n * steps, *w = work + 2 * (size_t)n * steps;
    int rc = DL_OK;
    for (int s = 0; !rc && s <= steps; s++) {
        rc = dl_exec_timing_enable(e, err); /* zeroes the times: each step on its own */
        dl_exec_zero_grad(e);
        dl_exec_forward(e, x, y, batch, 1);
        dl_exec_backward(e);
        if (!rc && e->status) {
            *err = e->err;
            rc = e->status;
        }
        for (int i = 0; !rc && s > 0 && i < n; i++) { /* step 0 warms up */
            f[(size_t)i * steps + s - 1] = e->stats.time_fwd[i];
            b[(size_t)i * steps + s - 1] = e->stats.time_bwd[i] + e->stats.time_wgt[i];
            w[(size_t)i * steps + s - 1] = e->stats.time_wgt[i];
        }
    }
    for (int i = 0; !rc && i < n; i++) {
        fwd[i] = dl_median(f + (size_t)i * steps, steps);
        bwd[i] = dl_median(b + (size_t)i * steps, steps);
        wgt[i] = fmin(dl_median(w + (size_t)i * steps, steps), bwd[i]);
    }
    return rc;
}

/* The line through (small, at_small) and (batch, at_batch): *fixed + *per
 * * samples, neither negative (a measurement where the smaller batch took
 * longer, or its line crosses below 0, gives the per-sample rate alone). */
static void fit_line(int small, double at_small, int batch, double at_batch, double *fixed, double *per)
{
    *per = batch > small ? (at_batch - at_small) / (batch - small) : 0;
    *fixed = at_batch - *per * batch;
    if (*per < 0 || *fixed < 0)
        *per = at_batch / batch, *fixed = 0;
}

int dl_layer_times_measure(const struct dl_graph *g, int batch, int steps, const struct dl_exec_options *eo,
                           struct dl_layer_times *t, struct dl_error *err)
{
    const int n = g->n, small = batch >= 8 ? batch / 8 : 1;
    void *x = NULL;
    int *y = NULL;
    struct dl_exec e;
    double *work = dl_calloc(3 * (size_t)n * (size_t)steps, sizeof *work, err);
    double *at = dl_calloc(6 * (size_t)n, sizeof *at, err); /* fwd, bwd, wgt at batch; then at small */
    int rc = work && at ? dl_graph_random_batch(g, batch, &x, &y, err) : DL_ERR_NOMEM;
    int made = !rc && (rc = dl_exec_init(&e, g, batch, 1, eo, err)) == DL_OK;
    if (!rc)
        rc = median_times(&e, x, y, batch, steps, work, at, at + n, at + 2 * n, err);
    if (!rc)
        rc = median_times(&e, x, y, small, steps, work, at + 3 * n, at + 4 * n, at + 5 * n, err);
    for (int i = 0; !rc && i < n; i++) {
        fit_line(small, at[3 * n + i], batch, at[i], &t->fwd0[i], &t->fwd[i]);
        fit_line(small, at[4 * n + i], batch, at[n + i], &t->bwd0[i], &t->bwd[i]);
        fit_line(small, at[5 * n + i], batch, at[2 * n + i], &t->wgt0[i], &t->wgt[i]);
        t->wgt0[i] = fmin(t->wgt0[i], t->bwd0[i]), t->wgt[i] = fmin(t->wgt[i], t->bwd[i]);
        t->source[i] = DL_TIME_MEASURED;
    }
    if (made)
        dl_exec_free(&e);
    free(x), free(y), free(work), free(at);
    return rc;
}

int dl_layer_times_tensor(const struct dl_graph *g, int T, int batch, int steps, const struct dl_exec_options *eo,
                          struct dl_layer_times *t, struct dl_error *err)
{
    struct dl_grid_dims dims = {1, T, 1};
    struct dl_shard s;
    struct dl_comm *standin = NULL;
    int rc = dl_layer_times_alloc(t, g->n, err);
    if (rc)
        return rc;
    int have_shard = (rc = dl_shard_make(g, &dims, 1, 0, NULL, &s, err)) == DL_OK;
    if (!rc)
        rc = dl_comm_standin_open(0, T, &standin, err);
    if (!rc) {
        struct dl_exec_options o = {0};
        if (eo)
            o = *eo;
        o.shard = &s;
        o.tensor_comm = standin;
        rc = dl_layer_times_measure(g, batch, steps, &o, t, err);
    }
    dl_comm_close(standin);
    if (have_shard)
        dl_shard_free(&s);
    if (rc)
        dl_layer_times_free(t);
    return rc;
}

int dl_layer_times_tensor_hook(void *ctx, const struct dl_graph *g, int T, struct dl_layer_times *t,
                               struct dl_error *err)
{
    const struct dl_tensor_times_request *r = ctx;
    return dl_layer_times_tensor(g, T, dl_layout_local_batch(r->batch, r->ranks / T), 3, r->eo, t, err);
}

/* The fastest kernel's forward and backward seconds (and of that its
 * weight gradients') for layer L at the one size gathered, 0 when the
 * database has no complete row for it. */
static int fastest(const struct dl_tune_layer *L, double *fwd, double *bwd, double *wgt)
{
    int found = 0;
    for (int k = 0; k < L->n_k; k++) {
        if (!L->have[k])
            continue;
        const struct dl_tune_row *row = DL_TUNE_ROW(L, k, 0);
        double f = 0, b = 0;
        int ok = 1;
        for (int d = 0; d < DL_N_DIRS; d++) {
            if (!L->want[d])
                continue;
            ok &= row[d].time_s >= 0 && isfinite(row[d].time_s);
            *(d == DL_DIR_FORWARD ? &f : &b) += row[d].time_s;
        }
        if (ok && (!found || f + b < *fwd + *bwd))
            *fwd = f, *bwd = b, *wgt = L->want[DL_DIR_BACKWARD_WEIGHTS] ? row[DL_DIR_BACKWARD_WEIGHTS].time_s : 0,
            found = 1;
    }
    return found;
}

int dl_layer_times_from_db(const struct dl_graph *g, int batch, const char *db_path, struct dl_layer_times *t,
                           struct dl_error *err)
{
    struct dl_tune_options o;
    dl_tune_options_default(&o);
    o.policy = DL_TUNE_UNDIVIDED;
    o.db_path = db_path;
    o.no_measure = 1;
    struct dl_tune_report rep = {0};
    struct dl_tune_layer *L = dl_calloc((size_t)g->n, sizeof *L, err);
    if (!L)
        return -1;
    int sizes[1] = {batch}, replaced = 0;
    int rc = dl_tune_gather(g, batch, &o, sizes, 1, L, &rep, err);
    for (int i = 0; !rc && i < g->n; i++) {
        double f = 0, b = 0, w = 0;
        if (!L[i].tunable || !fastest(&L[i], &f, &b, &w))
            continue;
        t->fwd[i] = f / batch;
        t->bwd[i] = b / batch;
        t->wgt[i] = w / batch;
        t->fwd0[i] = t->bwd0[i] = t->wgt0[i] = 0; /* one size: no fixed part known */
        t->source[i] = DL_TIME_DB;
        replaced++;
    }
    dl_tune_layers_free(L, g->n);
    free(L);
    return rc ? -1 : replaced;
}

int dl_layer_times_optimizer(const struct dl_optim_spec *spec, long n, int steps, double *per_param,
                             struct dl_error *err)
{
    struct dl_optim o;
    dl_real *w = dl_calloc((size_t)(n > 0 ? n : 1), sizeof *w, err);
    dl_real *g = dl_calloc((size_t)(n > 0 ? n : 1), sizeof *g, err);
    double *s = dl_calloc((size_t)steps, sizeof *s, err);
    int rc = w && g && s ? dl_optim_init(&o, spec, n, err) : DL_ERR_NOMEM, made = !rc;
    for (long i = 0; !rc && i < n; i++)
        g[i] = (dl_real)(1e-3 * (double)(i % 7) - 3e-3);
    for (int k = 0; !rc && k <= steps; k++) { /* the first warms up */
        double t0 = dl_clock_now();
        memset(g, 0, sizeof *g * (size_t)n); /* as each step's zeroing of the gradients */
        rc = dl_optim_step(&o, spec->lr, w, g);
        if (k > 0)
            s[k - 1] = dl_clock_now() - t0;
    }
    if (!rc)
        *per_param = n > 0 ? dl_median(s, steps) / (double)n : 0;
    if (made)
        dl_optim_free(&o);
    free(w), free(g), free(s);
    return rc;
}

int dl_layer_times_gather(const struct dl_graph *g, int batch, double flop_rate, int use_db, const char *db_path,
                          const struct dl_exec_options *eo, const struct dl_optim_spec *optim,
                          struct dl_layer_times *t, char *summary, size_t size, struct dl_error *err)
{
    int rc = dl_layer_times_alloc(t, g->n, err);
    if (rc)
        return rc;
    if (flop_rate > 0)
        dl_layer_times_flops(g, flop_rate, t);
    else
        rc = dl_layer_times_measure(g, batch, 3, eo, t, err);
    if (!rc && flop_rate <= 0 && optim)
        rc = dl_layer_times_optimizer(optim, dl_graph_param_count(g), 5, &t->optim_per_param, err);
    if (!rc && use_db && dl_layer_times_from_db(g, batch, db_path, t, err) < 0)
        rc = err->code ? err->code : DL_ERR_IO;
    if (rc) {
        dl_layer_times_free(t);
        return rc;
    }
    int count[3] = {0, 0, 0};
    for (int i = 0; i < g->n; i++)
        count[t->source[i]]++;
    int w = snprintf(summary, size, "layer times at batch %d: %d from the tuning database, %d measured now", batch,
                     count[DL_TIME_DB], count[DL_TIME_MEASURED]);
    if (flop_rate > 0 && w > 0 && (size_t)w < size)
        snprintf(summary + w, size - (size_t)w, ", %d FLOP estimates at %.3g FLOP/s", count[DL_TIME_FLOPS], flop_rate);
    return DL_OK;
}
