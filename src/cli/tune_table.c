/* tune_table.c: the tuner's plan as a table (see tune_table.h). */
#include "cli/tune_table.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/options.h"

int dl_tune_plan_net(struct dl_net_options *o, const char *prog, struct dl_net *net, struct dl_mbplan *plan,
                     struct dl_tune_report *rep)
{
    int status = dl_net_options_load(o, net, prog);
    if (status)
        return status;
    struct dl_tune_options t = o->tune;
    t.kernels = &o->kernels;
    struct dl_error err = {0};
    int rc = dl_tune_net(&net->graph, net->train.batch, &t, plan, rep, &err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        dl_net_free(net);
        return rc == DL_ERR_SPEC ? 2 : 1;
    }
    return 0;
}

const char *const dl_tune_table_header[DL_TUNE_TABLE_COLS] = {
    "layer", "type", "direction", "plan (kernel mb x count)", "ms", "MiB", "undiv ms", "speedup"};

const char *const dl_tune_table_note =
    "(undiv: the layer's best plan without micro-batches, whose kernels may differ; \"in fwd\": kernels\n"
    " keeping state from forward to backward split every direction alike, timed together)";

int dl_tune_table_build(const struct dl_graph *g, const struct dl_mbplan *p, const struct dl_tune_report *r,
                        struct dl_tune_table *t)
{
    static const char *const dirs[DL_N_DIRS] = {"fwd", "bwd-data", "bwd-weights"};
    *t = (struct dl_tune_table){.all_undivided = 1, .workspace_bytes = (double)p->workspace_bytes};
    t->cell = calloc((size_t)g->n * DL_N_DIRS + 1, sizeof *t->cell);
    t->divided = calloc((size_t)g->n * DL_N_DIRS + 1, sizeof *t->divided);
    if (!t->cell || !t->divided) {
        dl_tune_table_free(t);
        return -1;
    }
    for (int i = 0; i < g->n; i++) {
        const struct dl_tune_layer_report *lr = &r->layer[i];
        if (!p->layer[i].tuned)
            continue;
        for (int d = 0; d < DL_N_DIRS; d++) {
            const struct dl_mbplan_dir *pd = &p->layer[i].dir[d];
            if (!pd->n)
                continue;
            char(*c)[192] = t->cell[t->rows];
            snprintf(c[0], sizeof c[0], "%s", g->layers[i].name);
            snprintf(c[1], sizeof c[1], "%s", g->layers[i].kind->name);
            snprintf(c[2], sizeof c[2], "%s", dirs[d]);
            dl_mbplan_dir_str(pd, c[3], sizeof c[3]);
            snprintf(c[4], sizeof c[4], "%.3f", 1e3 * pd->time_s);
            snprintf(c[5], sizeof c[5], "%.2f", pd->ws_bytes / 1048576.0);
            if (lr->dir_undivided[d] > 0) {
                snprintf(c[6], sizeof c[6], "%.3f", 1e3 * lr->dir_undivided[d]);
                snprintf(c[7], sizeof c[7], "%.2fx", pd->time_s > 0 ? lr->dir_undivided[d] / pd->time_s : 1.0);
            } else {
                snprintf(c[6], sizeof c[6], "%s", pd->time_s > 0 ? "n/a" : "(in fwd)");
            }
            t->divided[t->rows] = pd->n > 1 || pd->part[0].mb < p->batch;
            t->rows++;
        }
        t->total_s += lr->time_s;
        t->undivided_s += lr->undivided_s;
        t->all_undivided &= lr->undivided_s > 0 || lr->time_s == 0;
    }
    return 0;
}

void dl_tune_table_free(struct dl_tune_table *t)
{
    free(t->cell);
    free(t->divided);
    t->cell = NULL, t->divided = NULL, t->rows = 0;
}

void dl_tune_table_total(const struct dl_tune_table *t, char *buf, size_t n)
{
    int len = snprintf(buf, n, "total: %.3f ms per step for the tuned layers, workspace %.2f MiB", 1e3 * t->total_s,
                       t->workspace_bytes / 1048576.0);
    if (len < 0 || (size_t)len >= n)
        return;
    if (t->all_undivided && t->total_s > 0)
        snprintf(buf + len, n - (size_t)len, "; best undivided %.3f ms: %.2fx", 1e3 * t->undivided_s,
                 t->undivided_s / t->total_s);
    else
        snprintf(buf + len, n - (size_t)len, "; no undivided plan fits the limit on every layer");
}
