/* plot.c: `dltrain plot RUN.jsonl... -o FILE.svg|.pdf|.png`: the --metrics
 * JSON lines of one or more runs as charts (plot/chart.h), overlaid, one
 * colour per run: loss against steps and against seconds, accuracy, and
 * throughput (tokens/s for token inputs), each with the raw training values
 * faint under TensorBoard's smoothing (an exponential moving average with its
 * start-up bias removed) and the validation points on top.  A parameter
 * server's run, whose workers each report their steps, is drawn as the
 * workers' mean at each step. */
#include "cli/cli.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "cli/tune_table.h"
#include "io/metrics_read.h"
#include "plot/chart.h"

#define PROG "dltrain plot"

/* One run: its metrics, and what the charts draw of them (accuracy in
 * percent, TensorBoard's smoothing). */
struct run {
    char label[256];
    struct dl_metrics_run m;
    struct dl_column acc, vacc, loss_smooth, acc_smooth, dropped; /* dropped: in percent */
};

static void run_free(struct run *r)
{
    dl_metrics_run_free(&r->m);
    free(r->acc.v), free(r->vacc.v), free(r->loss_smooth.v), free(r->acc_smooth.v), free(r->dropped.v);
}

static int percent(const struct dl_column *x, struct dl_column *out)
{
    for (int i = 0; i < x->n; i++)
        if (dl_column_push(out, 100 * x->v[i]))
            return -1;
    return 0;
}

/* TensorBoard's smoothing of y into out: an exponential moving average
 * with its start-up bias removed. */
static int smooth(const struct dl_column *y, double weight, struct dl_column *out)
{
    double last = 0, debias = 1;
    int k = 0;
    for (int i = 0; i < y->n; i++) {
        double v = y->v[i];
        if (isfinite(v)) {
            last = last * weight + (1 - weight) * v;
            debias *= weight;
            k++;
        }
        if (dl_column_push(out, k ? last / (1 - debias) : NAN))
            return -1;
    }
    return 0;
}

