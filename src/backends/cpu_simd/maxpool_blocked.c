/* maxpool_blocked.c: max pooling forward and backward on the blocked layouts
 * (nChw8c, nChw16c: 8 or 16 channels innermost) that oneDNN convolutions
 * produce.  A spatial position holds one block of channels, so every window
 * tap is one vector operation across the block; nothing else is vectorized.
 * oneDNN 2.6's JIT pooling takes 0.17 ms forward and 0.13 ms backward on
 * LeNet-5's maxpool2 (batch 64, 16x10x10) at 2 threads: most of it is
 * per-row overhead on such small planes (bench/README.md).
 *
 * Same outputs and saved winners as the reference op (src/ops/maxpool.c)
 * channel by channel: the winner's index ih*W+iw within its plane, stored
 * as float, in the layout of the output.  Backward zeroes the input
 * gradient and, window by window, adds each output's gradient to the tap
 * that won (a masked add over every tap: no scatter, and overlapping
 * windows add up as in the reference). */
#include "backends/cpu_simd/simd.h"

#include "backends/cpu_simd/max_rule.h"
#include "ops/pool_geometry.h"

#include <string.h>

struct blocked_dims {
    int H, W, OH, OW, kh, kw, sh, sw, ph, pw;
};

static struct blocked_dims dims_of(const struct dl_op_call *c, const struct dl_pool_geom *g)
{
    return (struct blocked_dims){
        .H = c->in[0].shape.h, .W = c->in[0].shape.w, .OH = c->out.shape.h, .OW = c->out.shape.w,
        .kh = g->kh, .kw = g->kw, .sh = g->sh, .sw = g->sw, .ph = g->ph, .pw = g->pw,
    };
}

/* One plane (a sample's block of B channels): H*W*B in, OH*OW*B out. */
static inline __attribute__((always_inline)) void forward_plane(const struct blocked_dims *d, int B,
                                                                const float *x, float *y, float *arg)
{
    for (int oh = 0; oh < d->OH; oh++) {
        int h0, h1;
        dl_pool_window(oh, d->H, d->kh, d->sh, d->ph, &h0, &h1);
        for (int ow = 0; ow < d->OW; ow++, y += B, arg += B) {
            int w0, w1;
            dl_pool_window(ow, d->W, d->kw, d->sw, d->pw, &w0, &w1);
            int first = h0 * d->W + w0;
            #pragma omp simd
            for (int b = 0; b < B; b++) {
                y[b] = x[first * B + b];
                arg[b] = (float)first;
            }
            for (int ih = h0; ih < h1; ih++)
                for (int iw = ih == h0 ? w0 + 1 : w0; iw < w1; iw++) {
                    int i = ih * d->W + iw;
                    #pragma omp simd
                    for (int b = 0; b < B; b++) {
                        float top = y[b], at = arg[b];
                        dl_simd_take_if_larger(x[i * B + b], (float)i, &top, &at);
                        y[b] = top;
                        arg[b] = at;
                    }
                }
        }
    }
}

static inline __attribute__((always_inline)) void backward_plane(const struct blocked_dims *d, int B,
                                                                 const float *dy, const float *arg, float *dx)
{
    memset(dx, 0, sizeof *dx * (size_t)d->H * d->W * B);
    for (int oh = 0; oh < d->OH; oh++) {
        int h0, h1;
        dl_pool_window(oh, d->H, d->kh, d->sh, d->ph, &h0, &h1);
        for (int ow = 0; ow < d->OW; ow++, dy += B, arg += B) {
            int w0, w1;
            dl_pool_window(ow, d->W, d->kw, d->sw, d->pw, &w0, &w1);
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) {
                    int i = ih * d->W + iw;
                    #pragma omp simd
                    for (int b = 0; b < B; b++)
                        dx[i * B + b] += arg[b] == (float)i ? dy[b] : 0.0f;
                }
        }
    }
}

/* The plane loops with the block size a constant, compiled for AVX2 and for
 * the baseline (GCC's target_clones picks at load time). */
#define PLANE_CLONES(B)                                                                                 \
    __attribute__((target_clones("avx2", "default"))) static void forward_plane##B(                     \
        const struct blocked_dims *d, const float *x, float *y, float *arg)                             \
    {                                                                                                   \
        forward_plane(d, B, x, y, arg);                                                                 \
    }                                                                                                   \
    __attribute__((target_clones("avx2", "default"))) static void backward_plane##B(                    \
        const struct blocked_dims *d, const float *dy, const float *arg, float *dx)                     \
    {                                                                                                   \
        backward_plane(d, B, dy, arg, dx);                                                              \
    }
PLANE_CLONES(8)
PLANE_CLONES(16)

static long planes_of(const struct dl_op_call *c, int block)
{
    return (long)c->batch * ((c->in[0].shape.c + block - 1) / block);
}

void dl_simd_maxpool_blocked_forward(const struct dl_op_call *c, const struct dl_pool_geom *g, int block)
{
    struct blocked_dims d = dims_of(c, g);
    long planes = planes_of(c, block), in_plane = (long)d.H * d.W * block, out_plane = (long)d.OH * d.OW * block;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        const float *x = dl_tensor_const_f32(&c->in[0]) + p * in_plane;
        float *y = dl_tensor_f32(&c->out) + p * out_plane, *arg = c->saved + p * out_plane;
        if (block == 8)
            forward_plane8(&d, x, y, arg);
        else
            forward_plane16(&d, x, y, arg);
    }
}

void dl_simd_maxpool_blocked_backward(const struct dl_op_call *c, const struct dl_pool_geom *g, int block)
{
    struct blocked_dims d = dims_of(c, g);
    long planes = planes_of(c, block), in_plane = (long)d.H * d.W * block, out_plane = (long)d.OH * d.OW * block;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        const float *dy = dl_tensor_const_f32(&c->dout) + p * out_plane, *arg = c->saved + p * out_plane;
        float *dx = dl_tensor_f32(&c->din[0]) + p * in_plane;
        if (block == 8)
            backward_plane8(&d, dy, arg, dx);
        else
            backward_plane16(&d, dy, arg, dx);
    }
}
