/* conv_im2col.c: convolution as im2col + GEMM on OpenBLAS ("openblas") or
 * oneDNN's JIT sgemm ("dnnl-gemm"), NCHW.  Parallel over the samples of the
 * micro-batch: each thread unfolds one sample at a time into its own col
 * buffer (the (C/G*R*S) x (P*Q) matrix of input taps of one group; it stays
 * in cache) and runs a single-threaded GEMM on it, so a pass is one parallel
 * region however small the layer, and nothing is regrouped:
 *   forward          y_n,g = W_g col + b
 *   backward data    dx_n = col2im(W_g^T dy_n,g)
 *   backward weights dW_g += sum_n dy_n,g col^T, in one accumulator per
 *                    thread, summed at the end (db += sums of dy).
 * The workspace is per thread, so the instance remembers the thread count it
 * was sized for and never runs more.  Forward unfolds the first samples of
 * the micro-batch, as many as IM2COL_SAVE_BYTES of col matrices hold, into
 * the layer's saved memory instead, and backward weights reads them from
 * there: unfolding is about as slow as the GEMM on small layers (LeNet-5,
 * bench/README.md), and this does it once per step instead of twice.  So the
 * saved memory grows with the micro-batch up to that cap and then stays:
 * never more for fewer samples (kernel.h), or a partial batch's state would
 * not fit the executor's plan for the whole one. */
#include "backends/cpu_blas/blas.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_blas/gemm.h"
#include "core/threads.h"
#include "ops/kinds.h"

/* Most bytes of one micro-batch's col matrices kept from forward to backward. */
#define IM2COL_SAVE_BYTES (16L << 20)

struct im2col_inst {
    enum dl_gemm_lib lib;
    struct dl_conv_geom g;
    int threads;       /* the workspace holds this many per-thread areas */
    long HW, PQ, rows; /* rows = C/G*R*S */
    int mb;
    int kept;          /* samples n < kept: forward leaves group gi's col at saved + (n*G + gi) col_floats */
};

/* The output columns q in [*lo, *hi) whose input column q*sw - pw + s*dw
 * falls inside the image (the rest read zero padding). */
static void valid_cols(const struct dl_conv_geom *g, int s, int *lo, int *hi)
{
    int off = s * g->dw - g->pw; /* iw = q*sw + off */
    int a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int b = g->W - off <= 0 ? 0 : (g->W - off + g->sw - 1) / g->sw;
    *lo = a < g->Q ? a : g->Q;
    *hi = b < g->Q ? b : g->Q;
    if (*hi < *lo)
        *hi = *lo;
}

/* col[row, p*Q+q] = x[c, p*sh-ph+r*dh, q*sw-pw+s*dw] (0 outside) for the
 * channels of group gi of one sample x.  The bounds are worked out per output
 * row, so the inner loop is a plain (or strided) copy. */
static void im2col(const struct im2col_inst *m, const float *x, int gi, float *col)
{
    const struct dl_conv_geom *g = &m->g;
    for (long row = 0; row < m->rows; row++) {
        int c = (int)(row / (g->R * g->S)) + gi * g->Cg, r = (int)(row / g->S % g->R), s = (int)(row % g->S);
        int lo, hi, off = s * g->dw - g->pw;
        valid_cols(g, s, &lo, &hi);
        float *dst = col + row * m->PQ;
        const float *xc = x + (long)c * m->HW;
        for (int p = 0; p < g->P; p++, dst += g->Q) {
            int ih = p * g->sh - g->ph + r * g->dh;
            if (ih < 0 || ih >= g->H) {
                memset(dst, 0, sizeof *dst * (size_t)g->Q);
                continue;
            }
            const float *xr = xc + (long)ih * g->W + off;
            for (int q = 0; q < lo; q++)
                dst[q] = 0;
            if (g->sw == 1)
                memcpy(dst + lo, xr + lo, sizeof *dst * (size_t)(hi - lo));
            else
                for (int q = lo; q < hi; q++)
                    dst[q] = xr[(long)q * g->sw];
            for (int q = hi; q < g->Q; q++)
                dst[q] = 0;
        }
    }
}

