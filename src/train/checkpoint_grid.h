/* checkpoint_grid.h: checkpoints of a run whose ranks hold shards of the
 * network (a grid of tensor or pipeline ranks, doc/parallel.md).  Saving
 * gathers every parameter, the batch-norm state and each optimizer slot
 * from the shards into the whole tensors one process holds, and rank 0
 * writes exactly the file one process writes (train/checkpoint.h: whole
 * tensors, PyTorch names, atomic write).  Loading reads the whole tensors
 * on every rank and keeps this rank's slices, so the file resumes on any
 * grid or on one process, and a one-process file resumes on a grid.
 * The executor's vectors (and the optimizer's state) may live on a device
 * without host memory: they travel through its copies (exec/gather.c), so
 * a run on such a device checkpoints through these functions too. */
#ifndef DL_CHECKPOINT_GRID_H
#define DL_CHECKPOINT_GRID_H

#include "comm/comm.h"
#include "train/checkpoint.h"

/* Collective over world (every rank of the grid calls it): v holds this
 * rank's shard (v->exec->shard) and v->g the whole network; rank 0 writes
 * path, the others only send.  Errors of the write are rank 0's (DL_ERR_IO:
 * the file, the run may go on; any other: rank 0 may have failed before the
 * gather completed, and the run cannot go on). */
int dl_checkpoint_save_gathered(const char *path, struct dl_comm *world, const struct dl_run_view *v,
                                const struct dl_checkpoint_meta *meta, struct dl_error *err);

/* The same in two steps, so that the file can be written apart from the
 * run (--checkpoint-async): take (collective, as above) copies the state
 * into rank 0's *out (NULL elsewhere), a snapshot the run no longer
 * touches; save writes it (no messages; any thread), free frees it. */
struct dl_checkpoint_snapshot;
int dl_checkpoint_snapshot_take(struct dl_comm *world, const struct dl_run_view *v,
                                struct dl_checkpoint_snapshot **out, struct dl_error *err);
int dl_checkpoint_snapshot_save(const struct dl_checkpoint_snapshot *s, const char *path,
                                const struct dl_checkpoint_meta *meta, struct dl_error *err);
void dl_checkpoint_snapshot_free(struct dl_checkpoint_snapshot *s);

/* Verifies path as dl_checkpoint_load does against the whole network, then
 * copies this rank's slices of the weights, state and optimizer slots, the
 * RNG states and the optimizer's step count into v.  No messages; on error
 * v is unchanged (but for a device copy failing half-way). */
int dl_checkpoint_load_sliced(const char *path, const struct dl_run_view *v, struct dl_checkpoint_meta *meta,
                              struct dl_error *err);

#endif
