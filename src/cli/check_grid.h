/* check_grid.h: `dltrain check --grid`'s views of a grid of ranks: what
 * tensor rank 0 of each stage runs for every layer, and each grid
 * position's memory as the training executors would plan it. */
#ifndef DL_CLI_CHECK_GRID_H
#define DL_CLI_CHECK_GRID_H

#include "exec/exec.h"
#include "parallel/schedule.h"
#include "spec/netfile.h"

/* What the run being checked would be given (dltrain train's options of
 * the same names). */
struct dl_check_grid {
    const char *grid;                /* --grid */
    int ranks;                       /* --ranks; 0: dp x tp x pp of --grid */
    int chunks;                      /* --pipeline-chunks; 0: the network file's, else the default */
    enum dl_pipe_schedule schedule;  /* --pipeline-schedule */
    int V;                           /* its stages per pipeline rank (interleaved:V) */
    int bytes;                       /* --bytes: sizes as exact byte counts */
};

/* A size for check's tables: "12.3 MiB", or with bytes "12897484". */
const char *dl_check_size(double v, int bytes, char *buf, size_t size);

/* One row of the memory table: a (tensor, pipeline) position. */
struct dl_check_grid_row {
    int t, p, slots;
    char ranks[64], layers[128];
    double weights, gradients, optimizer, state, arena, peak; /* bytes */
};

/* A grid resolved and planned, before anything is printed. */
struct dl_check_grid_plan {
    struct dl_grid_dims d;
    int chunks;
    int n;
    struct dl_check_grid_row *rows;   /* [tp x pp] */
    double peak;                      /* the largest row's */
};

/* Resolves c's grid for net (its batch and optimizer) and plans every
 * position's memory with executor options eo.  A grid the network cannot
 * have is DL_ERR_SPEC with the message in err. */
int dl_check_grid_plan(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_exec_options *eo,
                       struct dl_check_grid_plan *out, struct dl_error *err);

/* Prints both tables of a plan. */
void dl_check_grid_print(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_check_grid_plan *p);

void dl_check_grid_plan_free(struct dl_check_grid_plan *p);

#endif
