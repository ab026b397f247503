/* batch_ahead.h: the training batches on their way from the batcher to the
 * executors.  On a device with host memory (the CPU) a step's batch is
 * read into one host buffer when the step starts, as the batcher gives it,
 * and the executors read it in place.  On a device without host memory (a
 * GPU, the emulated device) it is read into pinned host memory one step
 * ahead: while step k computes, batch k+1 is already read and its copy
 * queued on the device's copy stream (device.h's copy_ahead), into the
 * other of two device buffers; step k+1's kernels wait for that copy
 * (wait_mark), and the copy into a buffer waits for the kernels of the
 * step that last read it (a mark recorded after that step).  The batcher's
 * cursor is then one batch past the step being trained, and cursor() says
 * where the step is (a checkpoint resumes there). */
#ifndef DL_TRAIN_BATCH_AHEAD_H
#define DL_TRAIN_BATCH_AHEAD_H

#include "backends/device.h"
#include "data/batcher.h"
#include "io/trace.h"

/* One batch: its host buffers, its device buffers (NULL on the host), what
 * the batcher said of it, and the marks that order its copy. */
struct dl_batch_slot {
    void *x;                      /* host: pinned on a device without host memory (the input's dtype) */
    int *y;
    void *x_device;               /* the device's copy (NULL: the executors read x) */
    int *y_device;
    int n;                        /* samples on this rank: > 0, or 0 (the epoch's end), -1 (unreadable) */
    int global;                   /* samples in the whole batch */
    long offset;                  /* index of this rank's first sample in it */
    double label_norm;            /* its labelled positions per sample (batcher.h's last_label_norm) */
    struct dl_device_mark copied; /* recorded on the copy stream behind its copy */
    struct dl_device_mark read;   /* recorded on the kernels' stream after the step that read it */
};

struct dl_batch_ahead {
    struct dl_batcher *batcher;
    const struct dl_device *device;
    int ahead;                    /* 1: batches are read and copied a step ahead (no host memory) */
    struct dl_batch_slot slot[2];
    int cur;                      /* the slot of the step being trained */
    int held;                     /* 1: slot 1 - cur holds the next batch, read ahead */
    int marks;                    /* 1: the slots' marks were initialised (mark_init) */
    size_t sample_bytes;          /* bytes of one sample's input values (their dtype's) */
    struct dl_trace *trace;       /* --trace: the copies ahead are spans (NULL: off) */
};

/* Buffers for batches of up to max_local samples of the network's input
 * (per-sample shape and dtype: graph.h's input) from batcher, for
 * executors on device (two of each and the marks when it has no host
 * memory, else one host buffer). */
int dl_batch_ahead_init(struct dl_batch_ahead *ba, struct dl_batcher *batcher, const struct dl_device *device,
                        int max_local, struct dl_shape input, struct dl_trace *trace, struct dl_error *err);
void dl_batch_ahead_free(struct dl_batch_ahead *ba);

/* Forgets a batch read ahead (a new epoch: the batcher starts over). */
void dl_batch_ahead_reset(struct dl_batch_ahead *ba);

/* The step's batch: the one read ahead, else read now (and, without host
 * memory, copied to the device).  Returns its samples on this rank as
 * dl_batcher_next does (0: the epoch's data ran out; -1: a sample could
 * not be read, or the copy failed: err says why), *slot its buffers. */
int dl_batch_ahead_next(struct dl_batch_ahead *ba, const struct dl_batch_slot **slot, struct dl_error *err);

/* Without host memory: reads the batch after the current one and queues
 * its copy, to run while the current step computes (a trainer calls it
 * when another step follows).  The host: nothing. */
int dl_batch_ahead_prefetch(struct dl_batch_ahead *ba, struct dl_error *err);

/* The current step's kernels are queued: its buffers may be refilled once
 * they have run. */
int dl_batch_ahead_release(struct dl_batch_ahead *ba, struct dl_error *err);

/* The batcher's step of the batch being trained next (its cursor less the
 * batch read ahead): where a checkpoint taken now resumes. */
long dl_batch_ahead_cursor(const struct dl_batch_ahead *ba);

#endif
