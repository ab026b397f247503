/* target_bits.h: a regression target in a label word.  Labels travel from
 * the data loader through the batcher, the pipeline and the executor to the
 * loss as 32-bit words (struct dl_op_call's labels); a classification loss
 * reads each as a class id, a regression loss (op.h's float_targets) as the
 * bits of a float32 target.  These two convert, through memcpy, so no int
 * is ever read through a float pointer. */
#ifndef DL_CORE_TARGET_BITS_H
#define DL_CORE_TARGET_BITS_H

#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(float) == sizeof(int32_t) && sizeof(int) == sizeof(int32_t), "a label word holds a float32");

/* The label word holding target t. */
static inline int dl_target_bits(float t)
{
    int w;
    memcpy(&w, &t, sizeof w);
    return w;
}

/* The target a label word holds. */
static inline float dl_target_value(int w)
{
    float t;
    memcpy(&t, &w, sizeof t);
    return t;
}

#endif
