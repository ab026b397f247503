/* metrics.h: training metrics as JSON lines (one object per event), for
 * plotting and for comparing runs.  The file is written as PATH.partial,
 * flushed after every line, and renamed to PATH when the run ends, so a
 * reader never mistakes an interrupted log for a finished one. */
#ifndef DL_METRICS_H
#define DL_METRICS_H

#include <stdio.h>

#include "core/error.h"

struct dl_metrics {
    FILE *f;
    char path[1024];
    char partial[1040];
};

int dl_metrics_open(struct dl_metrics *m, const char *path, struct dl_error *err);
/* Writes {"event": event, k1: v1, ...}; keys and values are given as n pairs. */
void dl_metrics_write(struct dl_metrics *m, const char *event, int n, const char *const *keys,
                      const double *values);
/* Flushes, closes and renames into place. */
int dl_metrics_close(struct dl_metrics *m, struct dl_error *err);

#endif