/* Reads path into r; returns 0, or the exit status after the message. */
static int read_run(const char *path, struct run *r, double weight)
{
    struct dl_error err = {0};
    if (dl_metrics_read(path, &r->m, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return err.code == DL_ERR_NOMEM ? 1 : 2;
    }
    if (percent(&r->m.accuracy, &r->acc) || percent(&r->m.vaccuracy, &r->vacc) ||
        percent(&r->m.expert_dropped, &r->dropped) ||
        smooth(&r->m.loss, weight, &r->loss_smooth) || smooth(&r->acc, weight, &r->acc_smooth)) {
        fprintf(stderr, PROG ": out of memory reading %s\n", path);
        return 1;
    }
    return 0;
}

/* --trace: each rank's time per recorded step, in milliseconds, by what the
 * compute thread did (stacked), and the communication thread's allreduces. */
enum { PART_COMPUTE, PART_INPUT, PART_MESSAGES, PART_GRAD_WAIT, PART_OTHER, PARTS };

struct rank_time {
    long pid;
    char label[96];
    double step, part[PARTS], allreduce;
    int steps;
};

static double duration_us(json_t *ev)
{
    json_t *v = json_object_get(ev, "dur");
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int by_pid(const void *a, const void *b)
{
    long x = ((const struct rank_time *)a)->pid, y = ((const struct rank_time *)b)->pid;
    return (x > y) - (x < y);
}

static struct rank_time *rank_of(struct rank_time *r, int *n, long pid)
{
    for (int i = 0; i < *n; i++)
        if (r[i].pid == pid)
            return &r[i];
    if (*n >= 4096)
        return NULL;
    memset(&r[*n], 0, sizeof r[*n]);
    r[*n].pid = pid;
    snprintf(r[*n].label, sizeof r[*n].label, "rank %ld", pid);
    return &r[(*n)++];
}

/* Adds one trace event to its rank's times (a process_name event names the rank). */
static void add_event(struct rank_time *r, json_t *ev, const char *ph)
{
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    const char *name = json_string_value(json_object_get(ev, "name"));
    if (!strcmp(ph, "M") && name && !strcmp(name, "process_name")) {
        const char *label = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        if (label)
            snprintf(r->label, sizeof r->label, "%s", label);
        return;
    }
    double ms = duration_us(ev) / 1000;
    if (strcmp(ph, "X") || !cat || !isfinite(ms))
        return;
    if (!strcmp(cat, "step"))
        r->step += ms, r->steps++;
    else if (!strcmp(cat, "layer") || !strcmp(cat, "reorder") || !strcmp(cat, "optimizer"))
        r->part[PART_COMPUTE] += ms;
    else if (!strcmp(cat, "data"))
        r->part[PART_INPUT] += ms;
    else if (!strcmp(cat, "tensor-comm") || !strcmp(cat, "send") || !strcmp(cat, "recv"))
        r->part[PART_MESSAGES] += ms;
    else if (!strcmp(cat, "grad-wait"))
        r->part[PART_GRAD_WAIT] += ms;
    else if (!strcmp(cat, "allreduce"))
        r->allreduce += ms;
}

/* Reads the trace file at path into ranks[0..*n) (at most 4096); 0, or the
 * exit status after the message. */
static int read_trace(const char *path, struct rank_time *ranks, int *n)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, PROG ": %s:%d:%d: %s\n", path, je.line, je.column, je.text);
        return 2;
    }
    json_t *events = json_object_get(root, "traceEvents");
    if (!json_is_array(events)) {
        fprintf(stderr, PROG ": %s: no \"traceEvents\" array (a file written by dltrain --trace?)\n", path);
        json_decref(root);
        return 2;
    }
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        json_t *pid = json_object_get(ev, "pid");
        if (!ph || !json_is_integer(pid))
            continue;
        struct rank_time *r = rank_of(ranks, n, (long)json_integer_value(pid));
        if (!r)
            break;
        add_event(r, ev, ph);
    }
    json_decref(root);
    int with_steps = 0;
    for (int k = 0; k < *n; k++)
        with_steps += ranks[k].steps > 0;
    if (with_steps == 0) {
        fprintf(stderr, PROG ": %s: no recorded training step (a file written by dltrain --trace?)\n", path);
        return 2;
    }
    return 0;
}

/* The ranks' times per recorded step, as stacked bars and the allreduces' bars. */
static int draw_trace(struct rank_time *ranks, int n, const char *head, const char *out, int width)
{
    qsort(ranks, (size_t)n, sizeof *ranks, by_pid);
    const char **rows = calloc((size_t)n, sizeof *rows);
    double *split = calloc((size_t)n * PARTS, sizeof *split), *comm = calloc((size_t)n, sizeof *comm);
    int m = 0, status = 0;
    for (int k = 0; k < n && rows && split && comm; k++) {
        struct rank_time *r = &ranks[k];
        if (!r->steps)
            continue;
        double known = 0;
        for (int j = 0; j < PART_OTHER; j++)
            split[m * PARTS + j] = r->part[j] / r->steps, known += r->part[j];
        split[m * PARTS + PART_OTHER] = (r->step - known) / r->steps; /* launch, bookkeeping, bubbles unaccounted */
        comm[m] = r->allreduce / r->steps;
        rows[m++] = r->label;
    }
    if (!rows || !split || !comm)
        status = 1;
    else {
        const struct dl_chart_bars stacked = {m, PARTS, 0, rows, split}, ar = {m, 1, PARTS, rows, comm};
        const struct dl_chart_panel panels[] = {
            {"Each rank's training step (the compute thread)", "milliseconds per recorded step", "", 0, NULL, 0,
             &stacked},
            {"Gradient allreduce (the communication thread, overlapping backward)", "milliseconds per recorded step",
             "", 0, NULL, 0, &ar}};
        static const char *const parts[] = {"compute (layers, reorders, optimizer)", "input wait",
                                            "pipeline and tensor messages (bubbles)", "waiting for gradients",
                                            "other", "allreduce"};
        struct dl_chart_legend legend = {parts, PARTS + 1, NULL};
        struct dl_error err = {0};
        if (dl_chart_render(out, head, panels, 2, 1, &legend, width, &err)) {
            fprintf(stderr, PROG ": %s\n", err.msg);
            status = err.code == DL_ERR_SPEC ? 2 : 1;
        }
    }
    free(rows), free(split), free(comm);
    return status;
}

