/* conv_direct.c: the "direct" convolution kernel, for the layers with few
 * input channels that open image networks (LeNet-5's conv1: 1 channel,
 * 5x5, 28x28), stride 1, no dilation, no groups, NCHW.  There im2col + GEMM
 * multiplies 6 x 25 weights by a 25 x 784 matrix per sample, a shape no
 * GEMM runs well, and oneDNN's first-layer convolution is slower still (its
 * backward weights on plain input is its reference code: bench/README.md).
 *
 * Every pass works on one sample at a time per thread, from a zero-padded
 * copy of its planes in the thread's workspace (so no tap needs a bounds
 * check), with the output columns in runs of 16 (two 8-float vectors):
 *   forward          for each output row, run and group of up to 6 output
 *                    channels: 12 vector accumulators, one broadcast weight
 *                    times two shifted input vectors per tap;
 *   backward data    the same loop on the padded output gradient with the
 *                    weights transposed and flipped (a "full" correlation);
 *   backward weights for each input channel, kernel row and pair of output
 *                    channels: 2 x S vector accumulators (S = kernel width,
 *                    a compile-time constant up to 7), kept per thread as
 *                    vectors across samples and summed once at the end
 *                    (the bias gradient too, from the padded dy).
 * A fused ReLU (kernel.h) costs nothing extra: forward clamps the
 * accumulators before storing them, and both backward passes mask dy by
 * the saved output while copying it into their padded planes.
 * The loops are written with GCC vector types and compiled twice, for
 * AVX2 + FMA and for the baseline, picked from the CPU's flags; this file
 * lets the compiler fuse a * b + c into one FMA (C17 mode forbids it
 * elsewhere), which changes only rounding. */
#include "backends/cpu_simd/simd.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "core/threads.h"
#include "ops/kinds.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#else
#pragma GCC optimize("fp-contract=fast")
#endif

#define DIRECT_MAX_C 4  /* input channels */
#define DIRECT_MAX_S 7  /* kernel width: backward weights keeps 2 x S accumulators in registers */
#define VL 8            /* floats per vector */
#define RUN (2 * VL)    /* output columns per run */
#define OC_GROUP 6      /* output channels per forward run: 12 accumulators */

typedef float v8 __attribute__((vector_size(VL * sizeof(float))));
typedef float v8u __attribute__((vector_size(VL * sizeof(float)), aligned(sizeof(float)))); /* unaligned */
typedef int v8i __attribute__((vector_size(VL * sizeof(int))));
#define LOAD8(p) (*(const v8u *)(p))
#define STORE8(p, v) (*(v8u *)(p) = (v))

/* A zero-padded stack of planes: plane i's row r, column j is
 * base[(i*rows + r)*cols + j]. */
struct padded {
    int rows, cols;
};

/* One correlation, as forward computes it: out (n_out planes of P x Q) =
 * bias + sum over n_in padded input planes and R x S taps of
 * w[((o*n_in + i)*R + r)*S + s] * in[i][p + r][q + s]. */
struct corr {
    int n_in, n_out, R, S, P, Q;
    int relu;  /* 1: out = max(sum, 0) (a fused ReLU) */
    struct padded in;
};

struct direct_loops;

struct direct_inst {
    struct dl_conv_geom g;
    int threads;             /* the workspace holds this many per-thread areas */
    struct corr fwd, bwd;    /* forward (fwd.relu: a fused ReLU, dy masked by out > 0); backward data */
    size_t fwd_area, bwd_area, wgt_area; /* floats per thread and direction */
    const struct direct_loops *loops;    /* AVX2 + FMA or baseline, picked at create */
};

static int round_up(int v, int m)
{
    return (v + m - 1) / m * m;
}

static size_t padded_floats(const struct padded *p, int planes)
{
    return (size_t)planes * (size_t)p->rows * (size_t)p->cols;
}

/* Copies n planes of h x w into pad at row top, column left (zeros around);
 * with a mask (a fused ReLU's output, same shape as src), only where it is
 * positive (the ReLU's backward). */
