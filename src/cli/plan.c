/* plan.c: `dltrain plan --net FILE --ranks N[,N2,...]`: the planner's
 * best layouts for N ranks (grid, stage cuts, schedule and chunks, with
 * their predicted step time, throughput, memory per rank, communication
 * share and bubble), why the other grids lost, and for a list of rank
 * counts the predicted weak scaling of each kind of layout, and with
 * --compare-consistency the data-parallel step under several consistency
 * models (doc/planner.md). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/layer_times.h"
#include "cli/option_table.h"
#include "cli/options.h"
#include "core/parse.h"
#include "core/threads.h"
#include "planner/consistency_cost.h"
#include "planner/machine_file.h"
#include "planner/search.h"

#define MAX_COUNTS 16
#define MAX_MODELS 16

static void help(void)
{
    fputs("Usage: dltrain plan --net FILE {--ranks N[,N2,...] | --machine FILE} [options]\n"
          "Predicts the step time and memory per rank of every layout of the network on N ranks\n"
          "(grid dp x tp x pp, ep too with experts, stage cuts, pipeline schedule and chunks) and\n"
          "prints the best few, why the other grids lost, and for several rank counts the predicted\n"
          "weak scaling.\n\n"
          "  --ranks N[,N2,...]    rank counts (the first gets the full table; default with\n"
          "                        --machine: its nodes x ranks per node)\n"
          "  --machine FILE        the machine as a YAML file (nodes, ranks and cores per node,\n"
          "                        flops, node_link, link), or the name of a shipped one\n"
          "                        (v100-25gbit, vm-2core); the options below win over it\n"
          "  --ranks-per-node K    ranks per node (default: every rank on one node)\n"
          "  --cores-per-node C    cores of a node (default: this host's, or none with --flops);\n"
          "                        a node's ranks times their threads above C share the cores,\n"
          "                        and compute slows by it\n"
          "  --link alpha=T,bw=R   the link between nodes (e.g. alpha=5us,bw=12.5GB/s); needed\n"
          "                        when ranks span nodes\n"
          "  --node-link alpha=T,bw=R[,add=R]  the link within a node (and the speed of\n"
          "                        reductions, bytes/s), instead of this host's calibration\n"
          "  --memory-per-rank B   bytes a rank may hold (e.g. 2G); layouts above it are infeasible,\n"
          "                        and with none left the smallest memory that would work is printed\n"
          "                        (exit status 2)\n"
          "  --flops RATE          time layers from their FLOPs at RATE FLOP/s (reproducible) instead\n"
          "                        of measuring them now; the tuning database's times still win\n"
          "  --grad-dtype fp32|bf16  the dtype data-parallel gradients travel in (as for training;\n"
          "                        bf16: half the bytes of the gradient sums)\n"
          "  --no-db               ignore the tuning database\n"
          "  --top N               layouts in the table (default 5)\n"
          "  --json                print one JSON object instead of the tables\n"
          "  --batch B             the mini-batch at the first rank count (weak scaling keeps B/N)\n"
          "  --compare-consistency M1,M2,...  the data-parallel step (dp=N) under each consistency\n"
          "                        model: sync, local-sgd:K, gossip:TOPOLOGY, easgd:TAU[,ALPHA]\n\n",
          stdout);
    dl_net_options_help(stdout);
}

struct plan_command {
    int counts[MAX_COUNTS], n_counts;
    int per_node;
    int cores;                  /* --cores-per-node; 0: this host's */
    int threads;                /* each rank's threads (--threads, else the node's cores over its ranks) */
    double link_alpha, link_beta, node_alpha, node_beta, node_gamma; /* node_gamma 0: this host's */
    int have_link, have_node_link;
    size_t memory;
    double flops;
    int no_db, top, json;
    enum dl_dtype grad_dtype;   /* --grad-dtype: the dtype data-parallel gradients travel in */
    struct dl_parallel_opts models[MAX_MODELS]; /* --compare-consistency */
    char model_names[MAX_MODELS][48];
    int n_models;
    const char *machine_path;   /* --machine FILE (or machine_found), or NULL */
    char machine_found[4096];   /* the shipped machines/NAME.yaml of --machine NAME */
    struct dl_machine_file machine;
};