static int plot_trace(const char *path, const char *out, const char *title, int width)
{
    struct rank_time *ranks = calloc(4096, sizeof *ranks);
    if (!ranks)
        return 1;
    int n = 0, status = read_trace(path, ranks, &n);
    if (!status) {
        char head[300];
        snprintf(head, sizeof head, "%s", title ? title : path);
        status = draw_trace(ranks, n, head, out, width);
    }
    free(ranks);
    return status;
}

/* --tuner: the plan dltrain tune would print from the database alone, as a
 * table whose micro-batched rows are highlighted. */
static int plot_tuner(struct dl_net_options *no, const char *db, const char *out, const char *title)
{
    if (access(db, R_OK) != 0) { /* opening it would create an empty one */
        fprintf(stderr, PROG ": --tuner %s: cannot read it: %s\n", db, strerror(errno));
        return 2;
    }
    no->tune.db_path = db;
    no->tune.no_measure = 1;
    struct dl_net net;
    struct dl_mbplan plan;
    struct dl_tune_report rep;
    int status = dl_tune_plan_net(no, PROG, &net, &plan, &rep);
    if (status)
        return status;
    struct dl_error err = {0};
    struct dl_tune_table t;
    const char **cells = NULL;
    if (dl_tune_table_build(&net.graph, &plan, &rep, &t) == 0 &&
        (cells = calloc((size_t)t.rows * DL_TUNE_TABLE_COLS + 1, sizeof *cells))) {
        for (int r = 0; r < t.rows; r++)
            for (int c = 0; c < DL_TUNE_TABLE_COLS; c++)
                cells[r * DL_TUNE_TABLE_COLS + c] = t.cell[r][c];
        static const int right[DL_TUNE_TABLE_COLS] = {0, 0, 0, 0, 1, 1, 1, 1};
        const struct dl_chart_table table = {t.rows, DL_TUNE_TABLE_COLS, dl_tune_table_header, cells, t.divided, right};
        char head[256], total[256], note1[160], note2[160];
        snprintf(head, sizeof head, "%s", title ? title : "");
        if (!title)
            snprintf(head, sizeof head, "Tuner's plan: %s, batch %d (%s)", net.name, net.train.batch, db);
        dl_tune_table_total(&t, total, sizeof total);
        size_t cut = strcspn(dl_tune_table_note, "\n");
        snprintf(note1, sizeof note1, "%.*s", (int)cut, dl_tune_table_note);
        snprintf(note2, sizeof note2, "%s", dl_tune_table_note + cut + (dl_tune_table_note[cut] != 0));
        const char *notes[] = {"highlighted: the batch is split into micro-batches", note1, note2, total};
        if (dl_chart_render_table(out, head, &table, notes, 4, &err)) {
            fprintf(stderr, PROG ": %s\n", err.msg);
            status = err.code == DL_ERR_SPEC ? 2 : 1;
        }
    } else {
        fprintf(stderr, PROG ": out of memory\n");
        status = 1;
    }
    free(cells);
    dl_tune_table_free(&t);
    dl_tune_report_free(&rep);
    dl_mbplan_free(&plan);
    dl_net_free(&net);
    return status;
}

