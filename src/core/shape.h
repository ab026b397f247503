/* shape.h: the per-sample descriptor of a tensor: its dims and its dtype.
 *
 * Every activation in dltrain is a batch of N samples, batch-major, and a
 * layer's shape is the per-sample part.  Dims are stored as (C, H, W), the
 * channels (features) first, and `rank` says how they read:
 *   rank 3  [C, H, W]   an image: C channels of H x W
 *   rank 2  [T, C]      a sequence: T positions of C features, stored with
 *                       C in c and the positions in h (w = 1), so that
 *                       channel-wise code (classes of a loss, channel
 *                       splits) reads features; a token input [T] of ids is
 *                       [T, 1] with dtype i32
 *   rank 1  [F]         a feature vector (F, 1, 1)
 *   rank 0              not said: 1 when h = w = 1, else 3 (dl_shape_rank)
 * The memory layout of a tensor (NCHW, blocked) is the executor's business
 * (backends/layout.h).  dtype: the element type (core/dtype.h; 0 = f32).
 * The batch size is carried separately because it changes (last partial
 * batch, micro-batches) while shapes do not. */
#ifndef DL_SHAPE_H
#define DL_SHAPE_H

#include <stdio.h>

#include "core/dtype.h"

struct dl_shape {
    int c, h, w;
    int rank;            /* 0, 1, 2 or 3 (see above) */
    enum dl_dtype dtype; /* DL_F32 unless said */
};

static inline long dl_shape_count(struct dl_shape s)
{
    return (long)s.c * s.h * s.w;
}

static inline int dl_shape_rank(struct dl_shape s)
{
    return s.rank ? s.rank : s.h == 1 && s.w == 1 ? 1 : 3;
}

/* [T, C]: T positions of c features. */
static inline struct dl_shape dl_shape_seq(int T, int c, enum dl_dtype dtype)
{
    return (struct dl_shape){c, T, 1, 2, dtype};
}

static inline int dl_shape_eq(struct dl_shape a, struct dl_shape b)
{
    return a.c == b.c && a.h == b.h && a.w == b.w && a.dtype == b.dtype && dl_shape_rank(a) == dl_shape_rank(b);
}

/* Writes "CxHxW", "TxC" (a sequence; "T" for one value per position) or
 * "F", with " i32" after a dtype other than f32, into buf; returns buf. */
static inline const char *dl_shape_str(struct dl_shape s, char *buf, size_t n)
{
    int r = dl_shape_rank(s), len;
    if (r == 2)
        len = s.c == 1 ? snprintf(buf, n, "%d", s.h) : snprintf(buf, n, "%dx%d", s.h, s.c);
    else if (r == 1)
        len = snprintf(buf, n, "%d", s.c);
    else
        len = snprintf(buf, n, "%dx%dx%d", s.c, s.h, s.w);
    if (s.dtype != DL_F32 && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " %s", dl_dtype_name(s.dtype));
    return buf;
}

#endif
