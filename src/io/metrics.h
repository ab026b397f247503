/* metrics.h: training metrics as JSON lines (one object per event), for
 * plotting and for comparing runs.  The file is written as PATH.partial,
 * flushed after every line, and committed to PATH when the run ends through
 * io/atomic_file.h (fsync + rename), so a reader never mistakes an
 * interrupted log for a finished one. */
#ifndef DL_METRICS_H
#define DL_METRICS_H

#include "core/error.h"
#include "io/atomic_file.h"

struct dl_metrics {
    struct dl_atomic_file file;
    int open;
};

int dl_metrics_open(struct dl_metrics *m, const char *path, struct dl_error *err);
/* Writes {"event": event, k1: v1, ...}; keys and values are given as n pairs.
 * A write error is remembered and reported by dl_metrics_close. */
void dl_metrics_write(struct dl_metrics *m, const char *event, int n, const char *const *keys,
                      const double *values);
/* One routing layer's load as a line {"event":"experts","global_step":S,
 * "layer":NAME,"taken":[...],"dropped":D,"choices":A}. */
void dl_metrics_write_experts(struct dl_metrics *m, long step, const char *layer, int experts, const float *taken,
                              double dropped, double choices);
/* Flushes to disk and renames into place; on error PATH.partial is removed
 * and an existing PATH is left as it was. */
int dl_metrics_close(struct dl_metrics *m, struct dl_error *err);

#endif