/* The adjoint, for one sample: dx[c, ...] += col[row, ...]. */
static void col2im(const struct im2col_inst *m, const float *col, int gi, float *dx)
{
    const struct dl_conv_geom *g = &m->g;
    for (long row = 0; row < m->rows; row++) {
        int c = (int)(row / (g->R * g->S)) + gi * g->Cg, r = (int)(row / g->S % g->R), s = (int)(row % g->S);
        int lo, hi, off = s * g->dw - g->pw;
        valid_cols(g, s, &lo, &hi);
        const float *src = col + row * m->PQ;
        float *xc = dx + (long)c * m->HW;
        for (int p = 0; p < g->P; p++) {
            int ih = p * g->sh - g->ph + r * g->dh;
            if (ih < 0 || ih >= g->H)
                continue;
            float *xr = xc + (long)ih * g->W + off;
            const float *sr = src + (long)p * g->Q;
            if (g->sw == 1)
                for (int q = lo; q < hi; q++)
                    xr[q] += sr[q];
            else
                for (int q = lo; q < hi; q++)
                    xr[(long)q * g->sw] += sr[q];
        }
    }
}

static int im2col_create(const struct dl_layer *l, int mb, enum dl_gemm_lib lib, void **inst,
                         struct dl_error *err)
{
    struct im2col_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->lib = lib;
    m->threads = dl_threads_get();
    m->g = dl_conv_geom(l);
    const struct dl_conv_geom *g = &m->g;
    m->HW = (long)g->H * g->W;
    m->PQ = (long)g->P * g->Q;
    m->rows = (long)g->Cg * g->R * g->S;
    m->mb = mb;
    long per_sample = (long)dl_dtype_size(DL_F32) * m->rows * m->PQ * g->G;
    m->kept = IM2COL_SAVE_BYTES / per_sample < mb ? (int)(IM2COL_SAVE_BYTES / per_sample) : mb;
    *inst = m;
    return DL_OK;
}

static int im2col_create_openblas(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                                  struct dl_error *err)
{
    return im2col_create(l, cfg->mb, DL_GEMM_OPENBLAS, inst, err);
}

static int im2col_create_dnnl(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                              struct dl_error *err)
{
    return im2col_create(l, cfg->mb, DL_GEMM_DNNL, inst, err);
}

static void im2col_destroy(void *inst)
{
    free(inst);
}

/* Per thread: a col buffer, and for backward weights a dW accumulator. */
static size_t col_floats(const struct im2col_inst *m)
{
    return (size_t)m->rows * (size_t)m->PQ;
}

static size_t dw_floats(const struct im2col_inst *m)
{
    return (size_t)m->g.K * (size_t)m->rows;
}

/* 1 when every sample's col is in saved memory: forward and backward
 * weights need no col of their own. */
static int all_kept(const struct im2col_inst *m)
{
    return m->kept == m->mb;
}

static size_t im2col_ws(const void *inst, enum dl_dir dir)
{
    const struct im2col_inst *m = inst;
    size_t col = col_floats(m);
    if (all_kept(m) && dir != DL_DIR_BACKWARD_DATA)
        col = 0;
    size_t per_thread = col + (dir == DL_DIR_BACKWARD_WEIGHTS ? dw_floats(m) : 0);
    return dl_dtype_size(DL_F32) * per_thread * (size_t)m->threads;
}

static size_t im2col_saved(const void *inst)
{
    const struct im2col_inst *m = inst;
    return dl_dtype_size(DL_F32) * col_floats(m) * (size_t)m->g.G * (size_t)m->kept;
}

/* Sample n, group gi's col: in saved memory, or the thread's workspace area
 * (whose areas are `stride` floats apart). */
static float *col_of(const struct im2col_inst *m, const struct dl_kernel_args *a, int n, int gi, size_t stride)
{
    if (n < m->kept)
        return a->c.saved + ((size_t)n * (size_t)m->g.G + (size_t)gi) * col_floats(m);
    return (float *)a->workspace + stride * (size_t)omp_get_thread_num();
}

