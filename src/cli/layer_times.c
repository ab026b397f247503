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

void dl_layer_times_flops(const struct dl_graph *g, double rate, struct dl_layer_times *t)
{
    for (int i = 0; i < g->n; i++) {
        double c = dl_stages_layer_cost(&g->layers[i]) / rate;
        t->fwd[i] = c / 3;
        t->bwd[i] = c - c / 3;
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
    int rc = f && b ? dl_bench_random_batch(g, batch, &x, &y, err) : DL_ERR_NOMEM;
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
        }
    }
    for (int i = 0; !rc && i < g->n; i++) {
        t->fwd[i] = dl_median(f + (size_t)i * steps, steps) / batch;
        t->bwd[i] = dl_median(b + (size_t)i * steps, steps) / batch;
        t->source[i] = DL_TIME_MEASURED;
    }
    if (made)
        dl_exec_free(&e);
    free(x), free(y), free(f), free(b);
    return rc;
}

int dl_layer_times_from_db(const struct dl_graph *g, int batch, const char *db_path, struct dl_layer_times *t,
                           struct dl_error *err)
{
    struct dl_tune_options o;
    dl_tune_options_default(&o);
    o.policy = DL_TUNE_UNDIVIDED;
    o.db_path = db_path;
    o.no_measure = 1;
    struct dl_mbplan plan;
    struct dl_tune_report rep;
    if (dl_tune_net(g, batch, &o, &plan, &rep, err))
        return -1;
    int replaced = 0;
    for (int i = 0; i < g->n && i < rep.n_layers; i++) {
        const struct dl_tune_layer_report *r = &rep.layer[i];
        double fw = r->dir_time[DL_DIR_FORWARD];
        double bw = r->dir_time[DL_DIR_BACKWARD_DATA] + r->dir_time[DL_DIR_BACKWARD_WEIGHTS];
        if (!r->tuned || !(fw > 0) || !isfinite(fw) || !isfinite(bw) || !(bw > 0))
            continue;
        t->fwd[i] = fw / batch;
        t->bwd[i] = bw / batch;
        t->source[i] = DL_TIME_DB;
        replaced++;
    }
    dl_tune_report_free(&rep);
    dl_mbplan_free(&plan);
    return replaced;
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
    snprintf(summary, size, "layer times at batch %d: %d from the tuning database, %d measured now, %d FLOP "
             "estimates at %.3g FLOP/s", batch, count[DL_TIME_DB], count[DL_TIME_MEASURED], count[DL_TIME_FLOPS],
             flop_rate);
    return DL_OK;
}
