/* conv_im2col.c: convolution as im2col + GEMM, per sample and group, on
 * OpenBLAS ("openblas") or oneDNN's JIT sgemm ("dnnl-gemm"), NCHW.  With
 * col = the (C/G*R*S) x (P*Q) matrix of input taps of one group:
 *   forward          y_g = W_g col (+ bias)
 *   backward data    dx  = col2im(W_g^T dy_g)
 *   backward weights dW_g += dy_g col^T, db += row sums of dy.
 * Handles every stride, padding, dilation and group count; the workspace is
 * one col matrix.  A 1x1, stride-1, unpadded convolution uses x as col. */
#include "backends/cpu_blas/blas.h"

#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "backends/cpu_blas/gemm.h"
#include "ops/kinds.h"

struct im2col_inst {
    enum dl_gemm_lib lib;
    struct dl_conv_geom g;
    long HW, PQ, rows; /* rows = C/G*R*S */
    int identity;      /* col == x */
};

/* col[row, p*Q+q] = x[c, p*sh-ph+r*dh, q*sw-pw+s*dw] (0 outside) for the
 * channels of group gi. */
static void im2col(const struct im2col_inst *m, const float *x, int gi, float *col)
{
    const struct dl_conv_geom *g = &m->g;
    #pragma omp parallel for schedule(static)
    for (long row = 0; row < m->rows; row++) {
        int c = (int)(row / (g->R * g->S)) + gi * g->Cg, r = (int)(row / g->S % g->R), s = (int)(row % g->S);
        float *dst = col + row * m->PQ;
        const float *xc = x + c * m->HW;
        for (int p = 0; p < g->P; p++) {
            int ih = p * g->sh - g->ph + r * g->dh;
            for (int q = 0; q < g->Q; q++) {
                int iw = q * g->sw - g->pw + s * g->dw;
                dst[p * g->Q + q] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? xc[(long)ih * g->W + iw] : 0;
            }
        }
    }
}

/* The adjoint: dx[c, ...] += col[row, ...]; parallel over channels, so no
 * two threads add into the same value. */
static void col2im(const struct im2col_inst *m, const float *col, int gi, float *dx)
{
    const struct dl_conv_geom *g = &m->g;
    int RS = g->R * g->S;
    #pragma omp parallel for schedule(static)
    for (int cl = 0; cl < g->Cg; cl++) {
        float *xc = dx + (long)(cl + gi * g->Cg) * m->HW;
        for (int t = 0; t < RS; t++) {
            int r = t / g->S, s = t % g->S;
            const float *src = col + ((long)cl * RS + t) * m->PQ;
            for (int p = 0; p < g->P; p++) {
                int ih = p * g->sh - g->ph + r * g->dh;
                if (ih < 0 || ih >= g->H)
                    continue;
                for (int q = 0; q < g->Q; q++) {
                    int iw = q * g->sw - g->pw + s * g->dw;
                    if (iw >= 0 && iw < g->W)
                        xc[(long)ih * g->W + iw] += src[p * g->Q + q];
                }
            }
        }
    }
}

static int im2col_create(const struct dl_layer *l, enum dl_gemm_lib lib, void **inst, struct dl_error *err)
{
    struct im2col_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->lib = lib;
    m->g = dl_conv_geom(l);
    const struct dl_conv_geom *g = &m->g;
    m->HW = (long)g->H * g->W;
    m->PQ = (long)g->P * g->Q;
    m->rows = (long)g->Cg * g->R * g->S;
    m->identity = g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    *inst = m;
    return DL_OK;
}

static int im2col_create_openblas(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                                  struct dl_error *err)
{
    return im2col_create(l, DL_GEMM_OPENBLAS, inst, err);
}

static int im2col_create_dnnl(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                              struct dl_error *err)
{
    return im2col_create(l, DL_GEMM_DNNL, inst, err);
}

static void im2col_destroy(void *inst)
{
    free(inst);
}

static size_t im2col_ws(const void *inst, enum dl_dir dir)
{
    const struct im2col_inst *m = inst;
    return m->identity && dir != DL_DIR_BACKWARD_DATA ? 0 : sizeof(float) * (size_t)(m->rows * m->PQ);
}

/* col of sample x, group gi: x itself or im2col into the workspace. */
static const float *cols(const struct im2col_inst *m, const float *x, int gi, void *ws)
{
    if (m->identity)
        return x + (long)gi * m->g.Cg * m->HW;
    im2col(m, x, gi, ws);
    return ws;
}

static void im2col_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    for (int n = 0; n < c->batch; n++) {
        const float *x = c->in[0] + (long)n * g->C * m->HW;
        float *y = c->out + (long)n * g->K * m->PQ;
        if (g->bias)
            for (int k = 0; k < g->K; k++)
                for (long i = 0; i < m->PQ; i++)
                    y[k * m->PQ + i] = c->param[1][k];
        for (int gi = 0; gi < g->G; gi++)
            dl_sgemm(m->lib, 0, 0, g->Kg, m->PQ, m->rows, 1, c->param[0] + (long)gi * g->Kg * m->rows, m->rows,
                     cols(m, x, gi, a->workspace), m->PQ, g->bias ? 1 : 0, y + (long)gi * g->Kg * m->PQ, m->PQ);
    }
}

static void im2col_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0])
        return;
    for (int n = 0; n < c->batch; n++) {
        float *dx = c->din[0] + (long)n * g->C * m->HW;
        const float *dy = c->dout + (long)n * g->K * m->PQ;
        for (int gi = 0; gi < g->G; gi++) {
            const float *w = c->param[0] + (long)gi * g->Kg * m->rows, *dyg = dy + (long)gi * g->Kg * m->PQ;
            if (m->identity) {
                dl_sgemm(m->lib, 1, 0, m->rows, m->PQ, g->Kg, 1, w, m->rows, dyg, m->PQ, 0,
                         dx + (long)gi * g->Cg * m->HW, m->PQ);
                continue;
            }
            if (gi == 0)
                memset(dx, 0, sizeof *dx * (size_t)g->C * (size_t)m->HW);
            dl_sgemm(m->lib, 1, 0, m->rows, m->PQ, g->Kg, 1, w, m->rows, dyg, m->PQ, 0, a->workspace, m->PQ);
            col2im(m, a->workspace, gi, dx);
        }
    }
}

static void im2col_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct im2col_inst *m = inst;
    const struct dl_conv_geom *g = &m->g;
    const struct dl_op_call *c = &a->c;
    for (int n = 0; n < c->batch; n++) {
        const float *x = c->in[0] + (long)n * g->C * m->HW;
        const float *dy = c->dout + (long)n * g->K * m->PQ;
        for (int gi = 0; gi < g->G; gi++)
            dl_sgemm(m->lib, 0, 1, g->Kg, m->rows, m->PQ, 1, dy + (long)gi * g->Kg * m->PQ, m->PQ,
                     cols(m, x, gi, a->workspace), m->PQ, 1, c->dparam[0] + (long)gi * g->Kg * m->rows, m->rows);
    }
    if (!g->bias || !c->dparam[1])
        return;
    #pragma omp parallel for schedule(static)
    for (int k = 0; k < g->K; k++) {
        double s = 0;
        for (int n = 0; n < c->batch; n++)
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
