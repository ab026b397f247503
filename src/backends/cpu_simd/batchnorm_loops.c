/* batchnorm_loops.c: the vector loops of the "simd" batch norm kernel
 * (batchnorm.c): per-lane sums in double for the batch statistics and for
 * backward, and the float elementwise passes (normalise; input gradient).
 * Every loop runs over count planes of len floats, stride floats apart (one
 * channel block of a chunk of samples), in runs of 16 floats, then one of 8
 * (an odd number of positions in nChw8c), then single values (NCHW); lane j
 * of a run is lane j of the results and parameters.  The sums keep four
 * vectors of four doubles in registers; the elementwise passes compute in
 * float what the reference op computes.  A fused ReLU (kernel.h) clamps
 * forward's output and masks dy by it. */
#include "backends/cpu_simd/simd.h"

enum { LANES = DL_SIMD_BN_LANES };

typedef float v8 __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32), aligned(4))); /* unaligned */
typedef int v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v4du __attribute__((vector_size(32), aligned(8)));
typedef double v8d __attribute__((vector_size(64)));
#define LD8(p) (*(const v8f *)(p))
#define ST8(p, v) (*(v8f *)(p) = (v))
/* v where y > 0, else 0 (NaN in y counting as not positive), as bits */
#define KEEP_IF_POSITIVE(v, y) ((v8)((v8i)(v) & ((y) > 0)))
/* 8 floats as doubles (GCC makes a v4f -> v4d conversion two 128-bit
 * halves; this form is one vcvtps2pd per half on AVX2) and its halves */
#define WIDEN(v) __builtin_convertvector((v), v8d)
#define LO(w) __builtin_shufflevector(w, w, 0, 1, 2, 3)
#define HI(w) __builtin_shufflevector(w, w, 4, 5, 6, 7)
#define LOAD16(m, m0, m1, m2, m3) \
    (m0 = *(const v4du *)(m), m1 = *(const v4du *)((m) + 4), m2 = *(const v4du *)((m) + 8), \
     m3 = *(const v4du *)((m) + 12))
#define STORE16(s, a0, a1, a2, a3) \
    (*(v4du *)(s) = (a0), *(v4du *)((s) + 4) = (a1), *(v4du *)((s) + 8) = (a2), *(v4du *)((s) + 12) = (a3))
#define TAIL_LANE(len) (8 * (int)((len) % LANES >= 8)) /* lane of the first single value */

/* Adds the single values' lanes t to the vector lanes s. */
static void add_tails(double *s, const double *t)
{
    for (int j = 0; j < LANES; j++)
        s[j] += t[j];
}

/* s1 = sum of x - m, s2 = sum of (x - m)^2, m per lane */
__attribute__((target_clones("avx2", "default"))) static void sum_x(long len, int count, long stride,
                                                                    const float *x, const double *m, double *s1,
                                                                    double *s2)
{
    v4d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0}, m0, m1, m2, m3;
    double t1[LANES] = {0}, t2[LANES] = {0};
    LOAD16(m, m0, m1, m2, m3);
    for (int k = 0; k < count; k++, x += stride) {
        long i = 0;
#define SUM_X(u, A, B, M) do { v4d d_ = (u) - (M); A += d_; B += d_ * d_; } while (0)
        for (; i + LANES <= len; i += LANES) {
            v8d u = WIDEN(LD8(x + i)), v = WIDEN(LD8(x + i + 8));
            SUM_X(LO(u), a0, b0, m0);
            SUM_X(HI(u), a1, b1, m1);
            SUM_X(LO(v), a2, b2, m2);
            SUM_X(HI(v), a3, b3, m3);
        }
        if (i + 8 <= len) {
            v8d u = WIDEN(LD8(x + i));
            SUM_X(LO(u), a0, b0, m0);
            SUM_X(HI(u), a1, b1, m1);
            i += 8;
        }
#undef SUM_X
        for (int j = TAIL_LANE(len); i < len; i++, j++) {
            double d = x[i] - m[j];
            t1[j] += d;
            t2[j] += d * d;
        }
    }
    STORE16(s1, a0, a1, a2, a3);
    STORE16(s2, b0, b1, b2, b3);
    add_tails(s1, t1);
    add_tails(s2, t2);
}

