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
};

/* Prints both tables for net (its batch and optimizer) with executor
 * options eo; returns the exit status (2 for a grid the network cannot
 * have, with the message on stderr). */
int dl_check_grid(const struct dl_net *net, const struct dl_check_grid *c, const struct dl_exec_options *eo);

#endif
