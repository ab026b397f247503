/* dtype.h: the element types of tensors (f32, bf16, i32) and parameters
 * (i64: a layer's counters, op.h): their names and sizes, and the casts
 * between them.  f32 -> bf16 rounds to nearest, ties to
 * even (as torch.Tensor.bfloat16() and AVX512-BF16's vcvtneps2bf16 do), keeps
 * infinities, turns a finite value beyond bf16's largest into an infinity,
 * and keeps a NaN a NaN (quieted; its sign and top payload bits kept).
 * bf16 -> f32 and i32 -> f32 (|x| < 2^24) are exact. */
#ifndef DL_DTYPE_H
#define DL_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/bf16.h"
#include "core/error.h"
#include "core/real.h"

enum dl_dtype { DL_F32, DL_BF16, DL_I32, DL_I64, DL_DTYPE_COUNT };

/* "f32", "bf16", "i32", "i64" (enum order), NULL-terminated. */
extern const char *const dl_dtype_names[];

static inline size_t dl_dtype_size(enum dl_dtype t)
{
    return t == DL_BF16 ? 2 : t == DL_I64 ? 8 : 4;
}

/* Bytes of one value of t as this build stores it: f32 values are dl_real
 * (a double in the gradient-check build, core/real.h), the others their
 * own size. */
static inline size_t dl_dtype_value_size(enum dl_dtype t)
{
    return t == DL_F32 ? sizeof(dl_real) : dl_dtype_size(t);
}

/* The dtype named name: DL_ERR_SPEC naming `what` and the names otherwise. */
int dl_dtype_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err);
/* A training precision's spelling (--precision, --grad-dtype): "fp32" is
 * DL_F32, "bf16" DL_BF16; DL_ERR_SPEC naming `what` and both otherwise. */
int dl_precision_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err);

/* n elements of src (dtype from) into dst (dtype to; the same memory only
 * when from == to).  Supported: any dtype to itself, f32 <-> bf16, i32 ->
 * f32 and i32 -> bf16; others are DL_ERR_INTERNAL. */
int dl_cast(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err);
/* dst[i] += src[i] for n values, src of dtype from, dst of dtype to (f32
 * or bf16 each): the sum taken in f32 and rounded once to to's dtype.
 * Others are DL_ERR_INTERNAL. */
int dl_cast_add(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err);

#endif
