/* tensorboard.h: TensorBoard event files (--tensorboard DIR): scalars as
 * training goes, in the file TensorBoard, PyTorch's SummaryWriter and
 * Lightning write (events.out.tfevents.SECONDS.HOST.PID.N in DIR): TFRecord
 * records (io/tfrecord.h) of Event messages (tensorboard_event.proto,
 * encoded by protobuf-c), the first one naming the file version.
 *
 * An event file is a log that TensorBoard reads while it grows, so unlike
 * every other file the tool writes it is not written under a temporary name
 * and renamed: it is appended to in place, each record whole with one write
 * (one that fails part-way, on a full disk, is cut off again), and each
 * record's checksums let a reader stop at a record cut short by a crash
 * after reading all those before it.  A run that starts again at a step (a resume) writes a new
 * file that begins with a SessionLog START event at that step, on which
 * TensorBoard drops what earlier files hold at that step and after, so a
 * resumed run's curves continue without duplicated steps.
 *
 * The build has the writer when configure found protobuf-c (protoc-c) and
 * ISA-L; without them dl_tensorboard_open refuses with DL_ERR_SPEC. */
#ifndef DL_TENSORBOARD_H
#define DL_TENSORBOARD_H

#include <stddef.h>

#include "core/error.h"

struct dl_tensorboard {
    int fd;
    char path[4200];
    int err_no; /* the first write error (errno), reported by flush and close */
    int open;
};

/* Creates dir (and the folders above it) and a new event file in it, whose
 * first record is the file-version event. */
int dl_tensorboard_open(struct dl_tensorboard *tb, const char *dir, struct dl_error *err);

/* A run starts (or starts again) at step: the SessionLog START event. */
void dl_tensorboard_start(struct dl_tensorboard *tb, long step);

/* One event at step holding n scalars (tags[i] = values[i], stored as
 * float32 as TensorBoard's scalars are; NaN and infinities kept). */
void dl_tensorboard_scalars(struct dl_tensorboard *tb, long step, int n, const char *const *tags,
                            const double *values);

/* After each step: nothing to do, as each record goes to the kernel whole
 * when it is made (so a killed process leaves every step it reported). */
void dl_tensorboard_push(struct dl_tensorboard *tb);

/* Pushes what is written to the disk (fsync): at each evaluation
 * and at the end, so a preempted job's curves survive it. */
int dl_tensorboard_flush(struct dl_tensorboard *tb, struct dl_error *err);

/* Flushes and closes; an error names the file and the first write error. */
int dl_tensorboard_close(struct dl_tensorboard *tb, struct dl_error *err);

/* What the build writes event files with, for --version: "protobuf-c 1.4.1,
 * ISA-L 2.30.0", or "no (...)" where it cannot. */
void dl_tensorboard_libraries(char *buf, size_t n);

#endif
