/* pages.h: handing pages of host memory back to the kernel while keeping
 * their addresses (ZeRO stage 3's weights, parallel/zero_weights.h): the
 * pages read as zero until written again. */
#ifndef DL_CORE_PAGES_H
#define DL_CORE_PAGES_H

#include <stddef.h>

/* The pages wholly inside bytes [lo, hi) of base (an allocation of at
 * least hi bytes) that hold none of bytes [keep_lo, keep_hi) handed back. */
void dl_pages_release(void *base, size_t lo, size_t hi, size_t keep_lo, size_t keep_hi);

#endif
