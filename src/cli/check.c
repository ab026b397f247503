/* check.c: `dltrain check --net FILE`: the preflight of a run.  Fails
 * (exit 2, nothing printed but the message) when the run would: a bad file,
 * option, grid or consistency model, data that does not fit the network,
 * memory that cannot be planned or exceeds the machine's (or
 * --memory-per-rank).  Then prints a table of its layers with output
 * shapes, parameter counts and forward FLOPs per sample, the totals, the
 * settings the run would use and the planned memory; with --grid, how a grid's tensor rank 0
 * runs each layer (its pipeline stage, split and parameters) and every grid
 * position's planned memory (check_grid.c); with --consistency and --ranks,
 * what that consistency model does on that many ranks (gossip: its mixing
 * matrices; the network file is optional then). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/check_grid.h"
#include "cli/option_table.h"
#include "cli/options.h"
#include "core/parse.h"
#include "data/dataset.h"
#include "data/tokens.h"
#include "exec/exec.h"
#include "graph/model_flops.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "parallel/strategy.h"
#include "spec/datafile.h"
#include "backends/device.h"

static void help(void)
{
    fputs("Usage: dltrain check --net FILE [options]\n"
          "Validates FILE (every error names file:line:col and exits with status 2) and prints\n"
          "each layer's type, inputs, output shape, trainable parameters and forward FLOPs per sample.\n\n",
          stdout);
    fputs("  --grid dp=D,tp=T,pp=P also print, for that grid (a factor left out is 1), each layer's\n"
          "                        pipeline stage, its tensor-parallel split on tensor rank 0 and how its\n"
          "                        inputs reach it, and its parameters on that rank; then per rank (one\n"
          "                        row per tensor x pipeline position) the layers it holds and the bytes of\n"
          "                        its parameters, gradients, optimizer state and executor arenas, as\n"
          "                        training on that grid plans them (not with --tune)\n"
          "  --ranks N             the world size: for --grid, dp takes the ranks the other factors\n"
          "                        leave; for --consistency, the rank count (default 4)\n"
          "  --pipeline-chunks M   --pipeline-schedule S  as dltrain train's, for the memory per rank\n"
          "  --memory-per-rank SIZE  the memory a rank may plan (default: this machine's memory)\n"
          "  --bytes               sizes as exact byte counts (for scripts) instead of KiB, MiB, GiB\n",
          stdout);
    fputs("  --consistency MODE    with --ranks P: what MODE does on P ranks; for gossip:TOPOLOGY the\n"
          "                        mixing matrix W (row i: the weights rank i gives every rank's vector),\n"
          "                        one per step of a time-varying topology (--net optional then)\n",
          stdout);
    dl_net_options_help(stdout);
}

/* What --consistency does on `ranks` ranks: gossip's mixing matrices (one
 * per step of the period), EASGD's alpha; 2 when the pair is refused. */
