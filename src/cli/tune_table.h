/* tune_table.h: the tuner's plan as a table, one row per tuned layer and
 * direction: the kernels and micro-batches, the time, the workspace, the
 * layer's best plan without micro-batches and the speedup over it.
 * `dltrain tune` prints it, `dltrain plot --tuner` draws it; both plan
 * the network the same way (dl_tune_plan_net). */
#ifndef DL_CLI_TUNE_TABLE_H
#define DL_CLI_TUNE_TABLE_H

#include <stddef.h>

#include "graph/graph.h"
#include "plan/mbplan.h"
#include "tune/tune.h"

struct dl_net;
struct dl_net_options;

/* Loads the network of o and plans it as dltrain tune does (o's tuning
 * options and kernels); returns 0, or the exit status after prog's message
 * (net is then freed). */
int dl_tune_plan_net(struct dl_net_options *o, const char *prog, struct dl_net *net, struct dl_mbplan *plan,
                     struct dl_tune_report *rep);

enum { DL_TUNE_TABLE_COLS = 8 };

struct dl_tune_table {
    int rows;
    char (*cell)[DL_TUNE_TABLE_COLS][192]; /* [rows][column] */
    int *divided;                         /* the row splits the batch into micro-batches */
    double total_s, undivided_s;          /* tuned layers per step: the plan's, the best undivided */
    int all_undivided;                    /* every tuned layer has an undivided plan (undivided_s counts) */
    double workspace_bytes;
};

extern const char *const dl_tune_table_header[DL_TUNE_TABLE_COLS];

/* Returns 0, or -1 when memory runs out. */
int dl_tune_table_build(const struct dl_graph *g, const struct dl_mbplan *p, const struct dl_tune_report *r,
                        struct dl_tune_table *t);
void dl_tune_table_free(struct dl_tune_table *t);

/* What the columns "undiv ms" and "(in fwd)" mean, and the totals line. */
extern const char *const dl_tune_table_note;
void dl_tune_table_total(const struct dl_tune_table *t, char *buf, size_t n);

#endif
