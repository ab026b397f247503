/* dtype.c: the table of dtype facts, the name parsers that look it up,
 * and the bulk casts (see dtype.h).  The loops are plain C that the
 * compiler vectorizes (clones for AVX-512 and AVX2 picked at run time) and
 * splits over threads; they give the same bits as the scalar casts in
 * dtype.h, which the tests hold against a formula. */
#include "core/dtype.h"

#include <stdio.h>

#include "core/long_loop.h"

/* Split over threads when long (a GPT-2 head's 38.6M weights per call). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void f32_to_bf16(const float *restrict s, dl_bf16 *restrict d, long n)
{
    DL_EACH(n, d[i] = dl_f32_to_bf16(s[i]));
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void bf16_to_f32(const dl_bf16 *restrict s, float *restrict d, long n)
{
    DL_EACH(n, d[i] = dl_bf16_to_f32(s[i]));
}

/* The table's conversions, with its signatures. */
static void f32_copy(const void *src, float *dst, long n)
{
    if (src != dst)
        memmove(dst, src, sizeof *dst * (size_t)n);
}

static void f32_copy_from(const float *src, void *dst, long n)
{
    f32_copy(src, dst, n);
}

static void bf16_widen(const void *src, float *dst, long n)
{
    bf16_to_f32(src, dst, n);
}

static void bf16_round(const float *src, void *dst, long n)
{
    f32_to_bf16(src, dst, n);
}

static void i32_widen(const void *src, float *dst, long n)
{
    const int32_t *s = src;
    for (long i = 0; i < n; i++)
        dst[i] = (float)s[i];
}

/* Each spelling once: a precision's is also the name of its list's entry. */
static const char fp32_name[] = "fp32", bf16_name[] = "bf16";

const struct dl_dtype_traits dl_dtype_table[DL_DTYPE_COUNT] = {
    [DL_F32] = {"f32", fp32_name, sizeof(float), 1, f32_copy, f32_copy_from},
    [DL_BF16] = {bf16_name, bf16_name, sizeof(dl_bf16), 1, bf16_widen, bf16_round},
    [DL_I32] = {"i32", NULL, sizeof(int32_t), 0, i32_widen, NULL},
    [DL_I64] = {"i64", NULL, sizeof(int64_t), 0, NULL, NULL},
};

const char *const dl_precision_names[] = {fp32_name, bf16_name, NULL};
const char *const dl_train_precision_names[] = {fp32_name, bf16_name, "auto", NULL};

/* The table's names (or precision spellings) of the dtypes in `among`, in
 * enum order, joined by ", " and the last by `last` (", " or " or "). */
static void join(char *buf, size_t size, int precision, unsigned among, const char *last)
{
    const char *pick[DL_DTYPE_COUNT];
    int n = 0;
    for (int t = 0; t < DL_DTYPE_COUNT; t++) {
        const char *s = precision ? dl_dtype_table[t].precision : dl_dtype_table[t].name;
        if (s && among & DL_DTYPE_BIT(t))
            pick[n++] = s;
    }
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i == 0 ? "" : i == n - 1 ? last : ", ", pick[i]);
}

int dl_dtype_parse_among(const char *what, const char *name, unsigned among, enum dl_dtype *out,
                         struct dl_error *err)
{
    for (int t = 0; t < DL_DTYPE_COUNT; t++)
        if (among & DL_DTYPE_BIT(t) && strcmp(dl_dtype_table[t].name, name) == 0) {
            *out = (enum dl_dtype)t;
            return DL_OK;
        }
    char list[128];
    join(list, sizeof list, 0, among, ", ");
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected one of %s, found '%s'", what, list, name);
}

int dl_dtype_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err)
{
    return dl_dtype_parse_among(what, name, DL_DTYPE_ALL, out, err);
}

int dl_precision_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err)
{
    for (int t = 0; t < DL_DTYPE_COUNT; t++)
        if (dl_dtype_table[t].precision && strcmp(dl_dtype_table[t].precision, name) == 0) {
            *out = (enum dl_dtype)t;
            return DL_OK;
        }
    char list[128];
    join(list, sizeof list, 1, DL_DTYPE_ALL, " or ");
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected %s, found '%s'", what, list, name);
}

/* Values converted through f32 a block at a time (i32 -> bf16). */
#define VIA_BLOCK 1024

int dl_cast(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err)
{
    if (n <= 0)
        return DL_OK;
    if (from == to) {
        if (src != dst)
            memmove(dst, src, (size_t)n * dl_dtype_size(from));
        return DL_OK;
    }
    const struct dl_dtype_traits *f = dl_dtype_traits(from), *t = dl_dtype_traits(to);
    if (!f->to_f32 || !t->from_f32)
        return dl_errorf(err, DL_ERR_INTERNAL, "no cast from %s to %s", f->name, t->name);
    if (to == DL_F32)
        f->to_f32(src, dst, n);
    else if (from == DL_F32)
        t->from_f32(src, dst, n);
    else {
        float block[VIA_BLOCK];
        for (long i = 0; i < n; i += VIA_BLOCK) {
            long m = n - i < VIA_BLOCK ? n - i : VIA_BLOCK;
            f->to_f32((const char *)src + (size_t)i * f->size, block, m);
            t->from_f32(block, (char *)dst + (size_t)i * t->size, m);
        }
    }
    return DL_OK;
}

/* dst[i] += src[i] for each pair of f32 and bf16 arrays, summed in f32 (a
 * bf16 destination rounded once); one loop per pair so that each vectorizes,
 * split over threads when long. */
#define SUM_LOOP(S, D, LOAD_S, LOAD_D, STORE)                                   \
    do {                                                                        \
        const S *restrict s_ = src;                                             \
        D *restrict d_ = dst;                                                   \
        DL_EACH(n, float sum_ = LOAD_D(d_[i]) + LOAD_S(s_[i]); d_[i] = STORE(sum_)); \
    } while (0)
#define AS_IS(x) (x)

/* A static clone behind the public function: clang exports a public
 * target_clones function only as NAME.ifunc, which other files cannot call
 * (fuzz/run builds with clang). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int cast_add(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err)
{
    if (from == DL_F32 && to == DL_F32)
        SUM_LOOP(float, float, AS_IS, AS_IS, AS_IS);
    else if (from == DL_BF16 && to == DL_BF16)
        SUM_LOOP(dl_bf16, dl_bf16, dl_bf16_to_f32, dl_bf16_to_f32, dl_f32_to_bf16);
    else if (from == DL_BF16 && to == DL_F32)
        SUM_LOOP(dl_bf16, float, dl_bf16_to_f32, AS_IS, AS_IS);
    else if (from == DL_F32 && to == DL_BF16)
        SUM_LOOP(float, dl_bf16, AS_IS, dl_bf16_to_f32, dl_f32_to_bf16);
    else
        return dl_errorf(err, DL_ERR_INTERNAL, "no sum of %s values into %s", dl_dtype_name(from),
                         dl_dtype_name(to));
    return DL_OK;
}

int dl_cast_add(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err)
{
    return cast_add(src, from, dst, to, n, err);
}