static void pad_planes(const float *src, const float *mask, int n, int h, int w, int top, int left,
                       const struct padded *p, float *pad)
{
    memset(pad, 0, sizeof *pad * padded_floats(p, n));
    for (int i = 0; i < n; i++)
        for (int r = 0; r < h; r++) {
            float *dst = pad + ((size_t)i * p->rows + (size_t)(r + top)) * p->cols + left;
            size_t at = ((size_t)i * h + r) * w;
            if (mask)
                dl_simd_relu_mask(dst, src + at, mask + at, w);
            else
                memcpy(dst, src + at, sizeof *dst * (size_t)w);
        }
}

/* Output row p of channels [o0, o0 + OCN) over one run of 16 columns
 * starting at q0. */
static inline __attribute__((always_inline)) void corr_run(const struct corr *k, const float *in, const float *w,
                                                           const float *bias, int o0, int p, int q0, float *out,
                                                           const int OCN, const int RELU)
{
    v8 acc[OC_GROUP][2] = {{{0}}};
    #pragma GCC unroll 6
    for (int o = 0; o < OCN; o++) {
        float b = bias ? bias[o0 + o] : 0.0f;
        acc[o][0] += b;
        acc[o][1] += b;
    }
    for (int i = 0; i < k->n_in; i++)
        for (int r = 0; r < k->R; r++) {
            const float *row = in + ((size_t)i * k->in.rows + (size_t)(p + r)) * k->in.cols + q0;
            const float *wr = w + (((size_t)o0 * k->n_in + i) * k->R + r) * k->S;
            for (int s = 0; s < k->S; s++) {
                v8 a = LOAD8(row + s), b = LOAD8(row + s + VL);
                #pragma GCC unroll 6
                for (int o = 0; o < OCN; o++) {
                    float wv = wr[(size_t)o * k->n_in * k->R * k->S + s];
                    acc[o][0] += wv * a;
                    acc[o][1] += wv * b;
                }
            }
        }
    /* A run past the row's end may spill its extra columns into the rows
     * below, which are written later, as long as they are in the plane;
     * only the plane's last run goes through a scratch row (a memcpy per
     * run cost 10% of LeNet conv1's forward). */
    int whole = (long)p * k->Q + q0 + RUN <= (long)k->P * k->Q, n = k->Q - q0 < RUN ? k->Q - q0 : RUN;
    #pragma GCC unroll 6
    for (int o = 0; o < OCN; o++) {
        if (RELU) /* NaN > 0 is false: NaN becomes 0, as in the ReLU op */
            for (int j = 0; j < 2; j++)
                acc[o][j] = (v8)((v8i)acc[o][j] & (acc[o][j] > 0));
        float *y = out + ((size_t)(o0 + o) * k->P + p) * k->Q + q0;
        if (whole) {
            STORE8(y, acc[o][0]);
            STORE8(y + VL, acc[o][1]);
        } else {
            float tail[RUN];
            STORE8(tail, acc[o][0]);
            STORE8(tail + VL, acc[o][1]);
            memcpy(y, tail, sizeof *tail * (size_t)n);
        }
    }
}

/* Every output row of one sample, in runs of 16 columns and groups of output
 * channels (6, then 4, then single ones). */
static inline __attribute__((always_inline)) void corr_rows(const struct corr *k, const float *in, const float *w,
                                                            const float *bias, float *out, const int RELU)
{
    for (int p = 0; p < k->P; p++)
        for (int q0 = 0; q0 < k->Q; q0 += RUN) {
            int o0 = 0;
            for (; o0 + OC_GROUP <= k->n_out; o0 += OC_GROUP)
                corr_run(k, in, w, bias, o0, p, q0, out, OC_GROUP, RELU);
            if (o0 + 4 <= k->n_out) {
                corr_run(k, in, w, bias, o0, p, q0, out, 4, RELU);
                o0 += 4;
            }
            for (; o0 < k->n_out; o0++)
                corr_run(k, in, w, bias, o0, p, q0, out, 1, RELU);
        }
}

