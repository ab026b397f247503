/* run_scalars.h: a training run's reports as TensorBoard scalars
 * (--tensorboard): the tag each --metrics key becomes, the START event a
 * run (or a resumed run) begins its curves with, each rank's planned memory,
 * and a parameter server's workers under tags of their own (workerW/KEY). */
#ifndef DL_CLI_RUN_SCALARS_H
#define DL_CLI_RUN_SCALARS_H

#include "io/tensorboard.h"
#include "train/trainer.h"

struct dl_run_scalars {
    struct dl_tensorboard tb;  /* open: rank 0 writes */
    int started;               /* the START event is written with the first step */
    double *memory_bytes;      /* each rank's planned bytes, written with the first step */
    int memory_ranks;
    long last_step;            /* the last step reported (an epoch's scalars' step) */
};

/* Rank r of n plans bytes (the first call sizes the table). */
void dl_run_scalars_memory(struct dl_run_scalars *s, int r, int n, double bytes);

/* A step's --metrics keys and values (from "loss" on); keys without a tag
 * (time_s) are left out.  Pushed to the system after each step. */
void dl_run_scalars_step(struct dl_run_scalars *s, const struct dl_step_report *r, int n, const char *const *keys,
                         const double *vals);

/* An epoch's scores at its last step, an evaluation's at its step; both
 * sync the file to disk. */
void dl_run_scalars_epoch(struct dl_run_scalars *s, const struct dl_epoch_report *r);
void dl_run_scalars_eval(struct dl_run_scalars *s, long step, const struct dl_epoch_report *r);

/* Closes the file (synced) and frees; an error names the file. */
int dl_run_scalars_close(struct dl_run_scalars *s, struct dl_error *err);

#endif
