/* dtype.h: the element types of tensors (f32, bf16, i32) and parameters
 * (i64: a layer's counters, op.h): one table of their facts (name, the
 * spelling of a training precision, size, float or integer, the bulk
 * conversions to and from f32), the parsers that look names up in it, and
 * the casts between dtypes.  f32 -> bf16 rounds to nearest, ties to
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

/* A dtype's facts, one row per dtype (ggml's type traits are the model):
 * adding a dtype is its enum value, its row in dtype.c and its kernels. */
struct dl_dtype_traits {
    const char *name;      /* as shapes and messages print it: "f32", "bf16", "i32", "i64" */
    const char *precision; /* its spelling as a training precision (--precision, --grad-dtype,
                              train.precision, --save-dtype): "fp32", "bf16"; NULL if it is none */
    size_t size;           /* bytes of one value */
    int is_float;          /* 1 for a floating-point dtype, 0 for an integer one */
    /* n values of this dtype to f32 (src and dst not overlapping, or the
     * same memory for f32 itself), and n f32 values to this dtype; NULL
     * where that conversion does not exist (f32 -> i32, i64 either way). */
    void (*to_f32)(const void *src, float *dst, long n);
    void (*from_f32)(const float *src, void *dst, long n);
};

/* The table, indexed by enum dl_dtype (dtype.c). */
extern const struct dl_dtype_traits dl_dtype_table[DL_DTYPE_COUNT];

static inline const struct dl_dtype_traits *dl_dtype_traits(enum dl_dtype t)
{
    return &dl_dtype_table[t];
}

static inline const char *dl_dtype_name(enum dl_dtype t)
{
    return dl_dtype_table[t].name;
}

static inline size_t dl_dtype_size(enum dl_dtype t)
{
    return dl_dtype_table[t].size;
}

/* The table's precision spellings, NULL-terminated: train.precision's
 * values for the YAML reader.  The dtypes that are training precisions come
 * first in enum dl_dtype, so index i is dtype i ("fp32" DL_F32, "bf16"
 * DL_BF16; test_dtype holds it). */
extern const char *const dl_precision_names[];

/* train.precision's values (--precision): the precisions above, then
 * "auto" at index DL_PRECISION_AUTO (the faster of the two, measured on this
 * machine: train/precision_auto.h). */
extern const char *const dl_train_precision_names[];
#define DL_PRECISION_AUTO 2

/* Bytes of one value of t as this build stores it: f32 values are dl_real
 * (a double in the gradient-check build, core/real.h), the others their
 * own size. */
static inline size_t dl_dtype_value_size(enum dl_dtype t)
{
    return t == DL_F32 ? sizeof(dl_real) : dl_dtype_size(t);
}

/* A set of dtypes: the bit of each, or'ed (every one: DL_DTYPE_ALL). */
#define DL_DTYPE_BIT(t) (1u << (t))
#define DL_DTYPE_ALL (DL_DTYPE_BIT(DL_DTYPE_COUNT) - 1u)

/* The dtype named name (the table's names): DL_ERR_SPEC naming `what` and
 * the names otherwise. */
int dl_dtype_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err);
/* The same among the dtypes of the set `among` only (a network's input is
 * f32 or i32): DL_ERR_SPEC naming `what` and those names otherwise
 * ("expected one of f32, i32, found 'x'"). */
int dl_dtype_parse_among(const char *what, const char *name, unsigned among, enum dl_dtype *out,
                         struct dl_error *err);
/* The dtype whose precision spelling is name (--precision, --grad-dtype,
 * --save-dtype): "fp32" is DL_F32, "bf16" DL_BF16; DL_ERR_SPEC naming `what`
 * and the spellings ("expected fp32 or bf16") otherwise. */
int dl_precision_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err);

/* n elements of src (dtype from) into dst (dtype to; the same memory only
 * when from == to).  Supported: any dtype to itself, and from a dtype with
 * a to_f32 to one with a from_f32 (f32 <-> bf16, i32 -> f32, i32 -> bf16,
 * through f32); others are DL_ERR_INTERNAL. */
int dl_cast(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err);
/* dst[i] += src[i] for n values, src of dtype from, dst of dtype to (f32
 * or bf16 each): the sum taken in f32 and rounded once to to's dtype.
 * Others are DL_ERR_INTERNAL. */
int dl_cast_add(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err);

#endif
