/* buckets.h: the flat weight vector cut into gradient buckets (tensor
 * fusion) in the order backward finishes them: from the last layer's
 * weights down, each bucket whole layers of at most `per` values, a layer
 * larger than that cut into pieces of `per` values (or, whole_layers, a
 * bucket of its own: a parameter's gradient in one piece of memory), never
 * mixing per-expert weights with others.  Bucket k is final once
 * backward has passed weight index lo (the grad_hook of a layer whose
 * weights begin at or below it).  Data parallelism's overlapped allreduce
 * (grad_sync.c) and ZeRO stage 2's reductions (zero_grads.c) share it. */
#ifndef DL_PARALLEL_BUCKETS_H
#define DL_PARALLEL_BUCKETS_H

#include "exec/exec.h"

struct dl_bucket_range {
    long lo, hi;    /* weights [lo, hi) of the flat vector */
    int per_expert; /* 1: only per-expert weights (op.h's per_expert), which a bucket never mixes with
                       others (with expert ranks they are summed over another group) */
};

/* *out (malloc'd, *n ranges, the last weights first) for executor e. */
int dl_buckets_cut(const struct dl_exec *e, long per, int whole_layers, struct dl_bucket_range **out, int *n,
                   struct dl_error *err);

#endif