static int print_consistency(const char *text, int ranks)
{
    struct dl_parallel_opts po;
    struct dl_error err = {0};
    dl_parallel_opts_defaults(&po);
    if (dl_consistency_parse(text, &po, &err) || dl_parallel_opts_check(&po, ranks, &err)) {
        fprintf(stderr, "dltrain check: %s\n", err.msg);
        return 2;
    }
    if (po.consistency == DL_CONS_EASGD || po.consistency == DL_CONS_EASGD_ASYNC) {
        int workers = dl_easgd_workers(&po, ranks);
        double alpha = dl_easgd_alpha(&po, workers);
        if (po.consistency == DL_CONS_EASGD)
            printf("easgd on %d ranks: every %d step%s x_i -= %g (x_i - c), c += %g sum_i (x_i - c) (beta = %g)\n",
                   ranks, po.easgd_tau, po.easgd_tau > 1 ? "s" : "", alpha, alpha, alpha * workers);
        else
            printf("easgd-async on %d ranks: %d server%s holding the center, %d workers; every %d step%s a worker's "
                   "d = %g (x_i - c), x_i -= d, c += d, one worker at a time\n", ranks, ranks - workers,
                   ranks - workers > 1 ? "s" : "", workers, po.easgd_tau, po.easgd_tau > 1 ? "s" : "", alpha);
        return 0;
    }
    if (po.consistency != DL_CONS_GOSSIP) {
        printf("%s on %d ranks: no mixing matrix (only gossip:TOPOLOGY has one)\n", text, ranks);
        return 0;
    }
    int period = dl_mixing_period(po.topology, ranks), offsets[DL_MIXING_MAX_RANKS];
    double *w = malloc(sizeof *w * (size_t)ranks * (size_t)ranks);
    if (!w) {
        fprintf(stderr, "dltrain check: out of memory for a %d x %d matrix\n", ranks, ranks);
        return 1;
    }
    for (int t = 0; t < period; t++) {
        int peers = dl_mixing_offsets(po.topology, ranks, t, offsets, DL_MIXING_MAX_RANKS);
        printf("gossip:%s on %d ranks", dl_topology_names[po.topology], ranks);
        if (period > 1)
            printf(", step t with t mod %d = %d", period, t);
        printf(": rank i receives from i -");
        for (int k = 0; k < peers; k++)
            printf("%s%d", k ? ", " : " ", offsets[k]);
        printf(" and sends to i +");
        for (int k = 0; k < peers; k++)
            printf("%s%d", k ? ", " : " ", offsets[k]);
        printf(" (mod %d); %d x %.0f bytes per parameter per step\nW =\n", ranks, peers, (double)dl_dtype_size(DL_F32));
        dl_mixing_matrix(po.topology, ranks, t, w);
        for (int i = 0; i < ranks; i++) {
            for (int j = 0; j < ranks; j++) {
                if (w[i * ranks + j] > 0)
                    printf(" %6.4f", w[i * ranks + j]);
                else
                    printf(" %6s", "0");
            }
            printf("\n");
        }
    }
    free(w);
    return 0;
}

static const char *yes_no(int v)
{
    return v ? "true" : "false";
}

/* One data.train or data.eval transform. */
static void print_transform(const char *what, const struct dl_transform_spec *t)
{
    printf("  %s: crop %s, scale [%g, %g], ratio [%g, %g], resize %g, flip %s\n", what, dl_crop_names[t->crop],
           t->scale[0], t->scale[1], t->ratio[0], t->ratio[1], t->resize, yes_no(t->flip));
}

/* The settings the run would use, after --set and the options, under the
 * network file's keys (the optimizer's and schedule's own keys only). */
