/* shape.h: the per-sample shape of a tensor.
 *
 * Every activation in dltrain is a batch of N samples laid out NCHW, and a
 * layer's shape is the per-sample part (C, H, W).  A feature vector of F values
 * is (F, 1, 1); the loss is (1, 1, 1).  The batch size is carried separately
 * because it changes (last partial batch, micro-batches) while shapes do not. */
#ifndef DL_SHAPE_H
#define DL_SHAPE_H

#include <stdio.h>

struct dl_shape {
    int c, h, w;
};

static inline long dl_shape_count(struct dl_shape s)
{
    return (long)s.c * s.h * s.w;
}

static inline int dl_shape_eq(struct dl_shape a, struct dl_shape b)
{
    return a.c == b.c && a.h == b.h && a.w == b.w;
}

/* Writes "CxHxW" (or "F" for a vector) into buf and returns buf. */
static inline const char *dl_shape_str(struct dl_shape s, char *buf, size_t n)
{
    if (s.h == 1 && s.w == 1)
        snprintf(buf, n, "%d", s.c);
    else
        snprintf(buf, n, "%dx%dx%d", s.c, s.h, s.w);
    return buf;
}

#endif
