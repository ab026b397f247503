/* layer_times.c: the planner's per-layer times from FLOPs, from a
 * measurement of the whole network, or from the tuning database (see
 * layer_times.h). */
#include "cli/layer_times.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/options.h"
#include "core/clock.h"
#include "exec/exec.h"
#include "plan/stages.h"
#include "tune/tune.h"
#include "tune/tune_impl.h"

/* A layer with trainable parameters (one that computes weight gradients). */
static int has_weights(const struct dl_layer *l)
{
    for (int j = 0; j < l->n_params; j++)
        if (l->param[j].trainable)
            return 1;
    return 0;
}

void dl_layer_times_flops(const struct dl_graph *g, double rate, struct dl_layer_times *t)
{
    for (int i = 0; i < g->n; i++) {
        double c = dl_stages_layer_cost(&g->layers[i]) / rate;
        t->fwd[i] = c / 3;
        t->bwd[i] = c - c / 3;
        t->wgt[i] = has_weights(&g->layers[i]) ? t->bwd[i] / 2 : 0;
        t->source[i] = DL_TIME_FLOPS;
    }
}

int dl_layer_times_measure(const struct dl_graph *g, int batch, int steps, const struct dl_exec_options *eo,
                           struct dl_layer_times *t, struct dl_error *err)
{
    float *x = NULL;
    int *y = NULL;
    struct dl_exec e;
    double *f = dl_calloc((size_t)g->n * (size_t)steps, sizeof *f, err);
    double *b = dl_calloc((size_t)g->n * (size_t)steps, sizeof *b, err);
    double *w = dl_calloc((size_t)g->n * (size_t)steps, sizeof *w, err);
    int rc = f && b && w ? dl_bench_random_batch(g, batch, &x, &y, err) : DL_ERR_NOMEM;
    int made = !rc && (rc = dl_exec_init(&e, g, batch, 1, eo, err)) == DL_OK;
    for (int s = 0; !rc && s <= steps; s++) {
        rc = dl_exec_timing_enable(&e, err); /* zeroes the times: each step on its own */
        dl_exec_zero_grad(&e);
        dl_exec_forward(&e, x, y, batch, 1);
        dl_exec_backward(&e);
        if (!rc && e.status) {
            *err = e.err;
            rc = e.status;
        }
        for (int i = 0; !rc && s > 0 && i < g->n; i++) { /* step 0 warms up */
            f[(size_t)i * steps + s - 1] = e.time_fwd[i];
            b[(size_t)i * steps + s - 1] = e.time_bwd[i] + e.time_wgt[i];
            w[(size_t)i * steps + s - 1] = e.time_wgt[i];
        }
    }
    for (int i = 0; !rc && i < g->n; i++) {
        t->fwd[i] = dl_median(f + (size_t)i * steps, steps) / batch;
        t->bwd[i] = dl_median(b + (size_t)i * steps, steps) / batch;
        t->wgt[i] = fmin(dl_median(w + (size_t)i * steps, steps) / batch, t->bwd[i]);
        t->source[i] = DL_TIME_MEASURED;
    }
    if (made)
        dl_exec_free(&e);
    free(x), free(y), free(f), free(b), free(w);
    return rc;
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
        t->source[i] = DL_TIME_DB;
        replaced++;
    }
    dl_tune_layers_free(L, g->n);
    free(L);
    return rc ? -1 : replaced;
}

int dl_layer_times_gather(const struct dl_graph *g, int batch, double flop_rate, int use_db, const char *db_path,
                          const struct dl_exec_options *eo, struct dl_layer_times *t, char *summary, size_t size,
                          struct dl_error *err)
{
    int rc = dl_layer_times_alloc(t, g->n, err);
    if (rc)
        return rc;
    if (flop_rate > 0)
        dl_layer_times_flops(g, flop_rate, t);
    else
        rc = dl_layer_times_measure(g, batch, 3, eo, t, err);
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