/* The whole correlation of one sample (the ReLU decided once, outside the
 * loops: a test per store made forward 10% slower). */
static inline __attribute__((always_inline)) void corr_sample(const struct corr *k, const float *in,
                                                              const float *w, const float *bias, float *out)
{
    if (k->relu)
        corr_rows(k, in, w, bias, out, 1);
    else
        corr_rows(k, in, w, bias, out, 0);
}

/* Backward weights of one sample for kernel width S: acc holds, per
 * (output channel, input channel, kernel row, column), a vector of partial
 * sums, then per output channel the bias gradient's; dy is padded to rows of
 * `cols` floats (zeros past Q). */
static inline __attribute__((always_inline)) void wgrad_sample(const struct direct_inst *m, const float *in,
                                                               const float *dy, int cols, v8 *acc, const int S)
{
    const struct dl_conv_geom *g = &m->g;
    const struct padded *pi = &m->fwd.in;
    for (int c = 0; c < g->C; c++)
        for (int r = 0; r < g->R; r++)
            for (int k0 = 0; k0 < g->K; k0 += 2) {
                int pair = k0 + 1 < g->K;
                v8 a[2][DIRECT_MAX_S];
                v8 *dst[2];
                for (int j = 0; j < 2; j++) {
                    dst[j] = acc + (((size_t)(k0 + (pair ? j : 0)) * g->C + c) * g->R + r) * S;
                    #pragma GCC unroll 7
                    for (int s = 0; s < S; s++)
                        a[j][s] = dst[j][s];
                }
                const float *d0 = dy + (size_t)k0 * g->P * cols, *d1 = pair ? d0 + (size_t)g->P * cols : d0;
                for (int p = 0; p < g->P; p++) {
                    const float *row = in + ((size_t)c * pi->rows + (size_t)(p + r)) * pi->cols;
                    #pragma GCC unroll 4 /* rows of a few vectors: 0.41 -> 0.29 ms on LeNet's conv1 */
                    for (int q = 0; q < cols; q += VL) {
                        v8 e0 = LOAD8(d0 + (size_t)p * cols + q), e1 = LOAD8(d1 + (size_t)p * cols + q);
                        #pragma GCC unroll 7
                        for (int s = 0; s < S; s++) {
                            v8 x = LOAD8(row + q + s);
                            a[0][s] += e0 * x;
                            a[1][s] += e1 * x;
                        }
                    }
                }
                #pragma GCC unroll 7
                for (int s = 0; s < S; s++)
                    dst[0][s] = a[0][s];
                if (pair) {
                    #pragma GCC unroll 7
                    for (int s = 0; s < S; s++)
                        dst[1][s] = a[1][s];
                }
            }
    v8 *bias = acc + (size_t)g->K * g->C * g->R * S;
    for (int k = 0; k < g->K; k++) {
        v8 t = bias[k];
        for (long i = 0; i < (long)g->P * cols; i += VL)
            t += LOAD8(dy + (size_t)k * g->P * cols + i);
        bias[k] = t;
    }
}

static inline __attribute__((always_inline)) void wgrad_any(const struct direct_inst *m, const float *in,
                                                            const float *dy, int cols, v8 *acc)
{
    switch (m->g.S) {
    case 1: wgrad_sample(m, in, dy, cols, acc, 1); break;
    case 2: wgrad_sample(m, in, dy, cols, acc, 2); break;
    case 3: wgrad_sample(m, in, dy, cols, acc, 3); break;
    case 4: wgrad_sample(m, in, dy, cols, acc, 4); break;
    case 5: wgrad_sample(m, in, dy, cols, acc, 5); break;
    case 6: wgrad_sample(m, in, dy, cols, acc, 6); break;
    default: wgrad_sample(m, in, dy, cols, acc, 7); break;
    }
}

/* The two compiled versions of the inner loops. */
struct direct_loops {
    void (*corr)(const struct corr *k, const float *in, const float *w, const float *bias, float *out);
    void (*wgrad)(const struct direct_inst *m, const float *in, const float *dy, int cols, v8 *acc);
};

