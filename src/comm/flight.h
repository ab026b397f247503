/* flight.h: a rank's flight recorder (doc/comm.md): the last N blocking
 * calls the rank made on its observed communicators (comm/observed.h),
 * each with its group, sequence number in that group, call, bytes, peer,
 * what it was for (a layer, a gradient bucket: core/thread_label.h), the step
 * and its start and end times.  On a stall the rank that gives up asks
 * every rank to write its record to the shared folder (a request file that
 * each rank's watcher thread looks for: ranks blocked in a call still
 * answer), reads them back and names the first call of a group that some
 * of its ranks entered and others never did, or entered as another call.
 * Files: DIR/flight-rank00003.jsonl, a header line (the rank, its groups
 * and their world ranks), then one line a call. */
#ifndef DL_COMM_FLIGHT_H
#define DL_COMM_FLIGHT_H

#include <stddef.h>

#include "comm/comm.h"

#define DL_FLIGHT_CALLS 512 /* calls kept a rank */

struct dl_flight;

/* A recorder writing to dir (made when a dump is asked for) for world rank
 * `rank` of `size`; its watcher thread starts.  Becomes the process's
 * (dl_flight_global) until closed. */
int dl_flight_open(const char *dir, int rank, int size, struct dl_flight **out, struct dl_error *err);
void dl_flight_close(struct dl_flight *f);
struct dl_flight *dl_flight_global(void);

/* Records *c's blocking calls as group `group` (a static name; its world
 * ranks copied); owns as dl_comm_observe's. */
int dl_flight_record(struct dl_comm **c, struct dl_flight *f, const char *group, const int *world_ranks, int owns,
                     struct dl_error *err);

/* The training step in progress (0: none).  A call's label is its
 * thread's (core/thread_label.h: a layer's name, "bucket 3").
 * Collectives are numbered per group and thread (the main one, lane 0;
 * the gradients' communication thread, lane 1), each in the same order on
 * every rank; messages to or from one peer are recorded with number 0. */
void dl_flight_lane(int lane);

/* A collective made of messages (an allreduce algorithm's) recorded as
 * one call on c, its messages not: begin before, end after. */
long dl_flight_begin(struct dl_comm *c, const char *call, size_t bytes);
void dl_flight_end(struct dl_comm *c, long id);
void dl_flight_set_step(struct dl_flight *f, long step);

/* Its folder, world size and world rank. */
const char *dl_flight_dir(const struct dl_flight *f);
int dl_flight_world(const struct dl_flight *f);
int dl_flight_rank(const struct dl_flight *f);

/* This rank's record into its file (atomically renamed into place). */
int dl_flight_dump(struct dl_flight *f, struct dl_error *err);
/* The same from a fatal signal's handler: its header's "fatal" names the
 * signal (best effort: it takes the locks and the allocator a crash may
 * have left held, under an alarm). */
int dl_flight_dump_fatal(struct dl_flight *f, const char *fatal);
/* flight_fatal.c: on a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT) the open recorder's rank says on stderr which signal, at which
 * step and in which layer or bucket, and writes its record; then the
 * handler that was installed before (MPI's) runs.  Installed once, by the
 * first recorder opened. */
void dl_flight_fatal_install(void);

/* After a stall: every rank's record asked for and awaited (up to wait_s),
 * compared, and the finding into buf ("" when none could be made). */
void dl_flight_post_mortem(struct dl_flight *f, double wait_s, char *buf, size_t size);

/* Testing aid (--debug-stop-calls STEP:RANK:LABEL): this rank's first call
 * labelled `label` at step `step` never returns (the rank stops entering
 * collectives there, as a hung rank would); crash 1 (--debug-crash-calls):
 * the rank dies of SIGSEGV there instead. */
void dl_flight_stop_at(struct dl_flight *f, long step, const char *label, int crash);
/* The step its calls are recorded at. */
long dl_flight_step(struct dl_flight *f);

#endif