static void print_settings(const struct dl_net *net)
{
    const struct dl_train_spec *t = &net->train;
    const struct dl_optim_spec *o = &t->optim;
    const struct dl_sched_spec *sc = &t->sched;
    const struct dl_data_spec *d = &net->data;
    const struct dl_parallel_spec *p = &net->parallel;
    printf("settings (the file, --set and the options):\n");
    printf("  train: batch %d, epochs %d, max_steps %ld, seed %llu, device %s, precision %s, clip_grad_norm %g\n",
           t->batch, t->epochs, t->max_steps, (unsigned long long)t->seed, dl_device_names[t->device],
           dl_train_precision_names[t->precision], t->clip_grad_norm);
    if (t->lr_scaling != DL_LR_SCALING_NONE)
        printf("  train: lr_scaling %s, reference_batch %d (the base rate %g)\n", dl_lr_scaling_names[t->lr_scaling],
               t->reference_batch, dl_schedule_base_lr(t));
    printf("  train.optimizer: type %s, lr %g, weight_decay %g", dl_optim_names[o->kind], o->lr, o->weight_decay);
    for (int k = 0, first = 1; dl_no_decay_names[k]; k++)
        if (o->no_decay >> k & 1) {
            printf("%s%s", first ? ", no_decay [" : ", ", dl_no_decay_names[k]);
            first = 0;
        }
    if (o->no_decay)
        printf("]");
    if (o->kind == DL_OPTIM_SGD || o->kind == DL_OPTIM_RMSPROP || o->kind == DL_OPTIM_LARS || o->kind == DL_OPTIM_MUON)
        printf(", momentum %g", o->momentum);
    if (o->kind == DL_OPTIM_LARS)
        printf(", trust_coefficient %g", o->trust_coefficient);
    if (o->kind == DL_OPTIM_SGD || o->kind == DL_OPTIM_MUON)
        printf(", nesterov %s", yes_no(o->nesterov));
    if (o->kind == DL_OPTIM_ADAM || o->kind == DL_OPTIM_ADAMW || o->kind == DL_OPTIM_LAMB || o->kind == DL_OPTIM_MUON)
        printf(", beta1 %g, beta2 %g", o->beta1, o->beta2);
    if (o->kind == DL_OPTIM_RMSPROP)
        printf(", alpha %g", o->alpha);
    if (o->kind != DL_OPTIM_SGD && o->kind != DL_OPTIM_LARS)
        printf(", eps %g", o->eps);
    printf("\n  train.schedule: type %s, warmup_epochs %g", dl_sched_names[sc->kind], sc->warmup_epochs);
    if (sc->kind == DL_SCHED_STEP)
        printf(", step_epochs %g, gamma %g", sc->step_epochs, sc->gamma);
    if (sc->kind == DL_SCHED_COSINE || sc->kind == DL_SCHED_WSD)
        printf(", min_lr %g", sc->min_lr);
    if (sc->kind == DL_SCHED_WSD)
        printf(", decay_fraction %g", sc->decay_fraction);
    printf("\n  data: dataset %s (format %s), dir '%s', normalize %s, threads %d, prefetch %d, bad_samples %s, "
           "limit_train %ld, limit_test %ld", d->name[0] ? d->name : dl_dataset_names[d->kind], dl_dataset_names[d->kind],
           d->dir, yes_no(d->normalize), d->threads, d->prefetch, dl_bad_sample_names[d->bad_samples], d->limit_train,
           d->limit_test);
    if (d->has_stats)
        printf(", mean [%g, %g, %g], std [%g, %g, %g]", d->mean[0], d->mean[1], d->mean[2], d->std[0], d->std[1],
               d->std[2]);
    if (d->kind == DL_DATASET_SYNTHETIC)
        printf(", train_samples %ld, test_samples %ld", d->synthetic_train, d->synthetic_test);
    if (d->kind == DL_DATASET_TEXT || d->kind == DL_DATASET_TOKENS)
        printf(", validation %g", d->validation);
    if (d->kind == DL_DATASET_TOKENS)
        printf(", train_files '%s', val_files '%s'", d->train_files[0] ? d->train_files : DL_TOKENS_TRAIN_FILES,
               d->val_files[0] ? d->val_files : DL_TOKENS_VAL_FILES);
    if (d->kind == DL_DATASET_IDX)
        printf(", train_images '%s', train_labels '%s', test_images '%s', test_labels '%s'", d->train_images,
               d->train_labels, d->test_images, d->test_labels);
    printf("\n");
    if (d->kind == DL_DATASET_IMAGEFOLDER) {
        print_transform("data.train", &d->train_transform);
        print_transform("data.eval", &d->eval_transform);
    }
    printf("  parallel: strategy %s, dp %d, tp %d, pp %d, micro_batches %d (0: decided when the job starts), "
           "sequence_parallel %s, zero %d, recompute %s\n", dl_parallel_names[p->kind], p->dp, p->tp, p->pp,
           p->micro_batches, p->sequence_parallel ? "true" : "false", p->zero, dl_recompute_names[p->recompute]);
}

static void human(double v, char *buf, size_t n);

/* What check decides before it prints: the memory of one process (or of
 * every grid position), against the limit; without a grid, the dtype each
 * layer's output is stored in and the kernel that makes it. */