static void help(void)
{
    fputs("Usage: dltrain plot RUN.jsonl... -o FILE.svg|FILE.pdf|FILE.png [options]\n"
          "Draws the --metrics JSON lines of one or more runs, overlaid (one colour each): loss against\n"
          "steps and against seconds, accuracy, and samples/s (tokens/s for token inputs).  Training\n"
          "values are drawn faint, with TensorBoard's smoothing over them; validation points (eval lines,\n"
          "and the test scores of epoch lines) are dots.  Axes turn logarithmic where the values span\n"
          "more than a factor of 20.\n\n"
          "  -o, --output FILE     the chart: .svg, .pdf or .png (written whole or not at all)\n"
          "  --labels A,B,...      the runs' names in the legend (default: the file names)\n"
          "  --title TEXT          the chart's title (default: the runs' names)\n"
          "  --width PX            the width in pixels (default 1200; the height follows)\n"
          "  --smooth W            the smoothing weight, 0 (none) to below 1 (default 0.6,\n"
          "                        TensorBoard's)\n\n"
          "       dltrain plot --trace TRACE.json -o FILE.svg|.pdf|.png\n"
          "Draws a --trace file's summary per rank, for people without a trace viewer: the milliseconds\n"
          "of each recorded step spent computing (layers, reorders, optimizer), waiting for input, in\n"
          "pipeline and tensor-parallel messages (a pipeline's bubbles are waits for them), waiting for\n"
          "gradients, and the rest; and the gradient allreduces of the communication thread.\n\n"
          "       dltrain plot --tuner DB --net FILE --batch N [options] -o FILE.svg|.pdf|.png\n"
          "Draws the plan dltrain tune prints, from the tuning database DB alone (nothing is measured;\n"
          "candidates it lacks are skipped), as a table: per tuned layer and direction the kernels and\n"
          "micro-batches, the time, the workspace, the best undivided time and the speedup; rows that\n"
          "split the batch are highlighted.  The network and tuning options are dltrain tune's.\n",
          stdout);
}

/* The runs' labels: --labels, else each file's name without .jsonl (and
 * without .partial, a running job's). */
static int label_runs(struct run *runs, char **files, int n, const char *labels)
{
    const char *p = labels;
    for (int i = 0; i < n; i++) {
        if (labels) {
            size_t len = strcspn(p, ",");
            if (!*p && i > 0) {
                fprintf(stderr, PROG ": --labels: %d names for %d runs\n", i, n);
                return 2;
            }
            snprintf(runs[i].label, sizeof runs[i].label, "%.*s", (int)len, p);
            p += len + (p[len] == ',');
            continue;
        }
        const char *base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        snprintf(runs[i].label, sizeof runs[i].label, "%s", base);
        char *dot = strstr(runs[i].label, ".jsonl");
        if (dot)
            *dot = 0;
    }
    if (labels && *p) {
        fprintf(stderr, PROG ": --labels: more names than the %d run%s\n", n, n == 1 ? "" : "s");
        return 2;
    }
    return 0;
}

/* The command line. */
struct plot_command {
    struct dl_net_options net_options; /* --tuner's network and tuning options */
    const char *out, *labels, *title, *trace, *tuner;
    int width;     /* pixels */
    double weight; /* TensorBoard's smoothing weight */
};

static const struct dl_option options[] = {
    DL_OPTION_OUTPUT(struct plot_command, out),
    DL_OPTION_STRING("labels", struct plot_command, labels),
    DL_OPTION_STRING("title", struct plot_command, title),
    DL_OPTION_INT("width", struct plot_command, width, 300, 10000),
    DL_OPTION_DOUBLE("smooth", struct plot_command, weight, 0, 0.999),
    DL_OPTION_STRING("trace", struct plot_command, trace),
    DL_OPTION_STRING("tuner", struct plot_command, tuner),
    DL_OPTION_END};

