/* bench_conv.c: `dltrain bench conv`: convolution suites under the tuner, as
 * in the mu-cuDNN paper: for each shape (the DeepBench training list, the
 * ResNet-50 layers, or one --shape) the best undivided time and the
 * micro-batched time of forward + backward data + backward weights within a
 * workspace limit, their speedup and workspaces, then the geometric-mean
 * speedup.  Measurements come from (and go to) the tuning database. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "core/parse.h"
#include "core/shipped.h"
#include "core/threads.h"
#include "spec/netfile.h"
#include "tune/tune.h"

#define PROG "dltrain bench conv"

/* One convolution: batch n, input c x h x w, k filters of r x s (height x width). */
struct shape {
    char name[64];
    int n, c, h, w, k, r, s, ph, pw, sh, sw, count;
};

static void help(void)
{
    fputs("Usage: dltrain bench conv --suite deepbench|resnet50 [--batch N] [options]\n"
          "       dltrain bench conv --shape N,C,H,W,K,R,S[,PAD_H,PAD_W[,STRIDE_H,STRIDE_W]] [options]\n"
          "Best undivided vs micro-batched time (forward + backward data + backward weights) per\n"
          "convolution within a workspace limit, the speedup, and the geometric mean.\n\n"
          "  --suite NAME          deepbench: the DeepBench training list (its own batch sizes);\n"
          "                        resnet50: the 20 distinct conv shapes of ResNet-50 (batch from --batch)\n"
          "  --suite-file FILE     read the suite from FILE instead of the installed copy\n"
          "  --shape ...           one convolution (R: filter height, S: filter width)\n"
          "  --batch N             mini-batch (resnet50 default 16; overrides DeepBench's)\n"
          "  --rows N              only the first N rows of the suite\n"
          "  --workspace-limit BYTES  per direction (default: none)\n"
          "  --tune-policy P       undivided, powerOfTwo (default) or all\n"
          "  --tune-db FILE        tuning database (default ~/.cache/dltrain/tune.sqlite)\n"
          "  --threads N           threads (default: all available cores)\n"
          "  --repeats N           timed calls per candidate (default 5)\n"
          "  --no-measure          use the database only\n"
          "  --csv                 comma-separated output for plotting\n",
          stdout);
}

/* --shape: a comma list of at most max integers in [0, 2^24]; returns their
 * number, or -1. */
static int parse_ints(const char *text, int *v, int max)
{
    struct dl_error err;
    for (int n = 0;; n++) {
        const char *comma = strchr(text, ',');
        size_t len = comma ? (size_t)(comma - text) : strlen(text);
        char item[32];
        if (n == max || len >= sizeof item)
            return -1;
        memcpy(item, text, len);
        item[len] = 0;
        if (dl_parse_int("--shape", item, 0, 1 << 24, &v[n], &err))
            return -1;
        if (!comma)
            return n + 1;
        text = comma + 1;
    }
}

/* bench/data/FILE among the shipped files (core/shipped.h). */
static FILE *open_suite(const char *file, char *path, size_t size)
{
    char rel[512];
    snprintf(rel, sizeof rel, "bench/data/%s", file);
    return dl_shipped_find(rel, path, size, NULL, 0) ? fopen(path, "r") : NULL;
}

static int column(char *const *cols, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(cols[i], name) == 0)
            return i;
    return -1;
}

static int split_csv(char *line, char **cols, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *p = strtok(line, ","); p && n < max; p = strtok(NULL, ","))
        cols[n++] = p;
    return n;
}

