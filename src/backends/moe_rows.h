/* moe_rows.h: a mixture of experts' rows on their way to the ranks that
 * hold their experts and back (expert parallelism: ops/op.h's
 * dl_expert_group), for the moe kernels.  A rank's rows are sorted by
 * expert, expert e's at [offset[e], offset[e + 1]) of E = ranks x EL
 * experts, rank r holding experts [r EL, (r + 1) EL); so each rank's share
 * is one run of rows.  What a rank's experts receive is laid out by
 * expert, then by the sending rank (expert-major): each local expert's
 * rows are contiguous, one matrix product apart. */
#ifndef DL_BACKENDS_MOE_ROWS_H
#define DL_BACKENDS_MOE_ROWS_H

#include "ops/op.h"

/* received[s EL + j] (E ints): the rows rank s sends this rank's expert j,
 * from every rank's offsets (an all-to-all of EL counts a rank). */
int dl_moe_rows_count(const struct dl_expert_group *g, const int *offset, long E, int *received,
                      struct dl_error *err);

/* The rows this rank's experts received (the sum of received). */
long dl_moe_rows_received(const int *received, long E);

/* Local expert j's rows in the expert-major layout: [first[j], first[j + 1]). */
void dl_moe_rows_first(const int *received, int ranks, long EL, long *first);

/* rows [offset[E]][width] (sorted by expert) to their experts' ranks, into
 * out [received][width] expert-major. */
int dl_moe_rows_dispatch(const struct dl_expert_group *g, const int *offset, const int *received, long E,
                         const float *rows, long width, float *out, struct dl_error *err);

/* Back: this rank's experts' rows [received][width] (expert-major) to the
 * ranks that sent them, into out [offset[E]][width], sorted as they left. */
int dl_moe_rows_return(const struct dl_expert_group *g, const int *offset, const int *received, long E,
                       const float *rows, long width, float *out, struct dl_error *err);

#endif
