/* pool_geometry.h: window geometry shared by maxpool and avgpool (PyTorch
 * semantics).  Along one axis of length `in`, output o's window starts at
 * o*stride - pad and is kernel long; the output length is
 * floor_or_ceil((in + 2*pad - kernel) / stride) + 1, and in ceil_mode the last
 * window must still start inside the input or the left padding. */
#ifndef DL_POOL_GEOMETRY_H
#define DL_POOL_GEOMETRY_H

#include <stddef.h>

#include "ops/op.h"

/* The window attributes common to both pools; INT2 fields are {h, w}. */
struct dl_pool_attr {
    int kernel[2];
    int stride[2]; /* 0 = same as kernel */
    int pad[2];
    int ceil_mode;
};

/* Attribute-table entries for stride, pad and ceil_mode of a dl_pool_attr that
 * sits at byte offset `base` inside the op's attribute struct. */
#define DL_POOL_WINDOW_ATTRS(base) \
    {"stride", DL_ATTR_INT2, (base) + offsetof(struct dl_pool_attr, stride), 0, 0, 0, 65535, NULL, \
     "step between windows; 0 = the kernel size"}, \
    {"pad", DL_ATTR_INT2, (base) + offsetof(struct dl_pool_attr, pad), 0, 0, 0, 32767, NULL, \
     "implicit padding on each side, at most half the kernel"}, \
    {"ceil_mode", DL_ATTR_BOOL, (base) + offsetof(struct dl_pool_attr, ceil_mode), 0, 0, 0, 1, NULL, \
     "round the output size up instead of down (a partial last window is kept if it starts " \
     "inside the input or the left padding)"}

static inline int dl_pool_stride(const struct dl_pool_attr *a, int axis)
{
    return a->stride[axis] > 0 ? a->stride[axis] : a->kernel[axis];
}

/* Output length along one axis; <= 0 when not even one window fits. */
static inline int dl_pool_out_len(int in, int k, int s, int p, int ceil_mode)
{
    long span = (long)in + 2L * p - k;
    if (span < 0)
        return 0;
    long out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= (long)in + p)
        out--; /* that window would start in the right padding */
    return (int)out;
}

/* Window of output o along one axis: [*lo, *hi) clipped to the input.
 * Returns the window length counted with padding but not past the right
 * padding (PyTorch's divisor for count_include_pad). */
static inline int dl_pool_window(int o, int in, int k, int s, int p, int *lo, int *hi)
{
    int start = o * s - p;
    int end = start + k < in + p ? start + k : in + p;
    *lo = start > 0 ? start : 0;
    *hi = end < in ? end : in;
    return end - start;
}

/* Adaptive pooling (PyTorch AdaptiveAvgPool2d): output o of `out` covers
 * [floor(o*in/out), ceil((o+1)*in/out)). */
static inline void dl_pool_adaptive_window(int o, int in, int out, int *lo, int *hi)
{
    *lo = (int)((long)o * in / out);
    *hi = (int)(((long)(o + 1) * in + out - 1) / out);
}

/* check(): padding may not exceed half the kernel (as in PyTorch), so every
 * window holds at least one input element. */
static inline int dl_pool_check(const struct dl_pool_attr *a, struct dl_error *err)
{
    for (int axis = 0; axis < 2; axis++)
        if (a->pad[axis] > a->kernel[axis] / 2)
            return dl_errorf(err, DL_ERR_SPEC,
                             "pad [%d, %d] must be at most half of kernel [%d, %d] (at most [%d, %d])",
                             a->pad[0], a->pad[1], a->kernel[0], a->kernel[1], a->kernel[0] / 2,
                             a->kernel[1] / 2);
    return DL_OK;
}

/* infer(): (C, H, W) -> (C, OH, OW); rejects inputs too small for one window. */
static inline int dl_pool_infer(const struct dl_pool_attr *a, struct dl_shape in, struct dl_shape *out,
                                struct dl_error *err)
{
    int sh = dl_pool_stride(a, 0), sw = dl_pool_stride(a, 1);
    int oh = dl_pool_out_len(in.h, a->kernel[0], sh, a->pad[0], a->ceil_mode);
    int ow = dl_pool_out_len(in.w, a->kernel[1], sw, a->pad[1], a->ceil_mode);
    if (oh < 1 || ow < 1) {
        char buf[48];
        return dl_errorf(err, DL_ERR_SPEC,
                         "output would be %dx%d: input %s with kernel [%d, %d], stride [%d, %d] and "
                         "pad [%d, %d] (the padded input must be at least as large as the kernel)",
                         oh > 0 ? oh : 0, ow > 0 ? ow : 0, dl_shape_str(in, buf, sizeof buf),
                         a->kernel[0], a->kernel[1], sh, sw, a->pad[0], a->pad[1]);
    }
    *out = (struct dl_shape){in.c, oh, ow};
    return DL_OK;
}

/* Input elements summed over all windows along one axis (for flops()). */
static inline long dl_pool_window_total(const struct dl_pool_attr *a, int axis, int in, int out)
{
    long total = 0;
    for (int o = 0; o < out; o++) {
        int lo, hi;
        dl_pool_window(o, in, a->kernel[axis], dl_pool_stride(a, axis), a->pad[axis], &lo, &hi);
        total += hi - lo;
    }
    return total;
}

#endif