/* Reads a suite CSV (DeepBench or ResNet-50 columns, see bench/data/README.md). */
static int read_suite(FILE *f, const char *path, int resnet, int batch, struct shape **out, int *n_out)
{
    char line[512], *hdr[32], *v[32];
    char header[512];
    if (!fgets(header, sizeof header, f)) {
        fprintf(stderr, PROG ": %s: empty file\n", path);
        return 1;
    }
    int nh = split_csv(header, hdr, 32);
    static const char *const db_cols[] = {"n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w"};
    static const char *const rn_cols[] = {"c", "h", "w", "k", "r", "s", "pad", "stride", "count", "name"};
    int idx[11];
    int ncol = resnet ? 10 : 11;
    for (int i = 0; i < ncol; i++)
        if ((idx[i] = column(hdr, nh, resnet ? rn_cols[i] : db_cols[i])) < 0) {
            fprintf(stderr, PROG ": %s: no column '%s'\n", path, resnet ? rn_cols[i] : db_cols[i]);
            return 1;
        }
    int n = 0, cap = 0;
    struct shape *s = NULL;
    for (int row = 2; fgets(line, sizeof line, f); row++) {
        if (line[0] == '\n' || line[0] == '#')
            continue;
        int nv = split_csv(line, v, 32);
        if (nv < nh) {
            fprintf(stderr, PROG ": %s:%d: expected %d fields, found %d\n", path, row, nh, nv);
            free(s);
            return 1;
        }
        if (n == cap) {
            struct shape *t = realloc(s, sizeof *s * (size_t)(cap = cap ? 2 * cap : 64));
            if (!t) {
                free(s);
                return 1;
            }
            s = t;
        }
        struct shape *x = &s[n++];
        memset(x, 0, sizeof *x);
        if (resnet) {
            int a[9];
            for (int i = 0; i < 9; i++)
                a[i] = atoi(v[idx[i]]);
            *x = (struct shape){.n = batch, .c = a[0], .h = a[1], .w = a[2], .k = a[3], .r = a[4], .s = a[5],
                                .ph = a[6], .pw = a[6], .sh = a[7], .sw = a[7], .count = a[8]};
            snprintf(x->name, sizeof x->name, "%s", v[idx[9]]);
        } else {
            *x = (struct shape){.n = batch ? batch : atoi(v[idx[0]]), .c = atoi(v[idx[1]]), .h = atoi(v[idx[2]]),
                                .w = atoi(v[idx[3]]), .k = atoi(v[idx[4]]), .r = atoi(v[idx[5]]),
                                .s = atoi(v[idx[6]]), .ph = atoi(v[idx[7]]), .pw = atoi(v[idx[8]]),
                                .sh = atoi(v[idx[9]]), .sw = atoi(v[idx[10]]), .count = 1};
            snprintf(x->name, sizeof x->name, "deepbench-%d", row - 1);
        }
    }
    *out = s;
    *n_out = n;
    return 0;
}

/* Tunes the one convolution of a tiny network made for x. */
static int tune_shape(const struct shape *x, const struct dl_tune_options *o, struct dl_tune_layer_report *lr,
                      char plans[DL_N_DIRS][128], struct dl_error *err)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "name: bench-conv\ninput: {shape: [%d, %d, %d], classes: %d}\nlayers:\n"
             "  - {name: conv, type: conv, filters: %d, kernel: [%d, %d], pad: [%d, %d], stride: [%d, %d], bias: false}\n"
             "  - {type: global_avgpool}\nloss: softmax_cross_entropy\ntrain: {batch: %d}\n",
             x->c, x->h, x->w, x->k, x->k, x->r, x->s, x->ph, x->pw, x->sh, x->sw, x->n);
    struct dl_net net;
    int rc = dl_net_load_string(x->name, yaml, &net, err);
    if (rc)
        return rc;
    struct dl_mbplan plan;
    struct dl_tune_report rep;
    rc = dl_tune_net(&net.graph, x->n, o, &plan, &rep, err);
    if (!rc) {
        *lr = rep.layer[0];
        for (int d = 0; d < DL_N_DIRS; d++)
            dl_mbplan_dir_str(&plan.layer[0].dir[d], plans[d], sizeof plans[d]);
        dl_tune_report_free(&rep);
        dl_mbplan_free(&plan);
    }
    dl_net_free(&net);
    return rc;
}