/* s1 = sum of dy, s2 = sum of dy * (x - m), m per lane; RELU a constant
 * (each loop exists with and without the mask, see CLONES below) */
static inline __attribute__((always_inline)) void sum_dy_body(long len, int count, long stride, const float *x,
                                                              const float *dy, const float *out, const double *m,
                                                              double *s1, double *s2, const int RELU)
{
    v4d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0}, m0, m1, m2, m3;
    double t1[LANES] = {0}, t2[LANES] = {0};
    LOAD16(m, m0, m1, m2, m3);
    for (int k = 0; k < count; k++) {
        const float *xp = x + k * stride, *dp = dy + k * stride, *op = RELU ? out + k * stride : NULL;
        long i = 0;
#define DY8(i) (RELU ? KEEP_IF_POSITIVE(LD8(dp + (i)), LD8(op + (i))) : LD8(dp + (i)))
#define SUM_DY(g, u, A, B, M) do { A += (g); B += (g) * ((u) - (M)); } while (0)
        for (; i + LANES <= len; i += LANES) {
            v8d g = WIDEN(DY8(i)), h = WIDEN(DY8(i + 8)), u = WIDEN(LD8(xp + i)), v = WIDEN(LD8(xp + i + 8));
            SUM_DY(LO(g), LO(u), a0, b0, m0);
            SUM_DY(HI(g), HI(u), a1, b1, m1);
            SUM_DY(LO(h), LO(v), a2, b2, m2);
            SUM_DY(HI(h), HI(v), a3, b3, m3);
        }
        if (i + 8 <= len) {
            v8d g = WIDEN(DY8(i)), u = WIDEN(LD8(xp + i));
            SUM_DY(LO(g), LO(u), a0, b0, m0);
            SUM_DY(HI(g), HI(u), a1, b1, m1);
            i += 8;
        }
#undef SUM_DY
        for (int j = TAIL_LANE(len); i < len; i++, j++) {
            float g = RELU && !(op[i] > 0) ? 0 : dp[i];
            t1[j] += g;
            t2[j] += (double)g * (xp[i] - m[j]);
        }
    }
    STORE16(s1, a0, a1, a2, a3);
    STORE16(s2, b0, b1, b2, b3);
    add_tails(s1, t1);
    add_tails(s2, t2);
}

/* y = (x - m) * k + sh, clamped at 0 with RELU; q = {m, k, sh}, 16 lanes each */
static inline __attribute__((always_inline)) void normalize_body(long len, int count, long stride, const float *x,
                                                                 const float *q, float *y, const int RELU)
{
    const float *m = q, *k = q + LANES, *sh = q + 2 * LANES;
    v8 m0 = LD8(m), m1 = LD8(m + 8), k0 = LD8(k), k1 = LD8(k + 8), s0 = LD8(sh), s1 = LD8(sh + 8);
    for (int s = 0; s < count; s++, x += stride, y += stride) {
        long i = 0;
#define NORM8(i, M, K, S) do { v8 v_ = (LD8(x + (i)) - (M)) * (K) + (S); \
                               ST8(y + (i), RELU ? KEEP_IF_POSITIVE(v_, v_) : v_); } while (0)
        for (; i + LANES <= len; i += LANES) {
            NORM8(i, m0, k0, s0);
            NORM8(i + 8, m1, k1, s1);
        }
        if (i + 8 <= len) {
            NORM8(i, m0, k0, s0);
            i += 8;
        }
#undef NORM8
        for (int j = TAIL_LANE(len); i < len; i++, j++) {
            float v = (x[i] - m[j]) * k[j] + sh[j];
            y[i] = RELU && !(v > 0) ? 0 : v;
        }
    }
}

/* dx = k * (dy - mdy - (x - m) * is * mdx), dy masked by out > 0 with a
 * fused ReLU; q = {k, mdy, m, is, mdx}, 16 lanes each */
