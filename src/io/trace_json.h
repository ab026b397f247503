/* trace_json.h: --trace files in Chrome's trace-event format (JSON object
 * form; chrome://tracing and ui.perfetto.dev open it).  Each rank is a
 * process named "rank R (d,t,p)" with three threads: compute (steps,
 * pipeline passes, layers, messages, optimizer), communication (gradient
 * allreduce buckets) and idle (the gaps of each recorded step in which the
 * compute thread ran no layer, reorder or optimizer).  Every span is an "X"
 * event with ts and dur in microseconds on rank 0's clock.  A rank renders
 * its own events (dl_trace_json_rank); one writer puts the ranks' texts
 * into one file, written atomically, with a summary per rank (busy and idle
 * seconds of the recorded steps, clock offset) under "dltrain". */
#ifndef DL_IO_TRACE_JSON_H
#define DL_IO_TRACE_JSON_H

#include <stddef.h>

#include "io/atomic_file.h"
#include "io/trace.h"

/* One rank's part of the file: its events (comma-separated JSON objects,
 * metadata events naming the process and threads first) and its summary
 * (one JSON object). */
struct dl_trace_text {
    char *events, *summary;
    size_t events_len, summary_len;
};

int dl_trace_json_rank(const struct dl_trace *tr, struct dl_trace_text *out, struct dl_error *err);
void dl_trace_text_free(struct dl_trace_text *t);

/* The file being written: ranks' texts are added in rank order and their
 * summaries kept for the end. */
struct dl_trace_file {
    struct dl_atomic_file f;
    int ranks;
    char *summaries;
    size_t summaries_len;
};

/* Starts path (a temporary file until commit); `ranks` is the world size
 * written into the file's description. */
int dl_trace_file_open(struct dl_trace_file *tf, const char *path, int ranks, struct dl_error *err);
int dl_trace_file_add(struct dl_trace_file *tf, const struct dl_trace_text *t, struct dl_error *err);
/* Finishes the JSON and renames it into place. */
int dl_trace_file_commit(struct dl_trace_file *tf, struct dl_error *err);
/* Drops the temporary file (path is left as it was). */
void dl_trace_file_abort(struct dl_trace_file *tf);

#endif