static int run_suite(const struct shape *s, int n, const struct dl_tune_options *o, int csv)
{
    double log_sum = 0, t_undiv = 0, t_micro = 0;
    int counted = 0, no_undiv = 0, failed = 0;
    if (csv)
        printf("name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,count,limit_bytes,undivided_ms,undivided_ws,"
               "micro_ms,micro_ws,speedup,fwd_plan,bwd_data_plan,bwd_weights_plan\n");
    else
        printf("%-34s %-28s %10s %9s %10s %9s %8s  %s\n", "layer", "N,C,HxW,K,RxS,pad,stride", "undiv ms", "MiB",
               "micro ms", "MiB", "speedup", "plan fwd | bwd-data | bwd-weights");
    for (int i = 0; i < n; i++) {
        const struct shape *x = &s[i];
        struct dl_tune_layer_report lr;
        char plans[DL_N_DIRS][128];
        struct dl_error err = {0};
        if (tune_shape(x, o, &lr, plans, &err)) {
            fprintf(stderr, PROG ": %s: %s\n", x->name, err.msg);
            failed++;
            continue;
        }
        double sp = lr.undivided_s > 0 && lr.time_s > 0 ? lr.undivided_s / lr.time_s : NAN;
        no_undiv += lr.undivided_s <= 0;
        if (!isnan(sp)) {
            log_sum += log(sp);
            counted++;
            t_undiv += lr.undivided_s * x->count;
            t_micro += lr.time_s * x->count;
        }
        if (csv) {
            printf("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%zu,%.4f,%zu,%.4f,%zu,%.4f,%s,%s,%s\n", x->name, x->n, x->c,
                   x->h, x->w, x->k, x->r, x->s, x->ph, x->pw, x->sh, x->sw, x->count, o->workspace_limit,
                   1e3 * lr.undivided_s, lr.undivided_ws, 1e3 * lr.time_s, lr.ws, sp, plans[0], plans[1], plans[2]);
        } else {
            char geo[64];
            snprintf(geo, sizeof geo, "%d,%d,%dx%d,%d,%dx%d,%d,%d", x->n, x->c, x->h, x->w, x->k, x->r, x->s, x->ph,
                     x->sh);
            printf("%-34s %-28s %10.3f %9.2f %10.3f %9.2f %7.2fx  %s | %s | %s\n", x->name, geo, 1e3 * lr.undivided_s,
                   lr.undivided_ws / 1048576.0, 1e3 * lr.time_s, lr.ws / 1048576.0, sp, plans[0], plans[1], plans[2]);
        }
        fflush(stdout);
    }
    if (counted)
        fprintf(csv ? stderr : stdout,
                "geometric-mean speedup: %.3fx over %d shapes (total time, weighted by count: %.3fx); "
                "%d shapes without an undivided plan within the limit\n",
                exp(log_sum / counted), counted, t_micro > 0 ? t_undiv / t_micro : 0, no_undiv);
    return failed ? 1 : 0;
}

/* The command line: the suite or shape, and the tuner's options. */
struct conv_command {
    struct dl_net_options net_options; /* --threads, the tuner's options */
    const char *suite, *suite_file, *shape;
    int csv, rows, batch;
};

static const struct dl_option options[] = {
    DL_OPTION_STRING("suite", struct conv_command, suite),
    DL_OPTION_STRING("suite-file", struct conv_command, suite_file),
    DL_OPTION_STRING("shape", struct conv_command, shape),
    DL_OPTION_FLAG("csv", struct conv_command, csv, 1),
    DL_OPTION_INT("rows", struct conv_command, rows, 1, 1 << 24),
    DL_OPTION_INT("repeats", struct conv_command, net_options.tune.repeats, 1, 1 << 24),
    DL_OPTION_FLAG("no-measure", struct conv_command, net_options.tune.no_measure, 1),
    DL_OPTION_INT("batch", struct conv_command, batch, 1, 1 << 24),
    DL_OPTION_SHARED("threads", required_argument, DL_OPT_THREADS),
    DL_OPTION_HELP,
    DL_OPTION_SHARED("workspace-limit", required_argument, DL_OPT_WORKSPACE_LIMIT),
    DL_OPTION_SHARED("tune-db", required_argument, DL_OPT_TUNE_DB),
    DL_OPTION_SHARED("tune-policy", required_argument, DL_OPT_TUNE_POLICY),
    DL_OPTION_END};

