/* train_auto.c: --parallel auto: the planner's best layout for the run
 * (see train_auto.h).  Only rank 0 plans (a measurement differs from rank
 * to rank); the layouts reach the others by one broadcast.  With trials,
 * every rank trains each of the best few for a few steps (the same data,
 * from the same seed), rank 0 times them and every rank takes the fastest. */
#include "cli/train_auto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/layer_times.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/threads.h"
#include "planner/search.h"

/* A layout as integers: dp, tp, pp, chunks, schedule, V, the number of
 * layers kept whole, the bucket size in KiB (0: the default), 1 for
 * convolutions by samples, the expert ranks (1: none; dp counts them), the
 * layers kept whole, cuts (pp x V stages). */
enum { BUCKET_KIB = 7, BY_SAMPLES = 8, EP = 9, WHOLE = 10, HEAD = WHOLE + 2 * DL_PLAN_MAX_PAIRS,
       WORDS = HEAD + DL_SCHED_MAX_STAGES + 1 };
#define TRIAL_STEPS 4 /* the first warms up */

struct plan_words {
    int status, n;               /* n layouts, best first */
    int w[DL_AUTO_MAX_TRIALS][WORDS];
    double predicted[DL_AUTO_MAX_TRIALS];
};

static void words_of(const struct dl_plan_layout *l, int *w)
{
    w[0] = l->dims.dp, w[1] = l->dims.tp, w[2] = l->dims.pp, w[3] = l->chunks, w[4] = (int)l->schedule;
    w[5] = dl_layout_V(l);
    w[6] = l->n_whole;
    w[BUCKET_KIB] = (int)(l->bucket_bytes >> 10);
    w[BY_SAMPLES] = l->by_samples;
    w[EP] = dl_grid_ep(&l->dims);
    for (int k = 0; k < l->n_whole; k++)
        w[WHOLE + k] = l->whole[k];
    for (int s = 0; s <= dl_layout_stages(l); s++)
        w[HEAD + s] = l->first[s];
}

/* "--grid ... --pipeline-chunks M --pipeline-schedule S[, stages begin at A|B][, kept whole (split: none): C,D]" */
static void describe(const struct dl_graph *g, const int *w, char *buf, size_t size)
{
    struct dl_plan_layout l = {.dims = {w[0], w[1], w[2], 0, w[EP] > 1 ? w[EP] : 0},
                               .schedule = (enum dl_pipe_schedule)w[4], .V = w[5]};
    char grid[64], sched[32];
    int len = snprintf(buf, size, "--grid %s --pipeline-chunks %d --pipeline-schedule %s",
                       dl_grid_str(&l.dims, grid, sizeof grid), w[3], dl_layout_schedule_str(&l, sched, sizeof sched));
    for (int s = 1; s < w[2] * w[5] && len > 0 && (size_t)len < size; s++)
        len += snprintf(buf + len, size - (size_t)len, "%s%s", s > 1 ? "|" : ", stages begin at ",
                        g->layers[w[HEAD + s]].name);
    if (w[BUCKET_KIB] && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, " --bucket-bytes %dK", w[BUCKET_KIB]);
    if (w[BY_SAMPLES] && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, ", convolutions split: batch");
    for (int k = 0; k < w[6] && len > 0 && (size_t)len < size; k++)
        len += snprintf(buf + len, size - (size_t)len, "%s%s", k ? "," : ", kept whole (split: none): ",
                        g->layers[w[WHOLE + k]].name);
}

/* At least two of dp, tp and pp above 1. */
static int is_hybrid(const struct dl_grid_dims *d)
{
    return (d->dp > 1) + (d->tp > 1) + (d->pp > 1) >= 2;
}

/* What the trainer refuses expert ranks with in this run (besides --zero,
 * which the planner knows), or NULL. */
static const char *experts_refused(const struct dl_train_opts *train)
{
    if (train->parallel.codec.ops)
        return "--compress: not with expert ranks yet";
    if (train->exec.device && !train->exec.device->host_memory)
        return "the experts' rows travel through host memory: not on this --device yet";
    return NULL;
}

