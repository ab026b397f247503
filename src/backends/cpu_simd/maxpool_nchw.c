/* maxpool_nchw.c: max pooling forward on NCHW float tensors in loops the
 * compiler turns into vector code, for the layers where oneDNN 2.6 has no
 * JIT pooling (plain layout: its generic implementation and the reorder to a
 * blocked layout both cost more than the op; bench/README.md).  Same result
 * and same saved winners as the reference op (src/ops/maxpool.c): the first
 * largest element of each window in row-major order (max_rule.h).  Each
 * output row is done in three parts: the columns whose window is cut by the
 * left padding, the interior (every window wholly inside the row, vectorized
 * across output columns: 2x2 windows at stride 2 in one pass, others in one
 * pass per window tap), and the columns cut by the right edge. */
#include "backends/cpu_simd/simd.h"

#include "backends/cpu_simd/max_rule.h"
#include "ops/pool_geometry.h"

/* Scalar: output column ow of one output row whose window rows are [h0, h1). */
static void window_max(const float *x, int W, int h0, int h1, int w0, int w1, float *y, float *arg)
{
    int best = h0 * W + w0;
    float top = x[best];
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            float v = x[ih * W + iw];
            if (v > top || v != v) {
                top = v;
                best = ih * W + iw;
            }
        }
    *y = top;
    *arg = (float)best;
}

/* 2x2 windows at stride 2 whose rows h0, h0 + 1 are both inside, output
 * columns [ow0, ow0 + n): the winner kept in registers, one pass. */
static inline __attribute__((always_inline)) void max_2x2_run(const float *x, int W, int base, int ow0, int n,
                                                              float *y, float *arg)
{
    #pragma omp simd
    for (int k = 0; k < n; k++) {
        int i = base + 2 * (ow0 + k);
        float top = x[i], at = (float)i;
        dl_simd_take_if_larger(x[i + 1], (float)(i + 1), &top, &at);
        dl_simd_take_if_larger(x[i + W], (float)(i + W), &top, &at);
        dl_simd_take_if_larger(x[i + W + 1], (float)(i + W + 1), &top, &at);
        y[ow0 + k] = top;
        arg[ow0 + k] = at;
    }
}

/* The interior [lo, hi) of a 2x2 / stride 2 row in runs of 8 columns (one
 * AVX2 vector), the last run moved back to end at hi: outputs depend only
 * on the input, so computing a few twice is harmless and no column is left
 * to a scalar tail (rows here are short: LeNet's have 12 and 4 columns). */
#define RUN 8
static inline __attribute__((always_inline)) void interior_max_2x2(const float *x, int W, int h0, int pw,
                                                                   int lo, int hi, float *y, float *arg)
{
    int base = h0 * W - pw;
    if (hi - lo < RUN) {
        max_2x2_run(x, W, base, lo, hi - lo, y, arg);
        return;
    }
    for (int ow0 = lo; ow0 < hi; ow0 += RUN) {
        if (ow0 + RUN > hi)
            ow0 = hi - RUN;
        max_2x2_run(x, W, base, ow0, RUN, y, arg);
    }
}

/* The interior columns [lo, hi) of one output row: every window starts at
 * column ow*sw - pw and is kw wide, all inside the input. */
static inline __attribute__((always_inline)) void interior_max(const float *x, int W, int h0, int h1, int kw,
                                                               int sw, int pw, int lo, int hi, float *y,
                                                               float *arg)
{
    int first = h0 * W - pw;
    #pragma omp simd
    for (int ow = lo; ow < hi; ow++) {
        y[ow] = x[first + ow * sw];
        arg[ow] = (float)(first + ow * sw);
    }
    for (int ih = h0; ih < h1; ih++)
        for (int j = 0; j < kw; j++) {
            int base = ih * W - pw + j;
            #pragma omp simd
            for (int ow = lo; ow < hi; ow++) {
                float top = y[ow], at = arg[ow];
                dl_simd_take_if_larger(x[base + ow * sw], (float)(base + ow * sw), &top, &at);
                y[ow] = top;
                arg[ow] = at;
            }
        }
}

struct pool_dims {
    int H, W, OH, OW, kh, kw, sh, sw, ph, pw;
    int lo, hi; /* interior output columns */
};

/* One (n, c) plane; compiled for AVX2 and for the baseline, picked at load
 * time by the CPU (GCC's target_clones). */
__attribute__((target_clones("avx2", "default"))) static void maxpool_plane(const struct pool_dims *d,
                                                                             const float *x, float *y,
                                                                             float *arg)
{
    for (int oh = 0; oh < d->OH; oh++, y += d->OW, arg += d->OW) {
        int h0, h1;
        dl_pool_window(oh, d->H, d->kh, d->sh, d->ph, &h0, &h1);
        for (int ow = 0; ow < d->OW; ow++) {
            if (ow == d->lo && d->lo < d->hi) {
                if (d->kw == 2 && d->sw == 2 && h1 - h0 == 2)
                    interior_max_2x2(x, d->W, h0, d->pw, d->lo, d->hi, y, arg);
                else
                    interior_max(x, d->W, h0, h1, d->kw, d->sw, d->pw, d->lo, d->hi, y, arg);
                ow = d->hi - 1;
                continue;
            }
            int w0, w1;
            dl_pool_window(ow, d->W, d->kw, d->sw, d->pw, &w0, &w1);
            window_max(x, d->W, h0, h1, w0, w1, y + ow, arg + ow);
        }
    }
}

void dl_simd_maxpool_forward(const struct dl_op_call *c, const struct dl_pool_geom *g)
{
    struct pool_dims d = {
        .H = c->in[0].shape.h, .W = c->in[0].shape.w, .OH = c->out.shape.h, .OW = c->out.shape.w,
        .kh = g->kh, .kw = g->kw, .sh = g->sh, .sw = g->sw, .ph = g->ph, .pw = g->pw,
    };
    /* Interior columns: ow*sw - pw >= 0 and ow*sw - pw + kw <= W. */
    d.lo = (d.pw + d.sw - 1) / d.sw;
    d.hi = d.W - d.kw + d.pw < 0 ? 0 : (d.W - d.kw + d.pw) / d.sw + 1;
    if (d.hi > d.OW)
        d.hi = d.OW;
    if (d.lo > d.hi)
        d.lo = d.hi;
    long planes = (long)c->batch * c->out.shape.c, in_plane = (long)d.H * d.W, out_plane = (long)d.OH * d.OW;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++)
        maxpool_plane(&d, dl_tensor_const_f32(&c->in[0]) + p * in_plane, dl_tensor_f32(&c->out) + p * out_plane,
                      c->saved + p * out_plane);
}