static int parse_counts(const char *text, struct plan_command *c, struct dl_error *err)
{
    char copy[256];
    if (strlen(text) >= sizeof copy)
        return dl_errorf(err, DL_ERR_SPEC, "--ranks: value too long");
    strcpy(copy, text);
    c->n_counts = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (c->n_counts == MAX_COUNTS)
            return dl_errorf(err, DL_ERR_SPEC, "--ranks: at most %d rank counts, found more in '%s'", MAX_COUNTS,
                             text);
        int rc = dl_parse_int("--ranks", t, 1, 1 << 20, &c->counts[c->n_counts++], err);
        if (rc)
            return rc;
    }
    if (!c->n_counts)
        return dl_errorf(err, DL_ERR_SPEC, "--ranks: expected N or N1,N2,..., found '%s'", text);
    return DL_OK;
}

/* --compare-consistency's list: models split at commas, a piece that
 * starts with a digit or a dot joined to the one before (easgd's ALPHA). */
static int parse_models(const char *text, struct plan_command *c, struct dl_error *err)
{
    char copy[512];
    if (strlen(text) >= sizeof copy)
        return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: value too long");
    strcpy(copy, text);
    c->n_models = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int join = c->n_models > 0 && (t[0] == '.' || (t[0] >= '0' && t[0] <= '9'));
        if (!join && c->n_models == MAX_MODELS)
            return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: at most %d models, found more in '%s'",
                             MAX_MODELS, text);
        char *name = c->model_names[join ? c->n_models - 1 : c->n_models++];
        size_t len = join ? strlen(name) : 0;
        if (len + strlen(t) + 2 > sizeof c->model_names[0])
            return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: model '%s' too long", t);
        snprintf(name + len, sizeof c->model_names[0] - len, "%s%s", join ? "," : "", t);
    }
    for (int k = 0; k < c->n_models; k++) {
        dl_parallel_opts_defaults(&c->models[k]);
        struct dl_error inner = {0};
        int rc = dl_consistency_parse(c->model_names[k], &c->models[k], &inner);
        if (rc)
            return dl_errorf(err, rc, "--compare-consistency %s: %s", c->model_names[k], inner.msg);
    }
    if (!c->n_models)
        return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: expected MODEL[,MODEL...], found '%s'", text);
    return DL_OK;
}

/* What cost layout c most against the best one b. */
static void why_slower(const struct dl_plan_candidate *c, const struct dl_plan_candidate *b, char *buf, size_t n)
{
    const struct dl_layout_prediction *x = &c->pred, *y = &b->pred;
    double bubble_x = x->makespan_s * x->bubble, bubble_y = y->makespan_s * y->bubble;
    double compute_x = x->makespan_s - bubble_x - x->tp_s - x->ep_s;
    double compute_y = y->makespan_s - bubble_y - y->tp_s - y->ep_s;
    const char *names[] = {"compute and pipeline sends", "tensor-parallel collectives",
                           "data-parallel allreduce (not hidden)", "pipeline bubble", "optimizer step",
                           "expert all-to-alls"};
    double diff[] = {compute_x - compute_y, x->tp_s - y->tp_s, x->dp_exposed_s - y->dp_exposed_s, bubble_x - bubble_y,
                     x->optim_s - y->optim_s, x->ep_s - y->ep_s};
    int k = 0;
    for (int i = 1; i < 6; i++)
        if (diff[i] > diff[k])
            k = i;
    snprintf(buf, n, "%.2fx the best's step time: %s %+.3f ms", x->step_s / y->step_s, names[k], 1e3 * diff[k]);
}

/* The layout's name and the layers it keeps whole: "dp=1,tp=2,pp=1 (fc1,fc2 whole)",
 * "dp=1,tp=4,pp=1 convs by samples". */
