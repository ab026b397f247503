/* tune.c: `dltrain tune --net FILE --batch N`: fills the tuning database
 * (measuring only what it lacks) and prints, per tuned layer, the chosen
 * plan (kernel and micro-batch sizes per direction), its time and workspace
 * against the best undivided plan within the same limit, then the totals. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "cli/tune_table.h"
#include "core/parse.h"
#include "core/threads.h"
#include "tune/tune.h"

static void help(void)
{
    fputs("Usage: dltrain tune --net FILE --batch N [--workspace-limit BYTES | --workspace-total BYTES]\n"
          "                    [--tune-policy P] [--tune-db FILE] [options]\n"
          "Measures every kernel on every micro-batch size of the policy for each convolution, fully\n"
          "connected, pooling and activation layer (forward, backward data, backward weights), stores the\n"
          "times in the tuning database, and prints the plan: per layer and direction the kernel and\n"
          "micro-batch sizes, the time and workspace, against the best undivided plan.\n\n"
          "  --repeats N           timed calls per candidate (default 5; the median is kept)\n"
          "  --no-measure          use the database only\n\n",
          stdout);
    dl_net_options_help(stdout);
}

static int print_plan(const struct dl_graph *g, const struct dl_mbplan *p, const struct dl_tune_report *r)
{
    struct dl_tune_table t;
    if (dl_tune_table_build(g, p, r, &t))
        return -1;
    const char *const *h = dl_tune_table_header;
    printf("%-26s %-8s %-12s %-44s %10s %10s %10s %8s\n", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    for (int i = 0; i < t.rows; i++) {
        char(*c)[192] = t.cell[i];
        printf("%-26s %-8s %-12s %-44s %10s %10s %10s %8s\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
    }
    char total[256];
    dl_tune_table_total(&t, total, sizeof total);
    printf("%s\n%s\n", dl_tune_table_note, total);
    dl_tune_table_free(&t);
    return 0;
}

/* Parses argv into no (the tuner's own options are its settings'); returns
 * -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct dl_net_options *no)
{
    static const struct dl_option options[] = {
        DL_OPTION_INT("repeats", struct dl_net_options, tune.repeats, 1, 64),
        DL_OPTION_FLAG("no-measure", struct dl_net_options, tune.no_measure, 1), DL_OPTION_END};
    struct dl_command_line line = {"dltrain tune", options, no, no, help, .version = 1};
    return dl_options_parse(&line, argc, argv, NULL);
}

int dl_cli_tune(int argc, char **argv)
{
    struct dl_net_options net_options;
    dl_net_options_init(&net_options);
    int status = parse_args(argc, argv, &net_options);
    if (status >= 0)
        return status;
    struct dl_net net;
    struct dl_mbplan plan;
    struct dl_tune_report rep;
    status = dl_tune_plan_net(&net_options, "dltrain tune", &net, &plan, &rep);
    if (status)
        return status;
    const struct dl_tune_options o = net_options.tune;
    char lim[64] = "none", tot[64] = "none";
    if (o.workspace_limit)
        snprintf(lim, sizeof lim, "%.2f MiB", o.workspace_limit / 1048576.0);
    if (o.workspace_total)
        snprintf(tot, sizeof tot, "%.2f MiB", o.workspace_total / 1048576.0);
    printf("network %s, batch %d, %d threads, policy %s, workspace limit %s, total %s\n", net.name,
           net.train.batch, dl_threads_get(), dl_tune_policy_names[o.policy], lim, tot);
    if (print_plan(&net.graph, &plan, &rep))
        fprintf(stderr, "dltrain tune: out of memory printing the plan\n");
    printf("candidates: %ld measured (%.1f s), %ld from the database; %.2f s in all\n", rep.measured,
           rep.tune_seconds, rep.cached, rep.total_seconds);
    dl_tune_report_free(&rep);
    dl_mbplan_free(&plan);
    dl_net_free(&net);
    return 0;
}
