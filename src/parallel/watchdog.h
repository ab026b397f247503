/* watchdog.h: stall detection for the blocking calls of tensor- and
 * pipeline-parallel groups.  A tensor collective or a pipeline receive
 * cannot return while a peer is stalled, so a thread watches instead: the
 * rank's group communicators (wrapped by dl_watch_comm) tell it when a
 * blocking call begins and ends; after warn_s in one call it warns (once per
 * call) naming what the rank waits for, the peer's world rank and grid
 * position or its group's ranks, and the step; after timeout_s it reports
 * the same and ends the whole job (the world's abort), since the call will
 * never return by itself.  A stalled rank is not waiting, so the ranks that
 * wait for it are the ones that name it. */
#ifndef DL_PARALLEL_WATCHDOG_H
#define DL_PARALLEL_WATCHDOG_H

#include "comm/comm.h"
#include "plan/rank_grid.h"

struct dl_watchdog;

/* Starts the watching thread.  warn_s, timeout_s <= 0: no warning, no
 * timeout.  report receives one-line messages (from the watching thread).
 * dims: the grid, to name a rank's position. */
int dl_watchdog_start(struct dl_comm *world, const struct dl_grid_dims *dims, double warn_s, double timeout_s,
                      void (*report)(void *ctx, const char *msg), void *ctx, struct dl_watchdog **out,
                      struct dl_error *err);
/* The training step in progress (1-based; 0: none, e.g. evaluation). */
void dl_watchdog_set_step(struct dl_watchdog *w, long step);
/* Stops and frees the thread (NULL is fine). */
void dl_watchdog_stop(struct dl_watchdog *w);

/* Replaces *c, a group communicator of this rank, by one whose blocking
 * calls w watches and which owns the original (dl_comm_close closes both).
 * group names it in messages ("tensor", "pipeline"); world_ranks[i] is the
 * world rank of its rank i (copied).  On error *c is unchanged. */
int dl_watch_comm(struct dl_comm **c, struct dl_watchdog *w, const char *group, const int *world_ranks,
                  struct dl_error *err);

#endif