static const char *layout_name(const struct dl_graph *g, const struct dl_plan_layout *l, char *buf, size_t n)
{
    dl_layout_str(l, buf, n);
    size_t len = strlen(buf);
    if (l->by_samples && len < n) {
        int w = snprintf(buf + len, n - len, " convs by samples");
        len += w > 0 ? (size_t)w : 0;
    }
    for (int k = 0; k < l->n_whole && len < n; k++) {
        int w = snprintf(buf + len, n - len, "%s%s%s", k ? "," : " (", g->layers[l->whole[k]].name,
                         k == l->n_whole - 1 ? " whole)" : "");
        len += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

static void cuts_str(const struct dl_graph *g, const struct dl_plan_layout *l, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    if (l->dims.pp == 1) {
        snprintf(buf, n, "-");
        return;
    }
    for (int s = 1; s < dl_layout_stages(l) && len < n; s++) {
        int w = snprintf(buf + len, n - len, "%s%s", s > 1 ? "|" : "", g->layers[l->first[s]].name);
        len += w > 0 ? (size_t)w : 0;
    }
}

/* 1 when a and b are the same grid dp x tp x pp with as many expert ranks
 * (sequence parallelism is a variant of its grid). */
static int same_grid(const struct dl_grid_dims *a, const struct dl_grid_dims *b)
{
    return a->dp == b->dp && a->tp == b->tp && a->pp == b->pp && dl_grid_ep(a) == dl_grid_ep(b);
}

static void print_table(const struct dl_graph *g, const struct dl_plan_result *r, int top)
{
    char name[256], cuts[256];
    int width = 28; /* the layout column: as wide as its widest name */
    for (int k = 0; k < r->n_feasible && k < top; k++) {
        int len = (int)strlen(layout_name(g, &r->c[r->rank[k]].layout, name, sizeof name));
        width = len > width ? len : width;
    }
    printf("%-3s %-*s %-24s %10s %11s %13s %6s %7s\n", "#", width, "layout", "stage cuts (first layers)", "step ms",
           "samples/s", "memory/rank", "comm", "bubble");
    for (int k = 0; k < r->n_feasible && k < top; k++) {
        const struct dl_plan_candidate *c = &r->c[r->rank[k]];
        cuts_str(g, &c->layout, cuts, sizeof cuts);
        layout_name(g, &c->layout, name, sizeof name);
        printf("%-3d %-*s %-24s %10.3f %11.1f %13zu %5.1f%% %6.1f%%\n", k + 1, width, name, cuts, 1e3 * c->pred.step_s,
               c->pred.samples_per_s, c->memory, 100 * c->pred.comm_share, 100 * c->pred.bubble);
    }
    if (r->n_feasible == 0)
        return;
    printf("why the other grids lost (each grid's best variant):\n");
    const struct dl_plan_candidate *best = &r->c[r->rank[0]];
    for (int i = 0; i < r->n; i++) {
        const struct dl_plan_candidate *c = &r->c[i];
        char grid[64], why[320];
        int first_of_grid = 1; /* a grid's variants need not be neighbours (the memory savers come last) */
        for (int j = 0; j < i && first_of_grid; j++)
            first_of_grid = !same_grid(&r->c[j].layout.dims, &c->layout.dims);
        if (!first_of_grid)
            continue;
        /* the grid's best feasible variant, in ranking order */
        const struct dl_plan_candidate *gb = NULL;
        for (int k = 0; k < r->n_feasible && !gb; k++)
            if (same_grid(&r->c[r->rank[k]].layout.dims, &c->layout.dims))
                gb = &r->c[r->rank[k]];
        if (gb == best)
            continue;
        if (gb) {
            why_slower(gb, best, why, sizeof why);
            layout_name(g, &gb->layout, name, sizeof name);
            printf("  %-28s %s\n", name, why);
        } else {
            printf("  %-28s infeasible: %s\n", dl_grid_str(&c->layout.dims, grid, sizeof grid), c->why);
        }
    }
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void json_layouts(const struct dl_graph *g, const struct dl_plan_result *r)
{
    printf("\"layouts\": [");
    for (int k = 0; k < r->n; k++) {
        int i = k < r->n_feasible ? r->rank[k] : -1;
        if (i < 0) { /* infeasible ones after the ranked, in enumeration order */
            int seen = k - r->n_feasible;
            for (i = 0; i < r->n; i++)
                if (!r->c[i].feasible && seen-- == 0)
                    break;
        }
        const struct dl_plan_candidate *c = &r->c[i];
        char sched[32];
        printf("%s\n  {\"dp\": %d, \"ep\": %d, \"tp\": %d, \"pp\": %d, \"schedule\": \"%s\", \"V\": %d, \"chunks\": %d, "
               "\"feasible\": %s", k ? "," : "", c->layout.dims.dp, dl_grid_ep(&c->layout.dims), c->layout.dims.tp,
               c->layout.dims.pp,
               dl_layout_schedule_str(&c->layout, sched, sizeof sched), dl_layout_V(&c->layout), c->layout.chunks,
               c->feasible ? "true" : "false");
        printf(", \"cuts\": [");
        for (int s = 1; s < dl_layout_stages(&c->layout) && (c->feasible || c->over_memory); s++) {
            printf("%s", s > 1 ? ", " : "");
            json_string(g->layers[c->layout.first[s]].name);
        }
        printf("], \"bucket_bytes\": %zu, \"grad_dtype\": \"%s\", \"zero\": %d, \"recompute\": %s, "
               "\"sequence_parallel\": %s, \"by_samples\": %s, \"whole\": [",
               c->layout.bucket_bytes, dl_dtype_name(c->layout.grad_dtype), c->layout.zero,
               c->layout.recompute ? "true" : "false", c->layout.dims.sp && c->layout.dims.tp > 1 ? "true" : "false",
               c->layout.by_samples ? "true" : "false");
        for (int w = 0; w < c->layout.n_whole; w++) {
            printf("%s", w ? ", " : "");
            json_string(g->layers[c->layout.whole[w]].name);
        }
        printf("]");
        if (c->feasible || c->over_memory)
            printf(", \"step_s\": %.9g, \"samples_per_s\": %.9g, \"memory_bytes\": %zu, \"comm_share\": %.6g, "
                   "\"bubble\": %.6g, \"tp_s\": %.9g, \"ep_s\": %.9g, \"dp_s\": %.9g, \"dp_exposed_s\": %.9g, "
                   "\"optim_s\": %.9g", c->pred.step_s, c->pred.samples_per_s, c->memory, c->pred.comm_share,
                   c->pred.bubble, c->pred.tp_s, c->pred.ep_s, c->pred.dp_s, c->pred.dp_exposed_s, c->pred.optim_s);
        if (!c->feasible) {
            printf(", \"why\": ");
            json_string(c->why);
        }
        printf("}");
    }
    printf("]");
}

/* The best feasible candidate whose grid has the kind: 0 data (tp = pp =
 * 1, no expert ranks), 1 tensor (dp = pp = 1), 2 pipeline (dp = tp = 1),
 * 3 any. */
static const struct dl_plan_candidate *best_of_kind(const struct dl_plan_result *r, int kind)
{
    for (int k = 0; k < r->n_feasible; k++) {
        const struct dl_plan_candidate *c = &r->c[r->rank[k]];
        const struct dl_grid_dims *d = &c->layout.dims;
        if (kind == 3 || (kind == 0 && d->tp == 1 && d->pp == 1 && dl_grid_ep(d) == 1) ||
            (kind == 1 && d->dp == 1 && d->pp == 1) ||
            (kind == 2 && d->dp == 1 && d->tp == 1))
            return c;
    }
    return NULL;
}

static int search(const struct dl_net *net, const struct dl_layer_times *t, const struct plan_command *c, int N,
                  int batch, int memory, const struct dl_exec_options *eo, struct dl_tensor_times_request *measure,
                  struct dl_machine *m, struct dl_plan_result *r)
{
    dl_machine_init(m, c->per_node ? c->per_node : N, c->link_alpha, c->link_beta);
    /* layer times measured here run on this host's cores; a FLOP rate is a rank's own (another machine) */
    dl_machine_share_cores(m, N, c->threads, c->cores ? c->cores : c->flops > 0 ? 0 : dl_threads_node_cores(),
                           c->flops <= 0);
    if (c->have_node_link) {
        m->node.alpha = c->node_alpha;
        m->node.beta = c->node_beta;
        m->node.beta_pair = m->node.beta_small = m->node.beta_oneway = m->node.beta_large = 0;
        m->node_source = "alpha and bw given, adding at this host's speed";
        if (c->node_gamma > 0) {
            m->node.gamma = c->node_gamma;
            m->node.gamma_one = m->node.gamma_small = m->node.gamma_large = 0;
            m->node_source = "alpha, bw and add given";
        }
    }
    if (N > m->ranks_per_node && !c->have_link) {
        fprintf(stderr, "dltrain plan: --link: needed when the ranks span nodes (%d ranks, %d per node); e.g. "
                "--link alpha=5us,bw=12.5GB/s\n", N, m->ranks_per_node);
        return 2;
    }
    struct dl_plan_request req = {.g = &net->graph, .times = t, .machine = m, .ranks = N, .batch = batch,
                                  .memory_limit = c->memory, .eo = eo, .optim = &net->train.optim,
                                  .skip_memory = !memory && !c->memory, .grad_dtype = c->grad_dtype,
                                  .zero = net->parallel.zero, .sequence_parallel = net->parallel.sequence_parallel,
                                  .tensor_times = measure ? dl_layer_times_tensor_hook : NULL, .tensor_ctx = measure};
    struct dl_error err = {0};
    if (dl_plan_search(&req, r, &err)) {
        fprintf(stderr, "dltrain plan: %s\n", err.msg);
        return err.code == DL_ERR_SPEC ? 2 : 1;
    }
    return 0;
}

/* The data-parallel step under each model of --compare-consistency on
 * the machine of the plan. */
static int compare_consistency(const struct dl_graph *g, const struct dl_layer_times *t,
                               const struct plan_command *c, const struct dl_machine *m, int N, int batch)
{
    struct dl_consistency_cost cost[MAX_MODELS];
    for (int k = 0; k < c->n_models; k++) {
        struct dl_error err = {0};
        if (dl_plan_consistency(g, t, m, &c->models[k], N, batch, &cost[k], &err)) {
            fprintf(stderr, "dltrain plan: %s\n", err.msg);
            return err.code == DL_ERR_SPEC ? 2 : 1;
        }
    }
    if (c->json)
        printf(",\n\"consistency\": {\"dp\": %d, \"rows\": [", N);
    else
        printf("\nconsistency models, data parallel (dp=%d), mini-batch %d (exchange: communication per step not "
               "hidden, averaged over the model's period):\n%-24s %10s %10s %12s %9s %16s\n", N, batch, "model",
               "step ms", "compute ms", "exchange ms", "exchange", "bytes sent/rank");
    for (int k = 0; k < c->n_models; k++) {
        const struct dl_consistency_cost *x = &cost[k];
        if (c->json) {
            printf("%s\n  {\"model\": ", k ? "," : "");
            json_string(c->model_names[k]);
            printf(", \"step_s\": %.9g, \"compute_s\": %.9g, \"exchange_s\": %.9g, \"bytes_sent\": %.9g, "
                   "\"vector_bytes\": %.9g}", x->step_s, x->compute_s, x->exchange_s, x->bytes_sent, x->vector_bytes);
        } else {
            printf("%-24s %10.3f %10.3f %12.3f %8.1f%% %16.0f\n", c->model_names[k], 1e3 * x->step_s,
                   1e3 * x->compute_s, 1e3 * x->exchange_s, x->step_s > 0 ? 100 * x->exchange_s / x->step_s : 0,
                   x->bytes_sent);
        }
    }
    if (c->json)
        printf("]}");
    return 0;
}

/* The weak-scaling rows: per-rank batch b0 at every count. */
static int scaling(const struct dl_net *net, const struct dl_layer_times *t, const struct plan_command *c, int b0,
                   const struct dl_exec_options *eo)
{
    static const char *const kinds[] = {"data", "tensor", "pipeline", "best"};
    struct dl_machine m;
    struct dl_plan_result one;
    struct plan_command single = *c;
    single.per_node = 0;
    int status = search(net, t, &single, 1, b0, 0, eo, NULL, &m, &one);
    if (status)
        return status;
    if (!one.n_feasible) {
        fprintf(stderr, "dltrain plan: no layout of one rank is feasible at batch %d (%s)\n", b0,
                one.n ? one.c[0].why : "none");
        dl_plan_result_free(&one);
        return 2;
    }
    double t1 = one.c[one.rank[0]].pred.step_s;
    dl_plan_result_free(&one);
    if (c->json)
        printf(",\n\"scaling\": {\"per_rank_batch\": %d, \"one_rank_step_s\": %.9g, \"rows\": [", b0, t1);
    else
        printf("\nweak scaling (batch %d per rank; efficiency = one rank's step time / the step time):\n"
               "%8s %10s %10s %10s %10s   %s\n", b0, "ranks", kinds[0], kinds[1], kinds[2], kinds[3], "best layout");
    for (int k = 0; k < c->n_counts; k++) {
        int N = c->counts[k];
        struct dl_plan_result r;
        status = search(net, t, c, N, b0 * N, 0, eo, NULL, &m, &r);
        if (status)
            return status;
        if (c->json)
            printf("%s\n  {\"ranks\": %d", k ? "," : "", N);
        else
            printf("%8d", N);
        for (int kind = 0; kind < 4; kind++) {
            const struct dl_plan_candidate *b = best_of_kind(&r, kind);
            if (c->json)
                printf(b ? ", \"%s\": %.6g" : ", \"%s\": null", kinds[kind], b ? t1 / b->pred.step_s : 0);
            else if (b)
                printf(" %9.1f%%", 100 * t1 / b->pred.step_s);
            else
                printf(" %10s", "-");
        }
        const struct dl_plan_candidate *b = best_of_kind(&r, 3);
        char name[96] = "none feasible";
        if (b)
            dl_layout_str(&b->layout, name, sizeof name);
        if (c->json) {
            printf(", \"best_layout\": ");
            json_string(name);
            printf("}");
        } else {
            printf("   %s\n", name);
        }
        dl_plan_result_free(&r);
    }
    if (c->json)
        printf("]}");
    return 0;
}

/* --machine FILE: its values where no option gave one; without --ranks,
 * every rank of the machine.  Non-zero (printed) on a bad file or a rank
 * count above the machine's. */
static int take_machine_file(struct plan_command *c)
{
    struct dl_error err = {0};
    const struct dl_machine_file *f = &c->machine;
    char looked[4200];
    c->machine_path = dl_shipped_file(c->machine_path, "machines", c->machine_found, sizeof c->machine_found, looked,
                                      sizeof looked);
    if (*looked) {
        fprintf(stderr, "dltrain plan: --machine %s: no such file here, and no shipped machine %s%s in %s\n",
                c->machine_path, c->machine_path, strstr(c->machine_path, ".yaml") ? "" : ".yaml", looked);
        return 2;
    }
    if (dl_machine_file_load(c->machine_path, &c->machine, &err)) {
        fprintf(stderr, "dltrain plan: --machine: %s\n", err.msg);
        return 2;
    }
    c->per_node = c->per_node ? c->per_node : f->ranks_per_node;
    c->cores = c->cores ? c->cores : f->cores_per_node;
    c->flops = c->flops > 0 ? c->flops : f->flops;
    if (!c->have_link && f->have_link) {
        c->have_link = 1;
        c->link_alpha = f->link_alpha;
        c->link_beta = f->link_beta;
    }
    if (!c->have_node_link && f->have_node_link) {
        c->have_node_link = 1;
        c->node_alpha = f->node_alpha;
        c->node_beta = f->node_beta;
    }
    c->node_gamma = c->node_gamma > 0 ? c->node_gamma : f->node_gamma; /* add= as each value */
    long long ranks = (long long)f->nodes * c->per_node;
    if (!c->n_counts && ranks <= DL_MACHINE_MAX_RANKS)
        c->counts[c->n_counts++] = (int)ranks;
    for (int k = 0; k < c->n_counts; k++)
        if (c->counts[k] > ranks) {
            fprintf(stderr, "dltrain plan: --ranks %d: the machine of %s has %lld ranks (%d nodes x %d per node)\n",
                    c->counts[k], c->machine_path, ranks, f->nodes, c->per_node);
            return 2;
        }
    return 0;
}

static int run(const struct dl_net *net, struct dl_net_options *no, struct plan_command *c)
{
    const struct dl_graph *g = &net->graph;
    int N = c->counts[0], batch = net->train.batch;
    struct dl_exec_options eo;
    dl_net_exec_options(no, &eo);
    struct dl_layer_times t;
    struct dl_error err = {0};
    char summary[256];
    /* layers timed with the threads each rank of a node will have */
    int on_node = c->per_node && c->per_node < N ? c->per_node : N;
    int cores = c->cores ? c->cores : dl_threads_node_cores();
    c->threads = no->threads > 0 ? no->threads : cores / on_node > 1 ? cores / on_node : 1;
    dl_threads_set(c->threads);
    if (dl_layer_times_gather(g, dl_layout_local_batch(batch, N), c->flops, !c->no_db, no->tune.db_path, &eo,
                              &net->train.optim, &t,
                              summary, sizeof summary, &err)) {
        fprintf(stderr, "dltrain plan: %s\n", err.msg);
        return 1;
    }
    struct dl_machine m;
    struct dl_plan_result r;
    /* measured layer times: tensor ranks' too (not for the scaling rows' thousands of ranks) */
    struct dl_tensor_times_request measure = {.batch = batch, .ranks = N, .eo = &eo};
    int status = search(net, &t, c, N, batch, 1, &eo, c->flops > 0 ? NULL : &measure, &m, &r);
    if (status) {
        dl_layer_times_free(&t);
        return status;
    }
    char link[96] = "none";
    if (c->have_link)
        snprintf(link, sizeof link, "alpha %.3g s, %.4g GB/s", m.link_alpha, 1e-9 / m.link_beta);
    if (c->json) {
        printf("{\"net\": ");
        json_string(net->name);
        printf(", \"ranks\": %d, \"ranks_per_node\": %d, \"batch\": %d, \"node_model\": ", N, m.ranks_per_node,
               batch);
        json_string(m.node_source);
        printf(", \"layer_times\": ");
        json_string(summary);
        printf(", \"threads\": %d, \"compute_scale\": %.6g", c->threads, m.compute_scale);
        printf(",\n");
        json_layouts(g, &r);
    } else {
        printf("plan for %s on %d ranks (", net->name, N);
        if (c->machine_path)
            printf("machine %s%s%s: ", c->machine.name, *c->machine.name ? " of " : "", c->machine_path);
        printf("%d per node; within a node: %s; between nodes: %s), mini-batch %d\n%s with %d thread%s per rank",
               m.ranks_per_node, m.node_source, link, batch, summary, c->threads, c->threads > 1 ? "s" : "");
        if (m.compute_scale > 1)
            printf("; a node's ranks share its cores: compute %.3gx slower", m.compute_scale);
        printf("\n");
        print_table(g, &r, c->top);
    }
    if (r.n_feasible == 0) {
        if (c->json)
            printf("}\n");
        if (r.least_memory_at >= 0) {
            char name[96];
            fprintf(stderr, "dltrain plan: no layout of %d ranks fits --memory-per-rank %zu: the smallest needs %zu "
                    "bytes per rank (%s)\n", N, c->memory, r.least_memory,
                    dl_layout_str(&r.c[r.least_memory_at].layout, name, sizeof name));
        } else {
            fprintf(stderr, "dltrain plan: no layout of %d ranks is feasible (%s)\n", N, r.n ? r.c[0].why : "none");
        }
        dl_plan_result_free(&r);
        dl_layer_times_free(&t);
        return 2;
    }
    dl_plan_result_free(&r);
    if (c->n_models)
        status = compare_consistency(g, &t, c, &m, N, batch);
    if (!status && c->n_counts > 1)
        status = scaling(net, &t, c, batch / N > 0 ? batch / N : 1, &eo);
    if (c->json)
        printf("}\n");
    dl_layer_times_free(&t);
    return status;
}

static int take_counts(void *settings, const char *value, struct dl_error *err)
{
    return parse_counts(value, settings, err);
}

static int take_models(void *settings, const char *value, struct dl_error *err)
{
    return parse_models(value, settings, err);
}

static int take_link(void *settings, const char *value, struct dl_error *err)
{
    struct plan_command *c = settings;
    c->have_link = 1;
    return dl_machine_parse_link("--link", value, &c->link_alpha, &c->link_beta, NULL, err);
}

static int take_node_link(void *settings, const char *value, struct dl_error *err)
{
    struct plan_command *c = settings;
    c->have_node_link = 1;
    return dl_machine_parse_link("--node-link", value, &c->node_alpha, &c->node_beta, &c->node_gamma, err);
}

static int take_grad_dtype(void *settings, const char *value, struct dl_error *err)
{
    return dl_precision_parse("--grad-dtype", value, &((struct plan_command *)settings)->grad_dtype, err);
}

/* Parses argv into c and no; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct plan_command *c, struct dl_net_options *no)
{
    static const struct dl_option options[] = {
        DL_OPTION_CALL("ranks", required_argument, take_counts),
        DL_OPTION_INT("ranks-per-node", struct plan_command, per_node, 1, DL_MACHINE_MAX_RANKS),
        DL_OPTION_INT("cores-per-node", struct plan_command, cores, 1, DL_MACHINE_MAX_RANKS),
        DL_OPTION_CALL("link", required_argument, take_link),
        DL_OPTION_CALL("node-link", required_argument, take_node_link),
        DL_OPTION_BYTES("memory-per-rank", struct plan_command, memory, 1, (size_t)-1 / 2),
        DL_OPTION_DOUBLE("flops", struct plan_command, flops, DL_MACHINE_MIN_FLOPS, DL_MACHINE_MAX_FLOPS),
        DL_OPTION_FLAG("no-db", struct plan_command, no_db, 1),
        DL_OPTION_INT("top", struct plan_command, top, 1, 1000),
        DL_OPTION_FLAG("json", struct plan_command, json, 1),
        DL_OPTION_CALL("compare-consistency", required_argument, take_models),
        DL_OPTION_STRING("machine", struct plan_command, machine_path),
        DL_OPTION_CALL("grad-dtype", required_argument, take_grad_dtype), DL_OPTION_END};
    struct dl_command_line line = {"dltrain plan", options, c, no, help, .version = 1};
    return dl_options_parse(&line, argc, argv, NULL);
}

int dl_cli_plan(int argc, char **argv)
{
    struct plan_command c = {.top = 5};
    struct dl_net_options net_options;
    dl_net_options_init(&net_options);
    int status = parse_args(argc, argv, &c, &net_options);
    if (status >= 0)
        return status;
    if (c.machine_path && take_machine_file(&c))
        return 2;
    if (!c.n_counts) {
        fprintf(stderr, "dltrain plan: --ranks N (or --machine FILE) is required\n");
        return 2;
    }
    struct dl_net net;
    status = dl_net_options_load(&net_options, &net, "dltrain plan");
    if (status)
        return status;
    status = run(&net, &net_options, &c);
    dl_net_free(&net);
    return status;
}