/* Parses argv into cmd (runs' metrics, --trace or --tuner, each on its own);
 * -1 to go on with *first the first run's file, else the exit status. */
static int parse_args(struct plot_command *cmd, int argc, char **argv, int *first)
{
    dl_net_options_init(&cmd->net_options);
    struct dl_command_line line = {PROG, options, cmd, &cmd->net_options, help, .version = 1, .repeat_try = 1};
    int status = dl_options_parse(&line, argc, argv, first);
    if (status >= 0)
        return status;
    int n = argc - *first;
    if ((cmd->trace || cmd->tuner) && (n > 0 || (cmd->trace && cmd->tuner))) {
        fprintf(stderr, PROG ": --trace, --tuner and runs' metrics are drawn each on its own (one command each)\n");
        return 2;
    }
    if (cmd->tuner && !cmd->net_options.net_path) {
        fprintf(stderr, PROG ": --tuner needs the network the plan is for: --net FILE (and --batch N)\n");
        return 2;
    }
    return -1;
}

/* The panels of a mixture of experts' runs after the four: the most
 * loaded expert, the choices dropped, the balancing loss. */
enum { RUN_PANELS = 4, EXPERT_PANELS = 3 };

/* The four panels' series (loss by step, by time, accuracy, throughput),
 * run after run, into series, and with experts their three (one line a
 * run each); each panel's first series and count. */
static void runs_series(const struct run *runs, int n, double weight, struct dl_chart_series *series,
                        struct dl_chart_series *first[RUN_PANELS + EXPERT_PANELS],
                        int counts[RUN_PANELS + EXPERT_PANELS])
{
    struct dl_chart_series *s = series + n * 3 * RUN_PANELS; /* the experts' after the others' */
    for (int p = 0; p < EXPERT_PANELS; p++) {
        first[RUN_PANELS + p] = s;
        counts[RUN_PANELS + p] = 0;
        for (int i = 0; i < n; i++) {
            const struct run *r = &runs[i];
            const struct dl_column *y = p == 0 ? &r->m.expert_load : p == 1 ? &r->dropped : &r->m.aux_loss;
            if (!r->m.experts)
                continue;
            *s++ = (struct dl_chart_series){i, DL_CHART_LINE, r->m.step.v, y->v, y->n};
            counts[RUN_PANELS + p]++;
        }
    }
    /* panel p's series of run i: raw, smoothed, validation */
    s = series;
    for (int p = 0; p < RUN_PANELS; p++) {
        first[p] = s;
        counts[p] = 0;
        for (int i = 0; i < n; i++) {
            const struct run *r = &runs[i];
            const struct dl_column *x = p == 1 ? &r->m.time : &r->m.step, *vx = p == 1 ? &r->m.vtime : &r->m.vstep;
            const struct dl_column *raw = p == 2 ? &r->acc : p == 3 ? &r->m.rate : &r->m.loss;
            const struct dl_column *sm = p == 2 ? &r->acc_smooth : &r->loss_smooth;
            const struct dl_column *val = p == 2 ? &r->vacc : &r->m.vloss;
            if (p == 3) {
                *s++ = (struct dl_chart_series){i, DL_CHART_LINE, x->v, raw->v, raw->n};
                counts[p]++;
                continue;
            }
            *s++ = (struct dl_chart_series){i, weight > 0 ? DL_CHART_FAINT : DL_CHART_LINE, x->v, raw->v, raw->n};
            if (weight > 0)
                *s++ = (struct dl_chart_series){i, DL_CHART_LINE, x->v, sm->v, sm->n};
            *s++ = (struct dl_chart_series){i, DL_CHART_MARKED, vx->v, val->v, val->n};
            counts[p] += weight > 0 ? 3 : 2;
        }
    }
}

/* The runs' chart: the four panels, the legend of run names, the title
 * (default: the names joined by "vs"). */
