/* mbplan.h: a micro-batch plan (what the tuner decides, what the executor
 * runs).  For each layer and direction (forward, backward data, backward
 * weights): the mini-batch as a sequence of micro-batches, each run by a
 * kernel, one after another in the direction's own slice of the workspace;
 * weight gradients accumulate over the parts.  Layers that are not tuned run
 * undivided with the kernel the registry (or --kernel) picks. */
#ifndef DL_PLAN_MBPLAN_H
#define DL_PLAN_MBPLAN_H

#include <stddef.h>

#include "backends/kernel.h"

#define DL_MBPLAN_MAX_GROUPS 16 /* distinct (kernel, micro-batch) runs per direction */

/* count consecutive micro-batches of mb samples, each run by kernel. */
struct dl_mbpart {
    const struct dl_kernel *kernel;
    int mb, count;
};

/* One direction of one layer: parts in order, and its workspace slice. */
struct dl_mbplan_dir {
    int n;                                      /* 0: the direction does not run */
    struct dl_mbpart part[DL_MBPLAN_MAX_GROUPS];
    size_t ws_offset, ws_bytes;                 /* slice of the plan's workspace */
    double time_s;                              /* predicted (measured) time of the whole batch */
};

struct dl_mbplan_layer {
    int tuned;                                  /* 0: undivided, default kernel */
    struct dl_mbplan_dir dir[DL_N_DIRS];
};

struct dl_mbplan {
    int batch;                                  /* the mini-batch the plan divides */
    int n_layers;
    struct dl_mbplan_layer *layer;              /* [n_layers] */
    size_t workspace_bytes;                     /* the largest ws_offset + ws_bytes */
};

int dl_mbplan_alloc(struct dl_mbplan *p, int n_layers, int batch, struct dl_error *err);
void dl_mbplan_free(struct dl_mbplan *p);

/* Samples covered by d (sum of mb x count). */
int dl_mbplan_dir_samples(const struct dl_mbplan_dir *d);

/* Appends count micro-batches of mb samples run by k, merging with the last
 * run when it has the same kernel and size. */
int dl_mbplan_dir_add(struct dl_mbplan_dir *d, const struct dl_kernel *k, int mb, int count, struct dl_error *err);

/* "onednn 4x2 + openblas 1x1" style text of d. */
void dl_mbplan_dir_str(const struct dl_mbplan_dir *d, char *buf, size_t size);

/* 1 when both directions run the same parts in the same order. */
int dl_mbplan_dir_same(const struct dl_mbplan_dir *a, const struct dl_mbplan_dir *b);

/* Sets workspace_bytes from the slices. */
void dl_mbplan_finish(struct dl_mbplan *p);

#endif
