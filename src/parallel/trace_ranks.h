/* trace_ranks.h: the ranks of a traced run (--trace) on one clock and in
 * one file.  At the start every rank learns the offset from its clock to
 * rank 0's: none for ranks whose kernel is rank 0's (same boot id: they
 * read the same CLOCK_MONOTONIC), else the midpoint estimate of the
 * quickest of a few round trips to rank 0, off by at most half that round
 * trip.  At the end every rank renders its events (io/trace_json.h) and
 * sends them to rank 0, which writes the one file atomically; when a rank
 * cannot count on the others reaching the end with it (an error of its
 * own), it writes its events alone instead. */
#ifndef DL_PARALLEL_TRACE_RANKS_H
#define DL_PARALLEL_TRACE_RANKS_H

#include <stddef.h>

#include "comm/comm.h"
#include "io/trace.h"

/* Collective over world (NULL or one rank: nothing to align): sets
 * tr->offset, tr->rtt and tr->origin (rank 0's clock now, time 0 of the
 * file). */
int dl_trace_align(struct dl_trace *tr, struct dl_comm *world, struct dl_error *err);

/* Collective over world (NULL: one process): rank 0 writes path with every
 * rank's events, the others send theirs.  Rank 0 returns the file's error,
 * if any; every rank returns communication errors. */
int dl_trace_gather_write(const struct dl_trace *tr, struct dl_comm *world, const char *path, struct dl_error *err);

/* Not collective: this rank's events alone, into path when it is the only
 * rank (world_size 1), else into path.rankR.  The name written goes to
 * written (size bytes). */
int dl_trace_write_alone(const struct dl_trace *tr, int world_size, const char *path, char *written, size_t size,
                         struct dl_error *err);

#endif