static void im2col_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (int n = 0; n < c->batch; n++) {
        float *y = dl_tensor_f32(&c->out) + (long)n * g->K * m->PQ;
        for (int k = 0; k < g->K; k++) {
            float b = g->bias ? c->param[1][k] : 0;
            for (long i = 0; i < m->PQ; i++)
                y[k * m->PQ + i] = b;
        }
        for (int gi = 0; gi < g->G; gi++) {
            float *col = col_of(m, a, n, gi, col_floats(m));
            im2col(m, dl_tensor_const_f32(&c->in[0]) + (long)n * g->C * m->HW, gi, col);
            dl_sgemm(m->lib, 0, 0, g->Kg, m->PQ, m->rows, 1, c->param[0] + (long)gi * g->Kg * m->rows, m->rows,
                     col, m->PQ, 1, y + (long)gi * g->Kg * m->PQ, m->PQ);
        }
    }
}

static void im2col_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (int n = 0; n < c->batch; n++) {
        float *dcol = (float *)a->workspace + col_floats(m) * (size_t)omp_get_thread_num();
        float *dx = dl_tensor_f32(&c->din[0]) + (long)n * g->C * m->HW;
        memset(dx, 0, sizeof *dx * (size_t)g->C * (size_t)m->HW);
        for (int gi = 0; gi < g->G; gi++) {
            const float *dy = dl_tensor_const_f32(&c->dout) + ((long)n * g->K + (long)gi * g->Kg) * m->PQ;
            dl_sgemm(m->lib, 1, 0, m->rows, m->PQ, g->Kg, 1, c->param[0] + (long)gi * g->Kg * m->rows, m->rows, dy,
                     m->PQ, 0, dcol, m->PQ);
            col2im(m, dcol, gi, dx);
        }
    }
}

/* db[k] += the sum of dy's channel k over the batch, one thread per
 * channel, in double. */
static void bias_backward(const struct im2col_inst *m, const struct dl_op_call *c)
{
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (int k = 0; k < m->g.K; k++) {
        double s = 0;
        for (int n = 0; n < c->batch; n++) {
            const float *dy = dl_tensor_const_f32(&c->dout) + ((long)n * m->g.K + k) * m->PQ;
            #pragma omp simd reduction(+ : s)
            for (long i = 0; i < m->PQ; i++)
                s += dy[i];
        }
        c->dparam[1][k] += (float)s;
    }
}

static void im2col_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    /* Per thread: [col unless every sample's is saved] dW accumulator. */
    size_t col_ws = all_kept(m) ? 0 : col_floats(m), stride = col_ws + dw_floats(m);
    if (c->dparam[0]) {
        #pragma omp parallel num_threads(m->threads)
        {
            float *dw = (float *)a->workspace + stride * (size_t)omp_get_thread_num() + col_ws;
            memset(dw, 0, sizeof *dw * dw_floats(m));
            #pragma omp for schedule(static)
            for (int n = 0; n < c->batch; n++)
                for (int gi = 0; gi < g->G; gi++) {
                    float *col = col_of(m, a, n, gi, stride);
                    if (n >= m->kept)
                        im2col(m, dl_tensor_const_f32(&c->in[0]) + (long)n * g->C * m->HW, gi, col);
                    const float *dy = dl_tensor_const_f32(&c->dout) + ((long)n * g->K + (long)gi * g->Kg) * m->PQ;
                    dl_sgemm(m->lib, 0, 1, g->Kg, m->rows, m->PQ, 1, dy, m->PQ, col, m->PQ, 1,
                             dw + (long)gi * g->Kg * m->rows, m->rows);
                }
            /* Threads that got no sample hold zeros: summing every area is exact. */
            int team = omp_get_num_threads();
            #pragma omp for schedule(static)
            for (size_t i = 0; i < dw_floats(m); i++)
                for (int t = 0; t < team; t++)
                    c->dparam[0][i] += ((float *)a->workspace)[stride * (size_t)t + col_ws + i];
        }
    }
    if (g->bias && c->dparam[1])
        bias_backward(m, c);
}

#define IM2COL_KERNEL(SYM, NAME, LIB)                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cpu_blas", .op = &dl_op_conv, .create = im2col_create_##LIB,   \
        .destroy = im2col_destroy, .workspace_bytes = im2col_ws, .saved_bytes = im2col_saved,    \
        .forward = im2col_forward,                                                               \
        .backward_data = im2col_backward_data, .backward_weights = im2col_backward_weights,      \
    };
IM2COL_KERNEL(dl_kernel_openblas_conv, "openblas", openblas)
IM2COL_KERNEL(dl_kernel_dnnl_gemm_conv, "dnnl-gemm", dnnl)