static int plan_on_rank0(struct dl_net *net, struct dl_net_options *no, int N, double flop_rate, int keep,
                         int hybrid, const struct dl_train_opts *train, struct plan_words *out, char *summary,
                         size_t size)
{
    const char *who = hybrid ? "--parallel hybrid" : "--parallel auto";
    const struct dl_graph *g = &net->graph;
    int batch = net->train.batch;
    struct dl_exec_options eo;
    dl_net_exec_options(no, &eo);
    struct dl_layer_times t;
    struct dl_error err = {0};
    char times[256], mem[32];
    if (dl_layer_times_gather(g, dl_layout_local_batch(batch, N), flop_rate, 1, no->tune.db_path, &eo,
                              &net->train.optim, &t, times,
                              sizeof times, &err)) {
        fprintf(stderr, "dltrain: %s: %s\n", who, err.msg);
        return 1;
    }
    struct dl_machine m;
    dl_machine_init(&m, N, 0, 0);
    dl_machine_share_cores(&m, dl_threads_local_ranks(), dl_threads_get(), dl_threads_node_cores(), flop_rate <= 0);
    struct dl_tensor_times_request measure = {.batch = batch, .ranks = N, .eo = &eo};
    struct dl_plan_request req = {.g = g, .times = &t, .machine = &m, .ranks = N, .batch = batch, .eo = &eo,
                                  .optim = &net->train.optim, .grad_dtype = train->parallel.grad_dtype,
                                  .zero = net->parallel.zero, .sequence_parallel = net->parallel.sequence_parallel,
                                  .no_experts = experts_refused(train),
                                  .tensor_times = flop_rate > 0 ? NULL : dl_layer_times_tensor_hook,
                                  .tensor_ctx = &measure};
    struct dl_plan_result r;
    int status = 0;
    if (dl_plan_search(&req, &r, &err)) {
        fprintf(stderr, "dltrain: %s: %s\n", who, err.msg);
        status = err.code == DL_ERR_SPEC ? 2 : 1;
    } else {
        if (r.n_feasible == 0) {
            fprintf(stderr, "dltrain: %s: no layout of %d ranks is feasible (%s)\n", who, N,
                    r.n ? r.c[0].why : "none");
            status = 2;
        }
        /* --parallel hybrid: the feasible layouts that split two ways, when there are some */
        int n_hybrid = 0;
        for (int k = 0; hybrid && k < r.n_feasible; k++)
            if (is_hybrid(&r.c[r.rank[k]].layout.dims))
                r.rank[n_hybrid++] = r.rank[k];
        if (!status && hybrid && n_hybrid == 0)
            fprintf(stderr, "dltrain: --parallel hybrid: no feasible layout of %d ranks has two of dp, tp and pp "
                    "above 1; taking the best layout\n", N);
        int n = n_hybrid ? n_hybrid : r.n_feasible;
        for (int k = 0; !status && k < n && k < keep; k++) {
            words_of(&r.c[r.rank[k]].layout, out->w[k]);
            out->predicted[k] = r.c[r.rank[k]].pred.step_s;
            out->n++;
        }
        if (!status)
            snprintf(summary, size, "%s per rank, best of %d %slayouts; %s; within the node: %s",
                     dl_bytes_str((double)r.c[r.rank[0]].memory, mem, sizeof mem), n, n_hybrid ? "hybrid " : "",
                     times, m.node_source);
        dl_plan_result_free(&r);
    }
    dl_layer_times_free(&t);
    return status;
}

/* Sets train's grid, chunks and schedule and the graph's stage keys to w. */
static void apply(const int *w, struct dl_net *net, struct dl_train_opts *train)
{
    train->grid = (struct dl_grid_dims){w[0], w[1], w[2], net->parallel.sequence_parallel, w[EP] > 1 ? w[EP] : 0};
    train->pipeline_chunks = w[3];
    train->pipeline_schedule = (enum dl_pipe_schedule)w[4];
    train->pipeline_virtual = w[5];
    /* the plan's buckets, unless --bucket-bytes asked for other than the default */
    struct dl_parallel_opts defaults;
    dl_parallel_opts_defaults(&defaults);
    if (w[BUCKET_KIB] && train->parallel.bucket_bytes == defaults.bucket_bytes)
        train->parallel.bucket_bytes = (size_t)w[BUCKET_KIB] << 10;
    struct dl_graph *g = &net->graph;
    for (int i = 0; i < g->n; i++)
        g->layers[i].stage = -1;
    for (int s = 0; w[2] > 1 && s < w[2] * w[5]; s++)
        for (int i = w[HEAD + s]; i < w[HEAD + s + 1]; i++)
            g->layers[i].stage = s;
    for (int k = 0; k < w[6]; k++)
        g->layers[w[WHOLE + k]].split = DL_SPLIT_NONE;
    if (w[BY_SAMPLES])
        dl_split_by_samples(g);
}

/* Rank 0's step times of a trial: each step's end, since the start. */
struct trial_clock {
    double start, end[TRIAL_STEPS];
    int steps;
};

static void on_trial_step(void *ctx, const struct dl_step_report *r)
{
    struct trial_clock *c = ctx;
    (void)r;
    if (c->steps < TRIAL_STEPS)
        c->end[c->steps++] = dl_clock_now();
}

/* Trains layout w for TRIAL_STEPS steps; *seconds: the median step after
 * the first (rank 0's clock; INFINITY when it failed). */
