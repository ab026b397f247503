/* train_auto.c: --parallel auto: the planner's best layout for the run
 * (see train_auto.h).  Only rank 0 plans (a measurement differs from rank
 * to rank); the layout reaches the others by one broadcast. */
#include "cli/train_auto.h"

#include <stdio.h>
#include <string.h>

#include "cli/layer_times.h"
#include "plan/search.h"

/* The layout as integers: status, dp, tp, pp, chunks, schedule, cuts. */
enum { HEAD = 6, WORDS = HEAD + DL_SCHED_MAX_STAGES + 1 };

static int plan_on_rank0(struct dl_net *net, struct dl_net_options *no, int N, double flop_rate, int *w,
                         int print)
{
    const struct dl_graph *g = &net->graph;
    int batch = net->train.batch;
    struct dl_exec_options eo;
    dl_net_exec_options(no, &eo);
    struct dl_layer_times t;
    struct dl_error err = {0};
    char summary[256];
    if (dl_layer_times_gather(g, dl_layout_local_batch(batch, N), flop_rate, 1, no->tune.db_path, &eo, &t, summary,
                              sizeof summary, &err)) {
        fprintf(stderr, "dltrain: --parallel auto: %s\n", err.msg);
        return 1;
    }
    struct dl_machine m;
    dl_machine_init(&m, N, 0, 0);
    struct dl_plan_request req = {.g = g, .times = &t, .machine = &m, .ranks = N, .batch = batch, .eo = &eo};
    struct dl_plan_result r;
    int status = 0;
    if (dl_plan_search(&req, &r, &err)) {
        fprintf(stderr, "dltrain: --parallel auto: %s\n", err.msg);
        status = err.code == DL_ERR_SPEC ? 2 : 1;
    } else if (r.n_feasible == 0) {
        fprintf(stderr, "dltrain: --parallel auto: no layout of %d ranks is feasible (%s)\n", N,
                r.n ? r.c[0].why : "none");
        status = 2;
    }
    if (!status) {
        const struct dl_plan_candidate *c = &r.c[r.rank[0]];
        const struct dl_plan_layout *l = &c->layout;
        w[1] = l->dims.dp, w[2] = l->dims.tp, w[3] = l->dims.pp, w[4] = l->chunks, w[5] = (int)l->schedule;
        for (int s = 0; s <= l->dims.pp; s++)
            w[HEAD + s] = l->first[s];
        if (print) {
            char grid[64], cuts[512] = "";
            for (int s = 1; s < l->dims.pp; s++) {
                strncat(cuts, s > 1 ? "|" : ", stages begin at ", sizeof cuts - strlen(cuts) - 1);
                strncat(cuts, g->layers[l->first[s]].name, sizeof cuts - strlen(cuts) - 1);
            }
            printf("parallel auto: --grid %s --pipeline-chunks %d --pipeline-schedule %s%s (predicted %.3f ms per "
                   "step, %zu bytes per rank, best of %d layouts; %s; within the node: %s)\n",
                   dl_grid_str(&l->dims, grid, sizeof grid), l->chunks, dl_schedule_kind_name(l->schedule), cuts,
                   1e3 * c->pred.step_s, c->memory, r.n_feasible, summary, m.node_source);
            fflush(stdout);
        }
        dl_plan_result_free(&r);
    } else if (r.c) {
        dl_plan_result_free(&r);
    }
    dl_layer_times_free(&t);
    return status;
}

int dl_train_auto_plan(struct dl_net *net, struct dl_net_options *no, struct dl_comm *comm, double flop_rate,
                       struct dl_train_opts *train, int print)
{
    int w[WORDS] = {0};
    if (comm->rank == 0)
        w[0] = plan_on_rank0(net, no, comm->size, flop_rate, w, print);
    struct dl_error err = {0};
    if (comm->ops->bcast(comm, w, sizeof w, 0, &err)) {
        fprintf(stderr, "dltrain: --parallel auto: %s\n", err.msg);
        return 1;
    }
    if (w[0])
        return w[0];
    train->grid = (struct dl_grid_dims){w[1], w[2], w[3]};
    train->pipeline_chunks = w[4];
    train->pipeline_schedule = (enum dl_pipe_schedule)w[5];
    train->pipeline_virtual = 1;
    struct dl_graph *g = &net->graph;
    for (int i = 0; i < g->n; i++)
        g->layers[i].stage = -1;
    for (int s = 0; w[3] > 1 && s < w[3]; s++)
        for (int i = w[HEAD + s]; i < w[HEAD + s + 1]; i++)
            g->layers[i].stage = s;
    return 0;
}
