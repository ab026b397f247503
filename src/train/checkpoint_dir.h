/* checkpoint_dir.h: a folder of checkpoints: file names by step, the latest
 * valid one (for --resume), rotation (--keep N), and when to write the next
 * one (--checkpoint-every STEPS|SECONDS).  One writer per folder (rank 0). */
#ifndef DL_CHECKPOINT_DIR_H
#define DL_CHECKPOINT_DIR_H

#include <stddef.h>

#include "core/error.h"

/* DIR/ckpt-<step, 10 digits>.safetensors: names sort by step. */
int dl_checkpoint_path(char *out, size_t n, const char *dir, long global_step, struct dl_error *err);

/* Finds the checkpoint with the highest step in dir that opens and verifies
 * (dl_checkpoint_probe).  Damaged or foreign files are skipped; each skip
 * appends one line "FILE: reason\n" to warnings (truncated to wn bytes; may be
 * NULL).  *found is 0 when dir holds no valid checkpoint (not an error);
 * DL_ERR_IO when dir cannot be read. */
int dl_checkpoint_find_latest(const char *dir, char *path_out, size_t n, int *found, char *warnings, size_t wn,
                              struct dl_error *err);

/* Deletes all but the keep (>= 1) newest checkpoints of dir, and temporary
 * files that a killed writer left behind.  *removed counts the files deleted
 * (may be NULL). */
int dl_checkpoint_rotate(const char *dir, int keep, int *removed, struct dl_error *err);

/* --checkpoint-every: "500" = every 500 steps; "90s", "15m", "2h" = when that
 * much time has passed since the last checkpoint. */
struct dl_checkpoint_every {
    long steps;      /* > 0: every this many steps */
    double seconds;  /* > 0: every this many seconds */
};
int dl_checkpoint_parse_every(const char *text, struct dl_checkpoint_every *every, struct dl_error *err);
/* 1 when a checkpoint is due, given the steps and seconds since the last one.
 * In data parallel, let rank 0 decide (clocks differ) and share the answer. */
int dl_checkpoint_due(const struct dl_checkpoint_every *every, long steps_since, double seconds_since);

#endif
