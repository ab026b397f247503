/* conv_im2col.c: convolution as im2col + GEMM, one GEMM per group over the
 * whole micro-batch, on OpenBLAS ("openblas") or oneDNN's JIT sgemm
 * ("dnnl-gemm"), NCHW.  With col = the (C/G*R*S) x (mb*P*Q) matrix of input
 * taps of one group and Y = the Kg x (mb*P*Q) output of that group:
 *   forward          Y = W_g col, scattered into y (+ bias)
 *   backward data    dx = col2im(W_g^T dY)
 *   backward weights dW_g += dY col^T, db += row sums of dy.
 * One large GEMM instead of one per sample keeps the threads busy (few
 * parallel regions); the price is a workspace that grows with mb. */
#include "backends/cpu_blas/blas.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_blas/gemm.h"
#include "ops/kinds.h"

struct im2col_inst {
    enum dl_gemm_lib lib;
    struct dl_conv_geom g;
    int mb;
    long HW, PQ, rows; /* rows = C/G*R*S */
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

/* col[row, n*PQ + p*Q+q] = x[n, c, p*sh-ph+r*dh, q*sw-pw+s*dw] (0 outside)
 * for the channels of group gi.  The bounds are worked out per output row,
 * so the inner loop is a plain (or strided) copy. */
static void im2col(const struct im2col_inst *m, const float *x, int mb, int gi, float *col)
{
    const struct dl_conv_geom *g = &m->g;
    #pragma omp parallel for collapse(2) schedule(static)
    for (long row = 0; row < m->rows; row++)
        for (int n = 0; n < mb; n++) {
            int c = (int)(row / (g->R * g->S)) + gi * g->Cg, r = (int)(row / g->S % g->R), s = (int)(row % g->S);
            int lo, hi, off = s * g->dw - g->pw;
            valid_cols(g, s, &lo, &hi);
            float *dst = col + (row * mb + n) * m->PQ;
            const float *xc = x + ((long)n * g->C + c) * m->HW;
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

/* The adjoint: dx[n, c, ...] += col[row, n*PQ + ...]; parallel over
 * (sample, channel), so no two threads add into the same value. */
static void col2im(const struct im2col_inst *m, const float *col, int mb, int gi, float *dx)
{
    const struct dl_conv_geom *g = &m->g;
    int RS = g->R * g->S;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < mb; n++)
        for (int cl = 0; cl < g->Cg; cl++) {
            float *xc = dx + ((long)n * g->C + cl + gi * g->Cg) * m->HW;
            for (int t = 0; t < RS; t++) {
                int r = t / g->S, s = t % g->S, lo, hi, off = s * g->dw - g->pw;
                valid_cols(g, s, &lo, &hi);
                const float *src = col + (((long)cl * RS + t) * mb + n) * m->PQ;
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
}

/* Between the NCHW tensor t (channels of group gi) and Y[k, n*PQ + i]:
 * to_y = 1 gathers, 0 scatters (adding bias when given). */
static void regroup(const struct im2col_inst *m, float *t, float *Y, int mb, int gi, int to_y, const float *bias)
{
    const struct dl_conv_geom *g = &m->g;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int k = 0; k < g->Kg; k++)
        for (int n = 0; n < mb; n++) {
            float *tp = t + ((long)n * g->K + gi * g->Kg + k) * m->PQ, *yp = Y + ((long)k * mb + n) * m->PQ;
            float b = bias ? bias[gi * g->Kg + k] : 0;
            for (long i = 0; i < m->PQ; i++) {
                if (to_y)
                    yp[i] = tp[i];
                else
                    tp[i] = yp[i] + b;
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
    m->mb = mb;
    m->g = dl_conv_geom(l);
    const struct dl_conv_geom *g = &m->g;
    m->HW = (long)g->H * g->W;
    m->PQ = (long)g->P * g->Q;
    m->rows = (long)g->Cg * g->R * g->S;
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

/* col (or dcol), then Y (or dY): the same in every direction. */
static size_t im2col_ws(const void *inst, enum dl_dir dir)
{
    const struct im2col_inst *m = inst;
    return sizeof(float) * (size_t)((m->rows + m->g.Kg) * m->mb * m->PQ);
}

static void im2col_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    int mb = c->batch;
    float *col = a->workspace, *Y = col + m->rows * mb * m->PQ;
    for (int gi = 0; gi < g->G; gi++) {
        im2col(m, c->in[0], mb, gi, col);
        dl_sgemm(m->lib, 0, 0, g->Kg, mb * m->PQ, m->rows, 1, c->param[0] + (long)gi * g->Kg * m->rows, m->rows,
                 col, mb * m->PQ, 0, Y, mb * m->PQ);
        regroup(m, c->out, Y, mb, gi, 0, g->bias ? c->param[1] : NULL);
    }
}

static void im2col_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    int mb = c->batch;
    if (!c->din[0])
        return;
    float *dcol = a->workspace, *dY = dcol + m->rows * mb * m->PQ;
    memset(c->din[0], 0, sizeof(float) * (size_t)mb * (size_t)g->C * (size_t)m->HW);
    for (int gi = 0; gi < g->G; gi++) {
        regroup(m, (float *)c->dout, dY, mb, gi, 1, NULL);
        dl_sgemm(m->lib, 1, 0, m->rows, mb * m->PQ, g->Kg, 1, c->param[0] + (long)gi * g->Kg * m->rows, m->rows,
                 dY, mb * m->PQ, 0, dcol, mb * m->PQ);
        col2im(m, dcol, mb, gi, c->din[0]);
    }
}

static void im2col_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    int mb = c->batch;
    float *col = a->workspace, *dY = col + m->rows * mb * m->PQ;
    for (int gi = 0; gi < g->G; gi++) {
        im2col(m, c->in[0], mb, gi, col);
        regroup(m, (float *)c->dout, dY, mb, gi, 1, NULL);
        dl_sgemm(m->lib, 0, 1, g->Kg, m->rows, mb * m->PQ, 1, dY, mb * m->PQ, col, mb * m->PQ, 1,
                 c->dparam[0] + (long)gi * g->Kg * m->rows, m->rows);
    }
    if (!g->bias || !c->dparam[1])
        return;
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < g->K; k++) {
        double s = 0;
        for (int n = 0; n < mb; n++)
            for (long i = 0; i < m->PQ; i++)
                s += c->dout[((long)n * g->K + k) * m->PQ + i];
        c->dparam[1][k] += (float)s;
    }
}

#define IM2COL_KERNEL(SYM, NAME, LIB)                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cpu_blas", .op = &dl_op_conv, .create = im2col_create_##LIB,   \
        .destroy = im2col_destroy, .workspace_bytes = im2col_ws, .forward = im2col_forward,      \
        .backward_data = im2col_backward_data, .backward_weights = im2col_backward_weights,      \
    };
IM2COL_KERNEL(dl_kernel_openblas_conv, "openblas", openblas)
IM2COL_KERNEL(dl_kernel_dnnl_gemm_conv, "dnnl-gemm", dnnl)