struct preflight {
    size_t arena, unplanned;     /* one process's executor arena, and without reuse */
    double params;               /* parameters, their gradients and the optimizer's state, bytes */
    double peak;                 /* one process's: arena + params */
    double limit;                /* bytes per rank */
    const char *limit_from;      /* "--memory-per-rank" or "this machine's memory" */
    struct dl_check_grid_plan grid;
    enum dl_dtype *dtype;        /* [layer], NULL with a grid */
    const struct dl_kernel **kernel; /* [layer], NULL with a grid */
    int casts;                   /* cast steps between dtypes */
};

/* The header and the layer table; the run's dtypes where pf knows them. */
static void print_layers(const struct dl_net *net, const char *path, const struct preflight *pf)
{
    const struct dl_graph *g = &net->graph;
    char shape[64];
    printf("network %s (%s): input %s, %d classes, %d layers\n", net->name, path,
           dl_shape_str(g->input, shape, sizeof shape), g->classes, g->n);
    printf("%-4s %-28s %-22s %-30s %-14s %-5s %12s %10s\n", "#", "layer", "type", "inputs", "output", "dtype",
           "params", "FLOPs");
    double flops = 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        char inputs[256] = "";
        for (int k = 0; k < l->n_in; k++) {
            const char *nm = l->in[k] == DL_GRAPH_INPUT ? "input" : g->layers[l->in[k]].name;
            strncat(inputs, k ? "," : "", sizeof inputs - strlen(inputs) - 1);
            strncat(inputs, nm, sizeof inputs - strlen(inputs) - 1);
        }
        char f[32];
        human(l->flops, f, sizeof f);
        flops += l->flops;
        struct dl_shape dims = l->out_shape;
        dims.dtype = DL_F32; /* the dtype in its column */
        enum dl_dtype dtype = pf->dtype ? pf->dtype[i] : l->out_shape.dtype;
        printf("%-4d %-28s %-22s %-30s %-14s %-5s %12ld %10s\n", i, l->name, l->kind->name, inputs,
               dl_shape_str(dims, shape, sizeof shape), dl_dtype_name(dtype), dl_layer_param_count(l), f);
    }
    char f[32];
    human(flops, f, sizeof f);
    printf("total: %ld trainable parameters, %s FLOPs per sample (forward)\n", dl_graph_param_count(g), f);
    if (dl_graph_active_param_count(g) != dl_graph_param_count(g))
        printf("active: %ld parameters a position uses (the experts it goes to)\n", dl_graph_active_param_count(g));
    double per_token = dl_graph_model_flops_per_token(g);
    if (per_token > 0) {
        char t[32];
        human(per_token, t, sizeof t);
        printf("model FLOPs per token: %s (a training step's: 3 x the products with weights, plus attention's "
               "12 C T; what MFU counts)\n", t);
    }
    if (net->train.precision && pf->kernel) {
        char line[512];
        dl_precision_summary(net, pf->kernel, line, sizeof line);
        printf("%s, %d casts between dtypes\n", line, pf->casts);
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (p->shares)
                printf("tied: %s.%s is %s.%s (counted once)\n", g->layers[i].name, p->name,
                       g->layers[p->share_layer].name, g->layers[p->share_layer].param[p->share_param].name);
        }
}

/* The machine's physical memory in bytes (0 when unknown). */
static double machine_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* The refusal of a plan over the limit; returns 2. */
static int over_limit(double peak, const char *per, int batch, const struct preflight *pf)
{
    char a[32], b[32];
    fprintf(stderr, "dltrain check: the planned peak, %s per %s at batch %d, exceeds %s (%s): lower --batch, split "
            "the network over ranks (--grid) or micro-batch it (--tune --workspace-limit)\n",
            dl_bytes_str(peak, a, sizeof a), per, batch, pf->limit_from, dl_bytes_str(pf->limit, b, sizeof b));
    return 2;
}

/* Fails (exit status, message on stderr) when the run would fail: a bad
 * grid or consistency model, data that does not fit the network, memory
 * that cannot be planned or exceeds the limit (limit_option: bytes, 0 for
 * the machine's memory). */
