/* tensor.h: a typed tensor as an op or a kernel is handed it: where its
 * values are, what they are (the per-sample shape with its dtype,
 * core/shape.h; the batch size travels in the op call beside it) and how
 * they are laid out (core/layout.h).
 *
 * Code reads the values only through the typed accessors below, which
 * check in debug builds that the tensor holds the dtype asked for and give
 * the pointer of that type, so a bf16 or i32 tensor never passes as a
 * dl_real pointer and no call site casts.  A tensor without data (a NULL
 * gradient: not wanted) passes any check and gives NULL.  f32 values are
 * dl_real (a double in the gradient-check build, core/real.h). */
#ifndef DL_TENSOR_H
#define DL_TENSOR_H

#include <assert.h>
#include <stdint.h>

#include "core/bf16.h"
#include "core/layout.h"
#include "core/real.h"
#include "core/shape.h"

struct dl_tensor {
    void *data;            /* batch x shape values, batch-major; NULL: none */
    struct dl_shape shape; /* per sample: dims and dtype */
    enum dl_layout layout; /* how a sample's values are stored (core/layout.h; PLAIN unless said) */
};

/* The tensor at data with per-sample shape shape. */
static inline struct dl_tensor dl_tensor_of(void *data, struct dl_shape shape)
{
    return (struct dl_tensor){data, shape};
}

/* The same for values the receiver only reads (an op call's inputs and
 * output gradient): it reads them through the const accessors. */
static inline struct dl_tensor dl_tensor_of_const(const void *data, struct dl_shape shape)
{
    return (struct dl_tensor){(void *)(uintptr_t)data, shape};
}

/* 1 when t has data of dtype want, or no data at all. */
static inline int dl_tensor_holds(const struct dl_tensor *t, enum dl_dtype want)
{
    return !t->data || t->shape.dtype == want;
}

static inline dl_real *dl_tensor_f32(const struct dl_tensor *t)
{
    assert(dl_tensor_holds(t, DL_F32));
    return (dl_real *)t->data;
}

static inline const dl_real *dl_tensor_const_f32(const struct dl_tensor *t)
{
    return dl_tensor_f32(t);
}

static inline dl_bf16 *dl_tensor_bf16(const struct dl_tensor *t)
{
    assert(dl_tensor_holds(t, DL_BF16));
    return (dl_bf16 *)t->data;
}

static inline const dl_bf16 *dl_tensor_const_bf16(const struct dl_tensor *t)
{
    return dl_tensor_bf16(t);
}

static inline int32_t *dl_tensor_i32(const struct dl_tensor *t)
{
    assert(dl_tensor_holds(t, DL_I32));
    return (int32_t *)t->data;
}

static inline const int32_t *dl_tensor_const_i32(const struct dl_tensor *t)
{
    return dl_tensor_i32(t);
}

/* The values of whatever dtype t holds, for code that handles every dtype
 * alike by its size (copies, casts, samples' offsets). */
static inline void *dl_tensor_any(const struct dl_tensor *t)
{
    return t->data;
}

static inline const void *dl_tensor_const_any(const struct dl_tensor *t)
{
    return t->data;
}

#endif
