/* dtype.c: dtype names and the bulk casts (see dtype.h).  The loops are
 * plain C that the compiler vectorizes (clones for AVX-512 and AVX2 picked
 * at run time) and splits over threads; they give the same bits as the
 * scalar casts in dtype.h, which the tests hold against a formula. */
#include "core/dtype.h"

#include <stdio.h>

const char *const dl_dtype_names[] = {"f32", "bf16", "i32", "i64", NULL};

int dl_dtype_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err)
{
    for (int i = 0; dl_dtype_names[i]; i++)
        if (strcmp(dl_dtype_names[i], name) == 0) {
            *out = (enum dl_dtype)i;
            return DL_OK;
        }
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected one of f32, bf16, i32, i64, found '%s'", what, name);
}

int dl_precision_parse(const char *what, const char *name, enum dl_dtype *out, struct dl_error *err)
{
    if (strcmp(name, "fp32") && strcmp(name, "bf16"))
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected fp32 or bf16, found '%s'", what, name);
    *out = name[0] == 'b' ? DL_BF16 : DL_F32;
    return DL_OK;
}

/* Split over threads when long (a GPT-2 head's 38.6M weights per call). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void f32_to_bf16(const float *restrict s, dl_bf16 *restrict d, long n)
{
    #pragma omp parallel for simd schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++)
        d[i] = dl_f32_to_bf16(s[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void bf16_to_f32(const dl_bf16 *restrict s, float *restrict d, long n)
{
    #pragma omp parallel for simd schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++)
        d[i] = dl_bf16_to_f32(s[i]);
}

int dl_cast(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err)
{
    if (n <= 0)
        return DL_OK;
    if (from == to) {
        if (src != dst)
            memmove(dst, src, (size_t)n * dl_dtype_size(from));
        return DL_OK;
    }
    if (from == DL_F32 && to == DL_BF16) {
        f32_to_bf16(src, dst, n);
        return DL_OK;
    }
    if (from == DL_BF16 && to == DL_F32) {
        bf16_to_f32(src, dst, n);
        return DL_OK;
    }
    if (from == DL_I32 && (to == DL_F32 || to == DL_BF16)) {
        const int32_t *s = src;
        for (long i = 0; i < n; i++) {
            float f = (float)s[i];
            if (to == DL_F32)
                ((float *)dst)[i] = f;
            else
                ((dl_bf16 *)dst)[i] = dl_f32_to_bf16(f);
        }
        return DL_OK;
    }
    return dl_errorf(err, DL_ERR_INTERNAL, "no cast from %s to %s", dl_dtype_names[from], dl_dtype_names[to]);
}

/* dst[i] += src[i] for each pair of f32 and bf16 arrays, summed in f32 (a
 * bf16 destination rounded once); one loop per pair so that each vectorizes,
 * split over threads when long. */
#define SUM_LOOP(S, D, LOAD_S, LOAD_D, STORE)                                   \
    do {                                                                        \
        const S *restrict s_ = src;                                             \
        D *restrict d_ = dst;                                                   \
        _Pragma("omp parallel for simd schedule(static) if (n > 65536)")        \
        for (long i = 0; i < n; i++) {                                          \
            float sum_ = LOAD_D(d_[i]) + LOAD_S(s_[i]);                         \
            d_[i] = STORE(sum_);                                                \
        }                                                                       \
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
        return dl_errorf(err, DL_ERR_INTERNAL, "no sum of %s values into %s", dl_dtype_names[from],
                         dl_dtype_names[to]);
    return DL_OK;
}

int dl_cast_add(const void *src, enum dl_dtype from, void *dst, enum dl_dtype to, long n, struct dl_error *err)
{
    return cast_add(src, from, dst, to, n, err);
}
