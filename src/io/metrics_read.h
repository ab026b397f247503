/* metrics_read.h: --metrics JSON lines read back (`dltrain plot`, its fuzz
 * target): a run's steps in order of their global step (a parameter
 * server's workers, which each report their own steps, averaged per step)
 * and its validations (eval lines, and the test scores of epoch lines at
 * that epoch's last step). */
#ifndef DL_METRICS_READ_H
#define DL_METRICS_READ_H

#include "core/error.h"

/* A growing array of doubles. */
struct dl_column {
    double *v;
    int n, cap;
};

/* Appends v; returns 0, or -1 when memory runs out. */
int dl_column_push(struct dl_column *c, double v);

struct dl_metrics_run {
    struct dl_column step, time, loss, accuracy, rate;   /* per step; time_s, NaN where absent */
    /* per step, NaN where absent: a mixture of experts' most loaded expert
     * over its layer's mean, the share of choices dropped, the balancing loss */
    struct dl_column expert_load, expert_dropped, aux_loss;
    int experts;                                         /* some step has expert_load */
    struct dl_column vstep, vtime, vloss, vaccuracy;     /* per validation */
    int tokens;                                          /* rate is tokens/s (else samples/s) */
};

/* Reads path into r (zeroed first).  A line that is not a JSON object is
 * DL_ERR_DATA naming path:line:column; a file without step lines too. */
int dl_metrics_read(const char *path, struct dl_metrics_run *r, struct dl_error *err);
void dl_metrics_run_free(struct dl_metrics_run *r);

#endif
