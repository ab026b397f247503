/* layout.c: sizes of and reorders between the activation layouts (see
 * layout.h).  Plain C with OpenMP over (sample, channel block) pairs, so the
 * double-precision test build has them too. */
#include "backends/layout.h"

#include <string.h>

int dl_layout_block(enum dl_layout l)
{
    return l == DL_LAYOUT_BLOCK16 ? 16 : l == DL_LAYOUT_BLOCK8 ? 8 : 1;
}

long dl_layout_count(enum dl_layout l, struct dl_shape s)
{
    long b = dl_layout_block(l);
    return (s.c + b - 1) / b * b * (long)s.h * s.w;
}

int dl_layout_same(enum dl_layout a, enum dl_layout b, struct dl_shape s)
{
    return a == b || (s.h == 1 && s.w == 1 && s.c % dl_layout_block(a) == 0 && s.c % dl_layout_block(b) == 0);
}

/* Moves one (sample, block) between plain x (C x HW) and blocked b (HW x bs). */
static void block_copy(const dl_real *src, dl_real *dst, int to_blocked, int bs, int c0, int nc, long hw, int acc)
{
    for (long i = 0; i < hw; i++)
        for (int j = 0; j < bs; j++) {
            long p = (long)(c0 + j) * hw + i, b = i * bs + j;
            if (to_blocked) {
                dl_real v = j < nc ? src[p] : 0;
                if (acc)
                    dst[b] += v;
                else
                    dst[b] = v;
            } else if (j < nc) {
                if (acc)
                    dst[p] += src[b];
                else
                    dst[p] = src[b];
            }
        }
}

/* The same for a full block (nc == bs), without a branch per value: the
 * common case, and a transpose of bs rows of hw values that the compiler can
 * unroll and vectorize. */
static void full_block_copy(const dl_real *restrict src, dl_real *restrict dst, int to_blocked, int bs, int c0,
                            long hw, int acc)
{
    const dl_real *x = to_blocked ? src + (long)c0 * hw : src;
    dl_real *y = to_blocked ? dst : dst + (long)c0 * hw;
    for (long i = 0; i < hw; i++) {
        if (to_blocked && !acc)
            for (int j = 0; j < bs; j++)
                y[i * bs + j] = x[j * hw + i];
        else if (to_blocked)
            for (int j = 0; j < bs; j++)
                y[i * bs + j] += x[j * hw + i];
        else if (!acc)
            for (int j = 0; j < bs; j++)
                y[j * hw + i] = x[i * bs + j];
        else
            for (int j = 0; j < bs; j++)
                y[j * hw + i] += x[i * bs + j];
    }
}

void dl_layout_reorder(const dl_real *src, enum dl_layout from, dl_real *dst, enum dl_layout to, int n,
                       struct dl_shape s, int accumulate)
{
    long hw = (long)s.h * s.w;
    long in_count = dl_layout_count(from, s), out_count = dl_layout_count(to, s);
    if (dl_layout_same(from, to, s)) {
        long total = (long)n * in_count;
        #pragma omp parallel for simd schedule(static)
        for (long i = 0; i < total; i++)
            dst[i] = accumulate ? dst[i] + src[i] : src[i];
        return;
    }
    int to_blocked = to != DL_LAYOUT_PLAIN;
    int bs = dl_layout_block(to_blocked ? to : from);
    long cb = (s.c + bs - 1) / bs;
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < (long)n * cb; t++) {
        long smp = t / cb, b = t % cb;
        int c0 = (int)(b * bs), nc = s.c - c0 < bs ? s.c - c0 : bs;
        const dl_real *sp = src + smp * in_count;
        dl_real *dp = dst + smp * out_count;
        if (nc == bs)
            full_block_copy(to_blocked ? sp : sp + b * hw * bs, to_blocked ? dp + b * hw * bs : dp, to_blocked, bs,
                            c0, hw, accumulate);
        else if (to_blocked)
            block_copy(sp, dp + b * hw * bs, 1, bs, c0, nc, hw, accumulate);
        else
            block_copy(sp + b * hw * bs, dp, 0, bs, c0, nc, hw, accumulate);
    }
}

/* d = v, or d + v in f32 rounded once (accumulate). */
static inline void put_bf16(dl_bf16 *d, dl_bf16 v, int accumulate)
{
    *d = accumulate ? dl_f32_to_bf16(dl_bf16_to_f32(*d) + dl_bf16_to_f32(v)) : v;
}

/* bf16 values: the moves of dl_layout_reorder, value by value. */
static void reorder_bf16(const dl_bf16 *src, enum dl_layout from, dl_bf16 *dst, enum dl_layout to, int n,
                         struct dl_shape s, int accumulate)
{
    long hw = (long)s.h * s.w, in_count = dl_layout_count(from, s), out_count = dl_layout_count(to, s);
    if (dl_layout_same(from, to, s)) {
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)n * in_count; i++)
            put_bf16(&dst[i], src[i], accumulate);
        return;
    }
    int to_blocked = to != DL_LAYOUT_PLAIN, bs = dl_layout_block(to_blocked ? to : from);
    long cb = (s.c + bs - 1) / bs;
    #pragma omp parallel for schedule(static)
    for (long t = 0; t < (long)n * cb; t++) {
        long smp = t / cb, b = t % cb;
        const dl_bf16 *sp = src + smp * in_count;
        dl_bf16 *dp = dst + smp * out_count;
        for (int j = 0; j < bs; j++) {
            long c = b * bs + j;
            for (long i = 0; i < hw; i++) {
                long plain = c * hw + i, blocked = (b * hw + i) * bs + j;
                if (to_blocked && c < s.c)
                    put_bf16(&dp[blocked], sp[plain], accumulate);
                else if (to_blocked && !accumulate) /* padding */
                    dp[blocked] = 0;
                else if (!to_blocked && c < s.c)
                    put_bf16(&dp[plain], sp[blocked], accumulate);
            }
        }
    }
}

void dl_layout_reorder_dtype(const void *src, enum dl_layout from, void *dst, enum dl_layout to, int n,
                             struct dl_shape s, int accumulate, enum dl_dtype dtype)
{
    if (dtype == DL_BF16)
        reorder_bf16(src, from, dst, to, n, s, accumulate);
    else
        dl_layout_reorder(src, from, dst, to, n, s, accumulate);
}