static inline __attribute__((always_inline)) void input_gradient_body(long len, int count, long stride,
                                                                      const float *x, const float *dy,
                                                                      const float *out, const float *q, float *dx,
                                                                      const int RELU)
{
    const float *k = q, *mdy = q + LANES, *m = q + 2 * LANES, *is = q + 3 * LANES, *mdx = q + 4 * LANES;
    v8 k0 = LD8(k), k1 = LD8(k + 8), g0 = LD8(mdy), g1 = LD8(mdy + 8), m0 = LD8(m), m1 = LD8(m + 8),
       i0 = LD8(is), i1 = LD8(is + 8), h0 = LD8(mdx), h1 = LD8(mdx + 8);
    for (int s = 0; s < count; s++) {
        const float *xp = x + s * stride, *dp = dy + s * stride, *op = RELU ? out + s * stride : NULL;
        float *dxp = dx + s * stride;
        long i = 0;
#define GRAD8(i, K, G, M, I, H) ST8(dxp + (i), (K) * (DY8(i) - (G) - (LD8(xp + (i)) - (M)) * (I) * (H)))
        for (; i + LANES <= len; i += LANES) {
            GRAD8(i, k0, g0, m0, i0, h0);
            GRAD8(i + 8, k1, g1, m1, i1, h1);
        }
        if (i + 8 <= len) {
            GRAD8(i, k0, g0, m0, i0, h0);
            i += 8;
        }
#undef GRAD8
        for (int j = TAIL_LANE(len); i < len; i++, j++) {
            float g = RELU && !(op[i] > 0) ? 0 : dp[i];
            dxp[i] = k[j] * (g - mdy[j] - (xp[i] - m[j]) * is[j] * mdx[j]);
        }
    }
}
#undef DY8

/* The loops with the ReLU a constant, compiled for AVX2 and for the baseline
 * (GCC's target_clones picks at load time); *_relu masks or clamps.  They
 * are static clones behind plain functions: clang exports a public
 * target_clones function only as NAME.ifunc (see relu_fold.c). */
#define CLONE __attribute__((target_clones("avx2", "default"))) static void
CLONE sum_dy_plain(long len, int count, long stride, const float *x, const float *dy, const float *out,
                   const double *m, double *s1, double *s2)
{
    sum_dy_body(len, count, stride, x, dy, out, m, s1, s2, 0);
}

CLONE sum_dy_relu(long len, int count, long stride, const float *x, const float *dy, const float *out,
                  const double *m, double *s1, double *s2)
{
    sum_dy_body(len, count, stride, x, dy, out, m, s1, s2, 1);
}

CLONE normalize_plain(long len, int count, long stride, const float *x, const float *q, float *y)
{
    normalize_body(len, count, stride, x, q, y, 0);
}

CLONE normalize_relu(long len, int count, long stride, const float *x, const float *q, float *y)
{
    normalize_body(len, count, stride, x, q, y, 1);
}

CLONE input_gradient_plain(long len, int count, long stride, const float *x, const float *dy, const float *out,
                           const float *q, float *dx)
{
    input_gradient_body(len, count, stride, x, dy, out, q, dx, 0);
}

CLONE input_gradient_relu(long len, int count, long stride, const float *x, const float *dy, const float *out,
                          const float *q, float *dx)
{
    input_gradient_body(len, count, stride, x, dy, out, q, dx, 1);
}
#undef CLONE

void dl_simd_bn_sum_x(long len, int count, long stride, const float *x, const double *m, double *s1, double *s2)
{
    sum_x(len, count, stride, x, m, s1, s2);
}

void dl_simd_bn_sum_dy(long len, int count, long stride, const float *x, const float *dy, const float *out,
                       const double *m, double *s1, double *s2)
{
    (out ? sum_dy_relu : sum_dy_plain)(len, count, stride, x, dy, out, m, s1, s2);
}

void dl_simd_bn_normalize(long len, int count, long stride, const float *x, const float *q, int relu, float *y)
{
    (relu ? normalize_relu : normalize_plain)(len, count, stride, x, q, y);
}

void dl_simd_bn_input_gradient(long len, int count, long stride, const float *x, const float *dy, const float *out,
                               const float *q, float *dx)
{
    (out ? input_gradient_relu : input_gradient_plain)(len, count, stride, x, dy, out, q, dx);
}