static int draw_runs(const struct plot_command *cmd, const struct run *runs, int n, struct dl_chart_series *series)
{
    struct dl_chart_series *first[RUN_PANELS + EXPERT_PANELS];
    int counts[RUN_PANELS + EXPERT_PANELS];
    runs_series(runs, n, cmd->weight, series, first, counts);
    int tokens = 0, experts = 0;
    for (int i = 0; i < n; i++)
        tokens |= runs[i].m.tokens, experts |= runs[i].m.experts;
    const struct dl_chart_panel panels[] = {
        {"Loss", "step", "loss", -1, first[0], counts[0]},
        {"Loss against time", "seconds since the start", "loss", -1, first[1], counts[1]},
        {"Accuracy", "step", "accuracy (%)", 0, first[2], counts[2]},
        {"Throughput", "step", tokens ? "tokens/s (samples/s without tokens)" : "samples/s", 0, first[3], counts[3]},
        {"Expert load", "step", "most loaded expert / its layer's mean", 0, first[4], counts[4]},
        {"Choices dropped (over capacity)", "step", "share of the choices (%)", 0, first[5], counts[5]},
        {"Balancing loss", "step", "auxiliary loss (in the loss)", 0, first[6], counts[6]}};
    const char *names[10];
    char joined[512] = "";
    for (int i = 0; i < n; i++) {
        names[i] = runs[i].label;
        size_t len = strlen(joined);
        snprintf(joined + len, sizeof joined - len, "%s%s", i ? " vs " : "", runs[i].label);
    }
    char note[160];
    if (cmd->weight > 0)
        snprintf(note, sizeof note, "faint: each training step; line: smoothed (%g); dots: validation", cmd->weight);
    else
        snprintf(note, sizeof note, "line: each training step; dots: validation");
    struct dl_chart_legend legend = {names, n, note};
    struct dl_error err = {0};
    int shown = experts ? RUN_PANELS + EXPERT_PANELS : RUN_PANELS;
    if (dl_chart_render(cmd->out, cmd->title ? cmd->title : joined, panels, shown, 2, &legend, cmd->width, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return err.code == DL_ERR_SPEC ? 2 : 1;
    }
    return 0;
}

/* The n runs' metrics files, labelled, read and drawn. */
static int plot_runs(const struct plot_command *cmd, char **files, int n)
{
    if (n > 10) {
        fprintf(stderr, PROG ": %d runs; at most 10 fit one chart (one colour each)\n", n);
        return 2;
    }
    struct run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs)
        return 1;
    int status = label_runs(runs, files, n, cmd->labels);
    for (int i = 0; i < n && !status; i++)
        status = read_run(files[i], &runs[i], cmd->weight);
    struct dl_chart_series *series = calloc((size_t)n * (3 * RUN_PANELS + EXPERT_PANELS), sizeof *series);
    if (!status && !series)
        status = 1;
    if (!status)
        status = draw_runs(cmd, runs, n, series);
    free(series);
    for (int i = 0; i < n; i++)
        run_free(&runs[i]);
    free(runs);
    return status;
}

int dl_cli_plot(int argc, char **argv)
{
    struct plot_command cmd = {.width = 1200, .weight = 0.6};
    int first, status = parse_args(&cmd, argc, argv, &first);
    if (status >= 0)
        return status;
    if (cmd.tuner && cmd.out)
        return plot_tuner(&cmd.net_options, cmd.tuner, cmd.out, cmd.title);
    if (cmd.trace && cmd.out)
        return plot_trace(cmd.trace, cmd.out, cmd.title, cmd.width);
    int n = argc - first;
    if (n < 1 || !cmd.out) {
        fprintf(stderr, PROG ": %s (Try '" PROG " --help'.)\n",
                n < 1 ? "no run given: dltrain plot RUN.jsonl... -o FILE.svg" : "-o FILE.svg|.pdf|.png is required");
        return 2;
    }
    return plot_runs(&cmd, argv + first, n);
}
