/* step_guard.h: whether a step's update is applied (doc/training.md, "Step
 * guards").  --skip-nonfinite (on unless --no-skip-nonfinite): a step whose
 * loss or whole-model gradient norm is not finite is skipped.
 * --skip-spikes Z[:W]: a step whose loss or gradient norm is more than Z
 * standard deviations above the mean of the last W applied steps' (llm.c's
 * rule; W 128 by default; nothing is judged a spike before W steps were
 * applied) is skipped too.  A skipped step changes no weight and no
 * optimizer state (Adam's step count included); its batch is consumed.
 * Every rank judges the same loss and norm (agreed over the grid before
 * the update), so every rank skips alike.  After max_in_a_row skipped
 * steps in a row the run stops. */
#ifndef DL_TRAIN_STEP_GUARD_H
#define DL_TRAIN_STEP_GUARD_H

#include "core/error.h"

#define DL_STEP_GUARD_WINDOW 128    /* --skip-spikes' window unless given */
#define DL_STEP_GUARD_IN_A_ROW 10   /* --max-skipped unless given */

struct dl_step_guard_opts {
    int nonfinite;      /* 1: skip a step whose loss or gradient norm is not finite */
    double spike_z;     /* > 0: skip spikes of more than this many standard deviations */
    int window;         /* the applied steps the spikes are measured against (0: DL_STEP_GUARD_WINDOW) */
    int max_in_a_row;   /* the run stops after this many skipped in a row (0: DL_STEP_GUARD_IN_A_ROW) */
};

struct dl_step_guard {
    struct dl_step_guard_opts o;
    double *loss, *norm;   /* the last applied steps' values, a ring of o.window */
    int count, next;
    int in_a_row;          /* skipped steps since the last applied one */
    long skipped;          /* in the run */
    char why[96];          /* the last skipped step's reason */
};

int dl_step_guard_init(struct dl_step_guard *g, const struct dl_step_guard_opts *o, struct dl_error *err);
void dl_step_guard_free(struct dl_step_guard *g);

/* The verdict on an update of mean loss `loss` and gradient norm `norm`
 * (NaN: not measured): 0, applied (its values join the window), or 1,
 * skipped (g->why says why). */
int dl_step_guard_judge(struct dl_step_guard *g, double loss, double norm);

/* 1 when the run must stop: max_in_a_row steps skipped in a row. */
int dl_step_guard_exhausted(const struct dl_step_guard *g);

#endif