__attribute__((target("avx2,fma"))) static void corr_avx2(const struct corr *k, const float *in, const float *w,
                                                          const float *bias, float *out)
{
    corr_sample(k, in, w, bias, out);
}

__attribute__((target("avx2,fma"))) static void wgrad_avx2(const struct direct_inst *m, const float *in,
                                                           const float *dy, int cols, v8 *acc)
{
    wgrad_any(m, in, dy, cols, acc);
}

static void corr_base(const struct corr *k, const float *in, const float *w, const float *bias, float *out)
{
    corr_sample(k, in, w, bias, out);
}

static void wgrad_base(const struct direct_inst *m, const float *in, const float *dy, int cols, v8 *acc)
{
    wgrad_any(m, in, dy, cols, acc);
}

static const struct direct_loops *loops(void)
{
    static const struct direct_loops avx2 = {corr_avx2, wgrad_avx2}, base = {corr_base, wgrad_base};
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &avx2 : &base;
}

static int direct_supports(const struct dl_layer *l)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    return g.G == 1 && g.C <= DIRECT_MAX_C && g.S <= DIRECT_MAX_S && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
           g.dw == 1 && g.ph < g.R && g.pw < g.S && g.pr_h >= 0 && g.pr_w >= 0;
}

static int direct_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                         struct dl_error *err)
{
    struct direct_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->g = dl_conv_geom(l);
    m->threads = dl_threads_get();
    const struct dl_conv_geom *g = &m->g;
    /* Forward: rows P + R - 1 (ph on top), columns the runs + S - 1 (pw on the left). */
    m->loops = loops();
    m->fwd = (struct corr){.n_in = g->C, .n_out = g->K, .R = g->R, .S = g->S, .P = g->P, .Q = g->Q, .relu = cfg->relu,
                           .in = {g->P + g->R - 1, round_up(g->Q, RUN) + g->S - 1}};
    /* Backward data: dy padded by R-1-ph on top and S-1-pw on the left. */
    m->bwd = (struct corr){.n_in = g->K, .n_out = g->C, .R = g->R, .S = g->S, .P = g->H, .Q = g->W,
                           .in = {g->H + g->R - 1, round_up(g->W, RUN) + g->S - 1}};
    size_t dw = (size_t)g->K * g->C * g->R * g->S;
    m->fwd_area = (size_t)round_up((int)padded_floats(&m->fwd.in, g->C), 16);
    m->bwd_area = (size_t)round_up((int)padded_floats(&m->bwd.in, g->K), 16);
    m->wgt_area = m->fwd_area + (size_t)g->K * g->P * round_up(g->Q, VL) + (dw + (size_t)g->K) * VL;
    *inst = m;
    return DL_OK;
}

static void direct_destroy(void *inst)
{
    free(inst);
}

static size_t direct_ws(const void *inst, enum dl_dir dir)
{
    const struct direct_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    size_t per = dir == DL_DIR_FORWARD ? m->fwd_area : dir == DL_DIR_BACKWARD_DATA ? m->bwd_area : m->wgt_area;
    size_t shared = dir == DL_DIR_BACKWARD_DATA ? (size_t)round_up(g->K * g->C * g->R * g->S, 16) : 0;
    return dl_dtype_size(DL_F32) * (shared + per * (size_t)m->threads);
}

static void direct_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct direct_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    const struct direct_loops *f = m->loops;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (int n = 0; n < c->batch; n++) {
        float *pad = (float *)a->workspace + m->fwd_area * (size_t)omp_get_thread_num();
        pad_planes(dl_tensor_const_f32(&c->in[0]) + (size_t)n * g->C * g->H * g->W, NULL, g->C, g->H, g->W, g->ph,
                   g->pw, &m->fwd.in, pad);
        f->corr(&m->fwd, pad, c->param[0], g->bias ? c->param[1] : NULL,
                dl_tensor_f32(&c->out) + (size_t)n * g->K * g->P * g->Q);
    }
}

