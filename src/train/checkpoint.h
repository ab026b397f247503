/* checkpoint.h: saving and restoring the whole state of a training run as one
 * safetensors file (io/safetensors.h), readable by PyTorch, JAX and NumPy.
 *
 * Tensors (dl_real as F32, PyTorch layouts, graph order):
 *   <layer>.<param>                 weights and biases, batch-norm running
 *                                   statistics: conv1.weight, bn1.running_mean
 *   optim.<layer>.<param>.<slot>    optimizer state, slot named as in
 *                                   torch.optim: momentum_buffer (SGD), sum
 *                                   (AdaGrad), square_avg + momentum_buffer
 *                                   (RMSProp), exp_avg + exp_avg_sq (Adam/AdamW)
 *   rng.layers                      U64 [layers, 4]: each layer's xoshiro
 *                                   state (dropout masks continue exactly)
 * Metadata (strings): format, step, epoch, epoch_step, seed, the running sums
 * of the epoch in progress, optimizer and optimizer_step, net_crc32, world_size
 * dp tp pp, plus the data checksum that the reader verifies.
 *
 * Weights and optimizer state are identical on every data-parallel rank, so
 * rank 0 saves and every rank loads: a checkpoint resumes on any number of
 * ranks (and with tensor or pipeline ranks on any grid: checkpoint_grid.h
 * saves and loads the whole tensors of a sharded run through these
 * functions).  Loading checks everything before it overwrites anything. */
#ifndef DL_CHECKPOINT_H
#define DL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/exec.h"
#include "optim/optim.h"

#define DL_CHECKPOINT_FORMAT "dltrain-checkpoint-1"

/* Everything in a checkpoint that is not a tensor. */
struct dl_checkpoint_meta {
    long global_step;       /* steps taken so far (the schedule's position) */
    long epoch, step;       /* data cursor: the next batch is `step` of `epoch`
                               (struct dl_batcher's epoch and step) */
    uint64_t seed;          /* train.seed: the data order derives from (seed, epoch) */
    double epoch_loss_sum;  /* sums over the epoch in progress, so that the epoch */
    long epoch_seen;        /* report after a resume equals the uninterrupted one */
    long epoch_correct;
    uint32_t net_crc32;     /* dl_checkpoint_net_hash of the network file, 0: unknown */
    int world_size, dp, tp, pp; /* parallel layout that wrote it (informational) */
    char optimizer[16];     /* optim->algo->name; "" when saved without optimizer */
    long optimizer_step;    /* optim->t */
};

/* What the metadata of a checkpoint can hold for the run that loads it;
 * a 0 is unknown and not checked. */
struct dl_checkpoint_limits {
    long steps_per_epoch;   /* epoch_step <= it */
    long epoch_samples;     /* epoch_seen <= it: the training split's samples */
    long positions;         /* epoch_correct <= epoch_seen x it: labels per sample */
};

/* The live state of a run, as pointers: nothing is copied until save/load. */
struct dl_run_view {
    const struct dl_graph *g;
    struct dl_exec *exec;   /* weights, state, per-layer RNGs */
    struct dl_optim *optim; /* may be NULL (then no optimizer state is saved/loaded) */
    const struct dl_checkpoint_limits *limits; /* NULL: the metadata checked against itself only */
};

/* Writes the state of v plus meta to path (temporary file, fsync, rename):
 * on any error, including a full disk, the file previously at path is
 * untouched and err names the path and the reason (DL_ERR_IO). */
int dl_checkpoint_save(const char *path, const struct dl_run_view *v, const struct dl_checkpoint_meta *meta,
                       struct dl_error *err);

/* Verifies path completely (format, checksum, the metadata values
 * (dl_checkpoint_meta_check with v->limits), every tensor of the graph
 * present with the expected dtype and shape and finite values, no tensor
 * the graph does not have, the same optimizer) and only then copies
 * weights, state, RNG states and the optimizer state (and t) into v, and the
 * metadata into *meta.  On error v is unchanged.  DL_ERR_IO: cannot read;
 * DL_ERR_DATA: damaged, altered or not a checkpoint; DL_ERR_SPEC: a valid
 * checkpoint of a different network or optimizer (the message names the
 * tensor, expected vs found). */
int dl_checkpoint_load(const char *path, const struct dl_run_view *v, struct dl_checkpoint_meta *meta,
                       struct dl_error *err);
/* The same from a buffer (name stands for the file in messages). */
int dl_checkpoint_load_memory(const char *name, const void *buf, size_t size, const struct dl_run_view *v,
                              struct dl_checkpoint_meta *meta, struct dl_error *err);

/* Checks every metadata value against what it can be: against the others
 * (epoch_step and epoch <= step; nothing correct, no loss when nothing was
 * seen; dp, tp, pp and their product <= world_size when it is known; no
 * optimizer step without an optimizer) and, when lim is not NULL, against
 * the run.  The loaders call it (with v->limits) before anything is
 * copied.  DL_ERR_DATA naming name, the key, the value and the range. */
int dl_checkpoint_meta_check(const char *name, const struct dl_checkpoint_meta *m,
                             const struct dl_checkpoint_limits *lim, struct dl_error *err);

/* The first element of an F32 or F64 tensor of a file that is NaN or
 * infinite (its index, and its value in *value), or -1: the loaders
 * (checkpoints, --init-from) refuse such weights, naming the tensor. */
struct dl_st_entry;
long dl_checkpoint_first_nonfinite(const struct dl_st_entry *t, double *value);

/* Reads only the metadata of a valid checkpoint (full format and checksum
 * verification, no network needed): for discovery and for `dltrain` messages. */
int dl_checkpoint_probe(const char *path, struct dl_checkpoint_meta *meta, struct dl_error *err);

/* CRC-32 of the bytes of the network file at path (stored as net_crc32, so
 * that a resume with an edited network file can be pointed out). */
int dl_checkpoint_net_hash(const char *path, uint32_t *crc, struct dl_error *err);

#endif
