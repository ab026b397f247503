/* trace.h: the recorder behind --trace: what one rank did when, as spans of
 * time (a layer's forward on a chunk, a receive, an allreduce bucket, the
 * optimizer), appended to one buffer per thread of the rank (a lane: the
 * compute thread, the gradient communication thread), so no thread waits
 * for another to record.  Only the first `max_steps` training steps are
 * recorded in detail (memory stays bounded); evaluations and checkpoints
 * are recorded whole.  Callers hold a pointer that is NULL when tracing is
 * off, so a disabled trace costs one pointer test per step of the executor.
 * trace_json.h turns the events into Chrome trace-event JSON;
 * parallel/trace_ranks.h aligns the ranks' clocks and gathers them. */
#ifndef DL_IO_TRACE_H
#define DL_IO_TRACE_H

#include <stddef.h>

#include "core/clock.h"
#include "core/error.h"

/* The threads of a rank whose events are recorded (a lane is appended to by
 * its own thread only). */
enum dl_trace_lane {
    DL_TRACE_COMPUTE, /* the main thread: steps, passes, layers, pipeline and tensor-parallel messages */
    DL_TRACE_COMM,    /* parallel/grad_sync.c's communication thread: gradient allreduce buckets */
    DL_TRACE_LANES
};

/* What a span is (its category in the JSON file). */
enum dl_trace_kind {
    DL_TRACE_STEP,        /* one training step, from fetching its batch to its metrics */
    DL_TRACE_DATA,        /* getting the step's batch (waiting for decode threads included) */
    DL_TRACE_PASS,        /* forward or backward of one pipeline chunk (one schedule action) */
    DL_TRACE_LAYER,       /* a layer through its kernel, one direction */
    DL_TRACE_REORDER,     /* a memory-layout conversion between layers */
    DL_TRACE_TENSOR_COMM, /* tensor parallelism: slice, allgather, reduce-scatter, allreduce */
    DL_TRACE_SEND,        /* pipeline: a non-blocking send posted, or waiting for sends to complete */
    DL_TRACE_RECV,        /* pipeline: a blocking receive, including the time waiting for the sender */
    DL_TRACE_ALLREDUCE,   /* data parallelism: a gradient bucket or the step's metrics summed */
    DL_TRACE_GRAD_WAIT,   /* the main thread waiting for the gradient allreduces */
    DL_TRACE_OPTIMIZER,   /* the optimizer's update of the weights */
    DL_TRACE_EVAL,        /* an evaluation on the test split */
    DL_TRACE_CHECKPOINT,  /* a checkpoint written */
    DL_TRACE_KINDS
};

extern const char *const dl_trace_kind_names[DL_TRACE_KINDS];

/* Direction of a layer, reorder or communication event. */
enum dl_trace_dir { DL_TRACE_NO_DIR, DL_TRACE_FORWARD, DL_TRACE_BACKWARD };

/* One span.  Strings are static or interned (dl_trace_intern): they live as
 * long as the recorder.  Unused numbers are -1 (bytes: 0). */
struct dl_trace_event {
    double t0, t1;          /* dl_clock_now() at its start and end */
    const char *name;       /* a layer's name, "recv activation", "optimizer", ... */
    const char *detail;     /* kernel or micro-batch plan, layouts, algorithm; NULL: none */
    const char *tensor;     /* messages: the layer whose output (or its gradient) travels */
    long step;              /* the global training step (1-based), stamped by dl_trace_add; 0: none */
    long bytes;             /* messages and allreduces */
    int chunk;              /* pipeline chunk */
    int peer;               /* pipeline: the stage on the other side */
    int index;              /* allreduce: bucket number */
    unsigned char kind;     /* enum dl_trace_kind */
    unsigned char dir;      /* enum dl_trace_dir */
};

/* A block of a lane's events (lanes grow by blocks, never move events). */
struct dl_trace_block;

struct dl_trace_lane_buf {
    struct dl_trace_block *first, *last;
    long n;                 /* events recorded */
    long dropped;           /* events refused: the lane reached DL_TRACE_MAX_EVENTS */
    long step;              /* what dl_trace_add stamps (the lane's thread sets it) */
};

/* Events one lane keeps at most (72 bytes each, 72 MiB); more are counted
 * as dropped. */
#define DL_TRACE_MAX_EVENTS (1L << 20)

struct dl_trace_string; /* interned strings */

struct dl_trace {
    /* Read by the main thread's callers: the current step is recorded in
     * detail (layers, passes, messages). */
    int recording;
    long max_steps;          /* steps recorded in detail (0: all) */
    long first_step, steps;  /* the first step recorded, and how many so far */
    /* Where this rank sits: world rank and grid position (d, t, p). */
    int rank, d, t, p;
    /* Clock alignment (parallel/trace_ranks.h): rank 0's clock = this rank's
     * + offset; origin: rank 0's clock when the run started (ts 0). */
    double offset, origin;
    double rtt;              /* the round trip the offset was measured over (0: shared clock) */
    double skew;             /* testing aid (--debug-trace-skew): added to every reading of this rank */
    struct dl_trace_lane_buf lane[DL_TRACE_LANES];
    struct dl_trace_string *strings;
};

/* A recorder for the first max_steps steps (0: every step); rank and grid
 * position as the process will be named ("rank R (d,t,p)"). */
struct dl_trace *dl_trace_create(long max_steps, int rank, int d, int t, int p, struct dl_error *err);
void dl_trace_free(struct dl_trace *tr);

/* 1 when the current step is being recorded in detail. */
static inline int dl_trace_on(const struct dl_trace *tr)
{
    return tr && tr->recording;
}

/* The clock when the current step is recorded, else 0 (no system call). */
static inline double dl_trace_now(const struct dl_trace *tr)
{
    return dl_trace_on(tr) ? dl_clock_now() : 0;
}

/* The step the main thread is in (or was in last). */
static inline long dl_trace_step(const struct dl_trace *tr)
{
    return tr->lane[DL_TRACE_COMPUTE].step;
}

/* The main thread starts global step `step` (1-based): recorded in detail
 * when it is among the first max_steps of the run. */
void dl_trace_step_begin(struct dl_trace *tr, long step);
/* The step started at t0 ended: records its span when it was recorded
 * (happened: 0 when no step ran after all, e.g. the epoch's data ran out)
 * and stops the detailed recording. */
void dl_trace_step_end(struct dl_trace *tr, double t0, int happened);

/* Appends ev (step stamped from the lane) to lane; the lane's own thread
 * calls.  Nothing happens when tr is NULL. */
void dl_trace_add(struct dl_trace *tr, enum dl_trace_lane lane, const struct dl_trace_event *ev);
/* A span of kind on the compute lane from t0 to now (no chunk, no peer). */
void dl_trace_span(struct dl_trace *tr, enum dl_trace_kind kind, const char *name, double t0);
/* Sets the step that lane's later events are stamped with. */
void dl_trace_lane_step(struct dl_trace *tr, enum dl_trace_lane lane, long step);

/* A copy of s that lives as long as the recorder (equal strings share one
 * copy); NULL on allocation failure (err filled). */
const char *dl_trace_intern(struct dl_trace *tr, const char *s, struct dl_error *err);

/* A copy of lane's events in the order recorded (*n of them; free() it),
 * or NULL with err filled when memory runs out. */
struct dl_trace_event *dl_trace_events(const struct dl_trace *tr, enum dl_trace_lane lane, long *n,
                                       struct dl_error *err);

#endif
