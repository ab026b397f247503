/* tune.h: the autotuner (mu-cuDNN's idea on every backend).  For each layer
 * whose work is independent per sample and each direction it measures every
 * applicable kernel on every micro-batch size the policy allows, keeps the
 * results in a persistent SQLite database, and plans how to run the
 * mini-batch: per layer by dynamic programming under a workspace limit, or
 * network-wide by an integer linear program dividing a total workspace.  The
 * result is a plan/mbplan.h plan that the executor runs.  Nothing here knows
 * which device a kernel runs on: kernels are measured through kernel.h. */
#ifndef DL_TUNE_H
#define DL_TUNE_H

#include <stddef.h>

#include "backends/kernel.h"
#include "graph/graph.h"
#include "plan/mbplan.h"

enum dl_tune_policy { DL_TUNE_UNDIVIDED, DL_TUNE_POWER_OF_TWO, DL_TUNE_ALL };
extern const char *const dl_tune_policy_names[]; /* "undivided", "powerOfTwo", "all", NULL */

struct dl_tune_options {
    enum dl_tune_policy policy;    /* default powerOfTwo */
    size_t workspace_limit;        /* per layer and direction; 0: no limit */
    size_t workspace_total;        /* > 0: divide this total over the network (ILP) */
    const char *db_path;           /* NULL: dl_tune_db_default_path() */
    int warmup, repeats;           /* per measurement (0: 1 and 5) */
    int all_dirs;                  /* also tune backward-data of layers fed by the network input */
    int no_measure;                /* use the database only; missing candidates are skipped */
    const struct dl_kernel_choices *kernels; /* --kernel choices restricting a layer to one kernel */
    /* The measured defaults (see dl_tune_exec_defaults): measure nothing,
     * never split the batch, and plan only the layers whose every candidate
     * the database holds at the whole batch; a layer whose fastest kernel is
     * the built-in default stays unplanned (and keeps its fused ReLU). */
    int from_database;
};

/* What the planner found for one layer (for reports). */
struct dl_tune_layer_report {
    int tuned;
    double time_s, undivided_s;    /* chosen plan; best undivided plan within the same limit (<0: none fits) */
    size_t ws, undivided_ws;       /* largest workspace of a direction */
    size_t least_ws;               /* the least workspace with which some plan of the layer runs (its
                                      kernels' smallest need; the tightest feasible --workspace-limit) */
    double dir_time[DL_N_DIRS], dir_undivided[DL_N_DIRS];
};

struct dl_tune_report {
    long measured, cached;         /* candidates timed now / found in the database */
    double tune_seconds;           /* wall time spent measuring */
    double total_seconds;          /* wall time of dl_tune_net */
    struct dl_tune_layer_report *layer; /* [n_layers] */
    int n_layers;
};

void dl_tune_options_default(struct dl_tune_options *o);

/* Plans g for mini-batches of batch samples: fills plan (dl_mbplan_free it)
 * and, when report is not NULL, report (dl_tune_report_free it). */
int dl_tune_net(const struct dl_graph *g, int batch, const struct dl_tune_options *o, struct dl_mbplan *plan,
                struct dl_tune_report *report, struct dl_error *err);
void dl_tune_report_free(struct dl_tune_report *r);

/* 1 when layer l's op kind allows micro-batches (micro_batch, ops/op.h:
 * convolution, fully connected, pooling, activations). */
int dl_tune_layer_tunable(const struct dl_layer *l);

/* The micro-batch sizes the policy allows for a batch of B, ascending
 * (always ending with B); returns their number (at most B). */
int dl_tune_policy_sizes(enum dl_tune_policy p, int B, int *sizes);

/* $DLTRAIN_TUNE_DB, else $XDG_CACHE_HOME/dltrain/tune.sqlite, else
 * $HOME/.cache/dltrain/tune.sqlite. */
int dl_tune_db_default_path(char *buf, size_t size, struct dl_error *err);

/* The tuner as an executor's planner (struct dl_exec_tuner, exec/exec.h):
 * ctx is a struct dl_tune_options, whose kernels are replaced by the
 * executor's choices. */
int dl_tune_exec_plan(void *ctx, const struct dl_graph *g, int batch, const struct dl_kernel_choices *kernels,
                      struct dl_mbplan *out, struct dl_error *err);

/* The kernel table measured on this CPU, as an executor's planner when
 * --tune is off: a layer runs the kernel the tuning database timed fastest
 * for it (its shapes, the whole batch, this CPU model, thread count and
 * library versions) where dltrain tune or --tune measured all its
 * candidates, and the built-in default elsewhere.  No database file, or
 * options->db_path "none": the built-in table throughout.  A database that
 * cannot be read is passed over the same way (the run does not depend on a
 * cache).  layers: the most layers the database moved off the built-in
 * choice in one executor planned through ctx (a run's training and
 * evaluation executors move the same ones). */
struct dl_tune_defaults {
    const struct dl_tune_options *options;
    int layers;
};
int dl_tune_exec_defaults(void *ctx, const struct dl_graph *g, int batch, const struct dl_kernel_choices *kernels,
                          struct dl_mbplan *out, struct dl_error *err);

#endif