static int trial(const int *w, struct dl_net *net, const struct dl_train_opts *train, double *seconds)
{
    struct dl_net t = *net;
    t.train.max_steps = TRIAL_STEPS;
    t.train.epochs = 1;
    t.data.limit_test = t.train.batch; /* the evaluation after the last step: one batch */
    struct dl_train_opts o = *train;
    apply(w, &t, &o);
    struct trial_clock c = {.start = dl_clock_now()};
    struct dl_train_hooks hooks = {.ctx = &c, .on_step = on_trial_step};
    struct dl_train_result res;
    struct dl_error err = {0};
    int rc = dl_train(&t, &o, &hooks, &res, &err);
    *seconds = INFINITY;
    if (!rc && c.steps == TRIAL_STEPS) {
        double d[TRIAL_STEPS - 1];
        for (int k = 1; k < TRIAL_STEPS; k++)
            d[k - 1] = c.end[k] - c.end[k - 1];
        *seconds = dl_median(d, TRIAL_STEPS - 1);
    }
    return rc == DL_ERR_COMM ? rc : DL_OK; /* a layout that cannot train only loses */
}

/* dl_train_auto_plan with p (zeroed) for the plan. */
static int auto_plan(struct plan_words *p, struct dl_net *net, struct dl_net_options *no, struct dl_comm *comm,
                     double flop_rate, int trials, int keep_trial, int hybrid, struct dl_train_opts *train, int print)
{
    const char *label = hybrid ? "parallel hybrid" : "parallel auto";
    char summary[512] = "";
    int keep = trials > 1 ? trials : 1;
    if (comm->rank == 0)
        p->status = plan_on_rank0(net, no, comm->size, flop_rate, keep, hybrid, train, p, summary, sizeof summary);
    struct dl_error err = {0};
    if (comm->ops->bcast(comm, p, sizeof *p, 0, &err)) {
        fprintf(stderr, "dltrain: --%s: %s\n", label, err.msg);
        return 1;
    }
    if (p->status)
        return p->status;
    int chosen[2] = {0, 0}; /* index; 1 when measurement overruled the model, 2 when keep_trial did */
    if (p->n > 1 && (train->checkpoint_dir || train->resume)) {
        if (comm->rank == 0 && print)
            printf("%s (no trials with checkpoints: they would write them; the model's choice)\n", label);
    } else if (p->n > 1) {
        double t[DL_AUTO_MAX_TRIALS];
        for (int k = 0; k < p->n; k++)
            if (trial(p->w[k], net, train, &t[k]))
                return 1;
        if (comm->rank == 0) {
            for (int k = 1; k < p->n; k++)
                if (t[k] < t[chosen[0]])
                    chosen[0] = k;
            chosen[1] = chosen[0] != 0;
            if (keep_trial > 0 && keep_trial <= p->n) {
                chosen[0] = keep_trial - 1;
                chosen[1] = chosen[0] != 0 ? 2 : 0;
            }
            for (int k = 0; print && k < p->n; k++) {
                char d[600];
                describe(&net->graph, p->w[k], d, sizeof d);
                printf("%s timed: %s: predicted %.3f ms, measured %.3f ms per step%s\n", label, d,
                       1e3 * p->predicted[k], 1e3 * t[k], k == chosen[0] ? " (kept)" : "");
            }
        }
        if (comm->ops->bcast(comm, chosen, sizeof chosen, 0, &err)) {
            fprintf(stderr, "dltrain: --%s: %s\n", label, err.msg);
            return 1;
        }
    }
    if (comm->rank == 0 && print) {
        char d[600];
        describe(&net->graph, p->w[chosen[0]], d, sizeof d);
        printf("%s: %s (predicted %.3f ms per step, %s)%s\n", label, d, 1e3 * p->predicted[chosen[0]], summary,
               chosen[1] == 1   ? "; measurement overruled the model, whose first choice measured slower"
               : chosen[1] == 2 ? "; --debug-plan-keep overruled the model"
                                : "");
        fflush(stdout);
    }
    apply(p->w[chosen[0]], net, train);
    return 0;
}

int dl_train_auto_plan(struct dl_net *net, struct dl_net_options *no, struct dl_comm *comm, double flop_rate,
                       int trials, int keep_trial, int hybrid, struct dl_train_opts *train, int print)
{
    struct dl_error err = {0};
    struct plan_words *p = dl_calloc(1, sizeof *p, &err); /* 33 KB: the cuts of every kept layout */
    if (!p) {
        fprintf(stderr, "dltrain: --%s: %s\n", hybrid ? "parallel hybrid" : "parallel auto", err.msg);
        return 1;
    }
    int status = auto_plan(p, net, no, comm, flop_rate, trials, keep_trial, hybrid, train, print);
    free(p);
    return status;
}