static int preflight(const struct dl_net *net, const struct dl_check_grid *grid, const char *consistency,
                     size_t limit_option, const struct dl_exec_options *eo, struct preflight *out)
{
    const struct dl_graph *g = &net->graph;
    struct dl_error err = {0};
    memset(out, 0, sizeof *out);
    if (consistency) {
        struct dl_parallel_opts po;
        dl_parallel_opts_defaults(&po);
        if (dl_consistency_parse(consistency, &po, &err) ||
            dl_parallel_opts_check(&po, grid->ranks ? grid->ranks : 4, &err)) {
            fprintf(stderr, "dltrain check: %s\n", err.msg);
            return 2;
        }
    }
    if (grid->grid && dl_check_grid_plan(net, grid, eo, &out->grid, &err)) {
        fprintf(stderr, "dltrain check: %s\n", err.msg);
        return err.code == DL_ERR_SPEC ? 2 : 1;
    }
    struct dl_data_want want = {g->input, g->classes, g->positions, g->id_limit, .float_targets = g->float_targets};
    if (dl_dataset_fits(&net->data, &want, &err)) {
        fprintf(stderr, "dltrain check: data: %s\n", err.msg);
        return 2;
    }
    out->limit = limit_option ? (double)limit_option : machine_memory();
    out->limit_from = limit_option ? "--memory-per-rank" : "this machine's memory";
    if (grid->grid) { /* the grid's ranks, planned above */
        if (out->limit > 0 && out->grid.peak > out->limit)
            return over_limit(out->grid.peak, "rank", net->train.batch, out);
        return 0;
    }
    struct dl_exec plan;
    if (dl_exec_plan(&plan, g, net->train.batch, eo, &err)) {
        fprintf(stderr, "dltrain check: the memory of batch %d cannot be planned: %s\n", net->train.batch, err.msg);
        return 2;
    }
    out->arena = plan.stats.arena_bytes, out->unplanned = plan.stats.unplanned_bytes;
    out->dtype = malloc(sizeof *out->dtype * (size_t)g->n);
    out->kernel = malloc(sizeof *out->kernel * (size_t)g->n);
    for (int i = 0; out->dtype && out->kernel && i < g->n; i++)
        out->dtype[i] = plan.act[i].shape.dtype, out->kernel[i] = plan.kernel[i];
    out->casts = dl_exec_casts(&plan);
    dl_exec_free(&plan);
    if (!out->dtype || !out->kernel) {
        fprintf(stderr, "dltrain check: out of memory\n");
        return 1;
    }
    double trainable = 0, state = 0;
    for (int i = 0; i < g->n; i++)
        dl_layer_param_tally(&g->layers[i], &trainable, &state);
    out->params = dl_optim_param_bytes(&net->train.optim, trainable, trainable, trainable, state, 1);
    out->peak = (double)out->arena + out->params;
    if (out->limit > 0 && out->peak > out->limit)
        return over_limit(out->peak, "process", net->train.batch, out);
    return 0;
}

/* One process's planned memory (after the preflight). */
static void print_memory(const struct dl_net *net, const struct preflight *pf, int bytes)
{
    char peak[32], arena[32], unplanned[32], params[32], limit[32];
    printf("planned peak: %s for batch %d on one process (arena %s: activations, gradients, kernel state and "
           "workspace, %s without reuse; parameters, gradients and optimizer state %s); limit %s (%s)\n",
           dl_check_size(pf->peak, bytes, peak, sizeof peak), net->train.batch,
           dl_check_size((double)pf->arena, bytes, arena, sizeof arena),
           dl_check_size((double)pf->unplanned, bytes, unplanned, sizeof unplanned),
           dl_check_size(pf->params, bytes, params, sizeof params), dl_check_size(pf->limit, bytes, limit, sizeof limit),
           pf->limit_from);
}