/* Parses argv into cmd (one of --suite and --shape); -1 to go on, else the exit status. */
static int parse_args(struct conv_command *cmd, int argc, char **argv)
{
    dl_net_options_init(&cmd->net_options);
    struct dl_command_line line = {PROG, options, cmd, &cmd->net_options, help, .shared_listed = 1};
    int first;
    int status = dl_options_parse(&line, argc, argv, &first);
    if (status >= 0)
        return status;
    const char *suite = cmd->suite;
    if (!!suite + !!cmd->shape != 1 || (suite && strcmp(suite, "deepbench") != 0 && strcmp(suite, "resnet50") != 0)) {
        fprintf(stderr, PROG ": expected --suite deepbench, --suite resnet50 or --shape (try --help)\n");
        return 2;
    }
    return -1;
}

/* --shape's one convolution into *out; -1 to go on, else the exit status. */
static int one_shape(const struct conv_command *cmd, struct shape **out, int *n)
{
    int v[11] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    int k = parse_ints(cmd->shape, v, 11);
    if (k != 7 && k != 9 && k != 11) {
        fprintf(stderr, PROG ": --shape: expected N,C,H,W,K,R,S[,PAD_H,PAD_W[,STRIDE_H,STRIDE_W]], found '%s'\n",
                cmd->shape);
        return 2;
    }
    struct shape *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    *s = (struct shape){.n = cmd->batch ? cmd->batch : v[0], .c = v[1], .h = v[2], .w = v[3], .k = v[4], .r = v[5],
                        .s = v[6], .ph = v[7], .pw = v[8], .sh = v[9], .sw = v[10], .count = 1};
    snprintf(s->name, sizeof s->name, "shape");
    *out = s;
    *n = 1;
    return -1;
}

/* --suite's convolutions (from --suite-file or the shipped copy, --rows of
 * them) into *out; -1 to go on, else the exit status. */
static int suite_shapes(const struct conv_command *cmd, struct shape **out, int *n)
{
    int resnet = strcmp(cmd->suite, "resnet50") == 0;
    char path[1200];
    const char *file = resnet ? "resnet50_conv_layers.csv" : "deepbench_conv_train.csv";
    FILE *f = cmd->suite_file ? fopen(cmd->suite_file, "r") : open_suite(file, path, sizeof path);
    if (!f) {
        fprintf(stderr, PROG ": cannot open %s (give --suite-file FILE)\n", cmd->suite_file ? cmd->suite_file : file);
        return 1;
    }
    int rc = read_suite(f, cmd->suite_file ? cmd->suite_file : path, resnet, resnet && !cmd->batch ? 16 : cmd->batch,
                        out, n);
    fclose(f);
    if (rc)
        return 1;
    if (cmd->rows && cmd->rows < *n)
        *n = cmd->rows;
    return -1;
}

int dl_cli_bench_conv(int argc, char **argv)
{
    struct conv_command cmd = {0};
    int status = parse_args(&cmd, argc, argv);
    if (status >= 0)
        return status;
    dl_threads_set(cmd.net_options.threads);
    struct shape *s = NULL;
    int n = 0;
    status = cmd.shape ? one_shape(&cmd, &s, &n) : suite_shapes(&cmd, &s, &n);
    if (status >= 0)
        return status;
    struct dl_tune_options o = cmd.net_options.tune;
    o.all_dirs = 1;
    if (!cmd.csv)
        printf("bench conv: %d shapes, %d threads, policy %s, workspace limit %s%zu bytes\n", n, dl_threads_get(),
               dl_tune_policy_names[o.policy], o.workspace_limit ? "" : "none, ", o.workspace_limit);
    int rc = run_suite(s, n, &o, cmd.csv);
    free(s);
    return rc;
}