static void direct_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct direct_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    /* wt[c][k][R-1-r][S-1-s] = w[k][c][r][s] */
    float *wt = a->workspace, *areas = wt + round_up(g->K * g->C * g->R * g->S, 16);
    for (int k = 0; k < g->K; k++)
        for (int ci = 0; ci < g->C; ci++)
            for (int r = 0; r < g->R; r++)
                for (int s = 0; s < g->S; s++)
                    wt[(((size_t)ci * g->K + k) * g->R + (g->R - 1 - r)) * g->S + (g->S - 1 - s)] =
                        c->param[0][(((size_t)k * g->C + ci) * g->R + r) * g->S + s];
    const struct direct_loops *f = m->loops;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (int n = 0; n < c->batch; n++) {
        float *pad = areas + m->bwd_area * (size_t)omp_get_thread_num();
        size_t at = (size_t)n * g->K * g->P * g->Q;
        pad_planes(dl_tensor_const_f32(&c->dout) + at, m->fwd.relu ? dl_tensor_f32(&c->out) + at : NULL, g->K, g->P,
                   g->Q, g->R - 1 - g->ph, g->S - 1 - g->pw, &m->bwd.in, pad);
        f->corr(&m->bwd, pad, wt, NULL, dl_tensor_f32(&c->din[0]) + (size_t)n * g->C * g->H * g->W);
    }
}

static void direct_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct direct_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    float *db = g->bias ? c->dparam[1] : NULL;
    if (!c->dparam[0] && !db)
        return;
    const struct direct_loops *f = m->loops;
    size_t taps = (size_t)g->K * g->C * g->R * g->S, sums = taps + (size_t)g->K;
    int cols = round_up(g->Q, VL);
    struct padded dyp = {g->P, cols};
    /* Per thread: padded input, padded dy, the vector sums (weights, bias). */
    size_t sums_at = m->fwd_area + (size_t)g->K * g->P * cols;
    #pragma omp parallel num_threads(m->threads)
    {
        float *pad = (float *)a->workspace + m->wgt_area * (size_t)omp_get_thread_num();
        float *dy = pad + m->fwd_area;
        v8 *acc = (v8 *)(pad + sums_at);
        memset(acc, 0, sizeof *acc * sums);
        #pragma omp for schedule(static)
        for (int n = 0; n < c->batch; n++) {
            size_t at = (size_t)n * g->K * g->P * g->Q;
            pad_planes(dl_tensor_const_f32(&c->in[0]) + (size_t)n * g->C * g->H * g->W, NULL, g->C, g->H, g->W, g->ph,
                       g->pw, &m->fwd.in, pad);
            pad_planes(dl_tensor_const_f32(&c->dout) + at, m->fwd.relu ? dl_tensor_f32(&c->out) + at : NULL, g->K, g->P,
                       g->Q, 0, 0, &dyp, dy);
            f->wgrad(m, pad, dy, cols, acc);
        }
        /* Threads that got no sample hold zeros: summing every area is exact. */
        int team = omp_get_num_threads();
        #pragma omp for schedule(static)
        for (size_t i = 0; i < sums; i++) {
            float s = 0;
            for (int t = 0; t < team; t++) {
                const float *v = (const float *)a->workspace + m->wgt_area * (size_t)t + sums_at + i * VL;
                for (int j = 0; j < VL; j++)
                    s += v[j];
            }
            if (i < taps && c->dparam[0])
                c->dparam[0][i] += s;
            else if (i >= taps && db)
                db[i - taps] += s;
        }
    }
}

const struct dl_kernel dl_kernel_direct_conv = {
    .name = "direct", .backend = "cpu_simd", .op = &dl_op_conv, .fuses_relu = 1, .supports = direct_supports,
    .create = direct_create, .destroy = direct_destroy, .workspace_bytes = direct_ws,
    .forward = direct_forward, .backward_data = direct_backward_data, .backward_weights = direct_backward_weights,
};