static void human(double v, char *buf, size_t n)
{
    if (v >= 1e9)
        snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

/* Everything the command line asks for. */
struct check_command {
    struct dl_net_options net_options;
    struct dl_check_grid grid;
    const char *consistency;  /* --consistency */
    size_t memory_limit;      /* --memory-per-rank */
};

static int take_schedule(void *settings, const char *value, struct dl_error *err)
{
    struct dl_check_grid *grid = &((struct check_command *)settings)->grid;
    return dl_schedule_parse(value, &grid->schedule, &grid->V, err);
}

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct check_command *cmd)
{
    static const struct dl_option options[] = {
        DL_OPTION_STRING("grid", struct check_command, grid.grid),
        DL_OPTION_STRING("consistency", struct check_command, consistency),
        DL_OPTION_INT("ranks", struct check_command, grid.ranks, 1, 1 << 20),
        DL_OPTION_INT("pipeline-chunks", struct check_command, grid.chunks, 1, DL_SCHED_MAX_CHUNKS),
        DL_OPTION_CALL("pipeline-schedule", required_argument, take_schedule),
        DL_OPTION_BYTES("memory-per-rank", struct check_command, memory_limit, 1, (size_t)1 << 60),
        DL_OPTION_FLAG("bytes", struct check_command, grid.bytes, 1), DL_OPTION_END};
    struct dl_command_line line = {"dltrain check", options, cmd, &cmd->net_options, help, .version = 1};
    return dl_options_parse(&line, argc, argv, NULL);
}

/* The network file's grid (parallel: dp, tp, pp) as --grid spells it into
 * buf; "" when the file has none. */
static const char *file_grid(const struct dl_parallel_spec *ps, char *buf, size_t size)
{
    int n = 0;
    buf[0] = '\0';
    if (ps->dp)
        n += snprintf(buf + n, size - (size_t)n, "dp=%d", ps->dp);
    if (ps->ep)
        n += snprintf(buf + n, size - (size_t)n, "%sep=%d", n ? "," : "", ps->ep);
    if (ps->tp)
        n += snprintf(buf + n, size - (size_t)n, "%stp=%d", n ? "," : "", ps->tp);
    if (ps->pp)
        snprintf(buf + n, size - (size_t)n, "%spp=%d", n ? "," : "", ps->pp);
    return buf;
}

int dl_cli_check(int argc, char **argv)
{
    struct check_command cmd = {.grid = {.schedule = DL_SCHED_1F1B, .V = 1}};
    dl_net_options_init(&cmd.net_options);
    int status = parse_args(argc, argv, &cmd);
    if (status >= 0)
        return status;
    struct dl_check_grid grid = cmd.grid;
    const char *consistency = cmd.consistency;
    size_t memory_limit = cmd.memory_limit;
    if (consistency && !cmd.net_options.net_path)
        return print_consistency(consistency, grid.ranks ? grid.ranks : 4);
    struct dl_net net;
    status = dl_net_options_load(&cmd.net_options, &net, "dltrain check");
    if (status)
        return status;
    /* Without --grid, the network file's grid (parallel: dp, tp, pp) is the run's. */
    char grid_of_file[96];
    const struct dl_parallel_spec *ps = &net.parallel;
    if (!grid.grid && (ps->dp || ps->tp || ps->pp || ps->ep))
        grid.grid = file_grid(ps, grid_of_file, sizeof grid_of_file);
    /* Everything that can fail is decided before anything is printed. */
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd.net_options, &eo);
    struct preflight pf;
    status = preflight(&net, &grid, consistency, memory_limit, &eo, &pf);
    if (!status) {
        print_layers(&net, cmd.net_options.net_path, &pf);
        print_settings(&net);
        if (cmd.net_options.precision_auto) { /* what auto measured */
            char line[512];
            dl_precision_describe(&cmd.net_options.precision_probe, 1, line, sizeof line);
            printf("  %s\n", line);
        }
        if (!grid.grid)
            print_memory(&net, &pf, grid.bytes);
        if (grid.grid)
            dl_check_grid_print(&net, &grid, &pf.grid);
        if (consistency) {
            printf("\n");
            status = print_consistency(consistency, grid.ranks ? grid.ranks : 4);
        }
    }
    dl_check_grid_plan_free(&pf.grid);
    free(pf.dtype);
    free(pf.kernel);
    dl_net_free(&net);
    return status;
}
