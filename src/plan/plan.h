/* plan.h: the memory planner.  Given buffers with a size and a lifetime
 * [first, last] on one step's timeline (forward steps, then backward steps in
 * reverse), it assigns every buffer an offset in one arena so that buffers
 * alive at the same time never overlap, and reports the arena's size (the
 * planned peak).  Greedy best-fit by decreasing size, as in TensorFlow's and
 * MXNet's static planners; deterministic for a given input. */
#ifndef DL_PLAN_H
#define DL_PLAN_H

#include <stddef.h>

#include "core/error.h"

#define DL_PLAN_ALIGN 64 /* bytes: every offset is a multiple (AVX-512 lines) */

struct dl_plan_buf {
    size_t bytes;     /* 0: needs no memory (offset 0) */
    int first, last;  /* inclusive lifetime in timeline units */
    size_t offset;    /* filled by dl_plan() */
};

/* Places the n buffers; *peak = arena bytes needed (a multiple of DL_PLAN_ALIGN). */
int dl_plan(struct dl_plan_buf *b, int n, size_t *peak, struct dl_error *err);

/* Bytes without any reuse (the sum of the rounded sizes), for comparison. */
size_t dl_plan_total(const struct dl_plan_buf *b, int n);

#endif
