/* unblock.h: a weight gradient summed back from oneDNN's 16 x 16 blocked
 * layout into the executor's, where oneDNN's own reorder is slow
 * (unblock.c). */
#ifndef DL_ONEDNN_UNBLOCK_H
#define DL_ONEDNN_UNBLOCK_H

#include <dnnl.h>

struct dl_dnnl_unblock16 {
    long k, c, rs; /* output channels, input channels (both multiples of 16), kernel positions */
};

/* 1 (and u filled) when the loop below should replace oneDNN's reorder
 * from blocked to user (a sum). */
int dl_dnnl_unblock16_wanted(const dnnl_memory_desc_t *blocked, const dnnl_memory_desc_t *user,
                             struct dl_dnnl_unblock16 *u);
/* dst[k][c][rs] += src in ABcd16b16a. */
void dl_dnnl_unblock16_add(const struct dl_dnnl_unblock16 *u, const float *src, float *dst);

#endif
