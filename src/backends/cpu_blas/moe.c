/* moe.c: the mixture of experts (ops/moe.c) as grouped matrix products on
 * oneDNN's JIT sgemm ("dnnl-gemm"): the positions' features gathered into
 * rows X [M, C]; the router's logits one product, X W_g^T; the routing,
 * capacity and per-sample losses the reference's own steps (ops/moe.h);
 * then the kept choices sorted by expert (in position order within one),
 * their rows gathered into X_p, and per expert three products on its
 * contiguous rows, H1 = X_e W1_e^T, H3 = X_e W3_e^T, Y_e = (silu(H1) H3)
 * W2_e^T, scattered back weighted by their gates.  Backward mirrors it:
 *   dgate = dy . Y_r,  dY_e = gate dy,  dW2_e += dY_e^T H_e,
 *   dH = dY_e W2_e,  dH1 = dH H3 s (1 + h1 (1 - s)),  dH3 = dH silu(h1),
 *   dW1_e += dH1^T X_e,  dW3_e += dH3^T X_e,  dX_e = dH1 W1_e + dH3 W3_e,
 * and the router's logit gradient from the gates' (ops/moe.h), then
 * dW_g += dlogits^T X, dX += dlogits W_g.  saved: the op's state first (the
 * executor reads the balancing loss there), then each position's
 * logsumexp and, per kept choice (M k rows at most), its position, H1, H3
 * and Y.  An expert is a task, its products on one thread (the experts'
 * rows are too few for a product to gain from more), so results do not
 * depend on the thread count.
 *
 * With expert parallelism (the call's experts group) the router, routing
 * and gates stay with the rows' own rank; the rows travel to the ranks of
 * their experts (backends/moe_rows.h), which compute them and send Y back.
 * In backward each row travels again with its gradient (gate dy), its
 * expert's rank recomputes H1 and H3 (nothing of another rank's rows is
 * kept between forward and backward) and sends dX back; the counts each
 * rank received are saved (E ints) for it. */
#include "backends/cpu_blas/blas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_blas/gemm.h"
#include "backends/cpu_blas/seq_rows.h"
#include "backends/moe_rows.h"
#include "ops/kinds.h"
#include "ops/moe.h"

struct moe_inst {
    long T, C, E, K, F, mb;
    enum dl_gemm_lib lib;
};

/* The kernel's part of saved, after the op's: where each array starts. */
struct moe_saved {
    float *lse;      /* [M] */
    int *row_of;     /* [M K]: the row of choice (m, j), -1 when dropped */
    int *offset;     /* [E + 1]: expert e's rows are [offset[e], offset[e + 1]) */
    int *position;   /* [M K]: the position of row r */
    float *h1, *h3;  /* [M K][F] (one rank) */
    float *y;        /* [M K][C] */
    int *received;   /* [E]: expert parallelism's counts (moe_rows.h) */
};

static struct moe_saved kernel_saved(const struct moe_inst *m, float *saved, long N, const struct dl_moe_attr *a)
{
    long M = N * m->T, R = M * m->K;
    float *p = saved + dl_moe_saved_count(a, N, m->T);
    struct moe_saved s;
    s.lse = p, p += M;
    s.row_of = (int *)(void *)p, p += R;
    s.offset = (int *)(void *)p, p += m->E + 1;
    s.position = (int *)(void *)p, p += R;
    s.h1 = p, p += R * m->F;
    s.h3 = p, p += R * m->F;
    s.y = p, p += R * m->C;
    s.received = (int *)(void *)p;
    return s;
}

static size_t moe_saved_bytes(const void *inst)
{
    const struct moe_inst *m = inst;
    long M = m->mb * m->T, R = M * m->K;
    long op = m->mb * (m->T * (m->E + 2 * m->K) + 1);
    return sizeof(float) * (size_t)(op + M + 2 * R + m->E + 1 + R * (2 * m->F + m->C) + m->E);
}

static int moe_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    const struct dl_moe_attr *a = l->attr;
    struct moe_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    int seq = dl_shape_rank(l->in_shape[0]) == 2;
    m->T = seq ? l->in_shape[0].h : 1;
    m->C = seq ? l->in_shape[0].c : dl_shape_count(l->in_shape[0]);
    m->E = a->experts, m->K = a->top_k, m->F = a->units, m->mb = cfg->mb > 0 ? cfg->mb : 1;
    m->lib = DL_GEMM_DNNL;
    *inst = m;
    return DL_OK;
}

static void moe_destroy(void *inst)
{
    free(inst);
}

/* rows[m][k] = x[(n C + k) T + t] for m = n T + t (back: scatter). */
static void gather(float *rows, const float *x, long N, long C, long T)
{
    dl_seq_rows(rows, (float *)x, N, C, T, T, 1, 0);
}

static void scatter(float *x, const float *rows, long N, long C, long T)
{
    dl_seq_rows((float *)rows, x, N, C, T, T, 1, 1);
}

static float silu(float h)
{
    return h / (1 + expf(-h));
}

/* Rows of the kept choices by expert: row_of, offset, position. */
static void sort_rows(const struct dl_moe_view *v, const struct moe_saved *s)
{
    for (long e = 0; e <= v->E; e++)
        s->offset[e] = 0;
    for (long i = 0; i < v->M * v->K; i++)
        if (v->kept[i])
            s->offset[(long)v->chosen[i] + 1]++;
    for (long e = 0; e < v->E; e++)
        s->offset[e + 1] += s->offset[e];
    int *next = malloc(sizeof *next * (size_t)v->E);
    for (long e = 0; next && e < v->E; e++)
        next[e] = s->offset[e];
    for (long m = 0; next && m < v->M; m++)
        for (long j = 0; j < v->K; j++) {
            long i = m * v->K + j;
            int r = v->kept[i] ? next[(long)v->chosen[i]]++ : -1;
            s->row_of[i] = r;
            if (r >= 0)
                s->position[r] = (int)m;
        }
    free(next);
}

/* Local experts' products on rows X [n][ldx], expert j's at [first[j],
 * first[j + 1]): H1, H3 [n][F], and unless y is NULL hs = silu(H1) H3 and
 * Y [n][C]. */
static void expert_products(const struct moe_inst *mi, const struct dl_moe_view *v, const long *first,
                            const float *x, long ldx, float *h1, float *h3, float *hs, float *y)
{
    long C = v->C, F = v->F;
    #pragma omp parallel for schedule(dynamic, 1)
    for (long j = 0; j < v->EL; j++) { /* an expert a task, its products on its thread */
        long r0 = first[j], n = first[j + 1] - r0;
        if (!n)
            continue;
        dl_sgemm(mi->lib, 0, 1, n, F, C, 1, x + r0 * ldx, ldx, v->w1 + j * F * C, C, 0, h1 + r0 * F, F);
        dl_sgemm(mi->lib, 0, 1, n, F, C, 1, x + r0 * ldx, ldx, v->w3 + j * F * C, C, 0, h3 + r0 * F, F);
        if (!y)
            continue;
        for (long i = r0 * F; i < (r0 + n) * F; i++)
            hs[i] = silu(h1[i]) * h3[i];
        dl_sgemm(mi->lib, 0, 1, n, C, F, 1, hs + r0 * F, F, v->w2 + j * C * F, F, 0, y + r0 * C, C);
    }
}

/* Local experts' gradients from their rows X [n][ldx], the rows' output
 * gradients dY [n][ldy] (gate dy) and H1, H3: dW accumulated, dX [n][C]
 * written; hs, dh1, dh3 [n][F] scratch. */
static void expert_gradients(const struct moe_inst *mi, const struct dl_moe_view *v, const struct dl_op_call *c,
                             const long *first, const float *x, long ldx, const float *dy, long ldy,
                             const float *h1s, const float *h3s, float *hs, float *dh1, float *dh3, float *dx)
{
    long C = v->C, F = v->F;
    float *dw1 = c->dparam[1], *dw3 = c->dparam[2], *dw2 = c->dparam[3];
    #pragma omp parallel for schedule(dynamic, 1)
    for (long j = 0; j < v->EL; j++) { /* an expert a task: its rows and its weights' gradients are its own */
        long r0 = first[j], n = first[j + 1] - r0;
        if (!n)
            continue;
        const float *h1 = h1s + r0 * F, *h3 = h3s + r0 * F, *xj = x + r0 * ldx, *dyj = dy + r0 * ldy;
        for (long i = 0; i < n * F; i++)
            hs[r0 * F + i] = silu(h1[i]) * h3[i];
        if (dw2)
            dl_sgemm(mi->lib, 1, 0, C, F, n, 1, dyj, ldy, hs + r0 * F, F, 1, dw2 + j * C * F, F);
        dl_sgemm(mi->lib, 0, 0, n, F, C, 1, dyj, ldy, v->w2 + j * C * F, F, 0, dh1 + r0 * F, F); /* dH */
        for (long i = 0; i < n * F; i++) {
            float dh = dh1[r0 * F + i], sg = 1 / (1 + expf(-h1[i]));
            dh1[r0 * F + i] = dh * h3[i] * sg * (1 + h1[i] * (1 - sg));
            dh3[r0 * F + i] = dh * h1[i] * sg;
        }
        if (dw1)
            dl_sgemm(mi->lib, 1, 0, F, C, n, 1, dh1 + r0 * F, F, xj, ldx, 1, dw1 + j * F * C, C);
        if (dw3)
            dl_sgemm(mi->lib, 1, 0, F, C, n, 1, dh3 + r0 * F, F, xj, ldx, 1, dw3 + j * F * C, C);
        dl_sgemm(mi->lib, 0, 0, n, C, F, 1, dh1 + r0 * F, F, v->w1 + j * F * C, C, 0, dx + r0 * C, C);
        dl_sgemm(mi->lib, 0, 0, n, C, F, 1, dh3 + r0 * F, F, v->w3 + j * F * C, C, 1, dx + r0 * C, C);
    }
}

/* A failed exchange or allocation: recorded (the run stops), 1. */
static int exchange_failed(const struct dl_kernel_args *args, const struct dl_error *e)
{
    dl_kernel_fail(args, "dnnl-gemm", "alltoallv", e->msg[0] ? e->msg : "out of memory");
    return 1;
}

/* Expert parallelism's forward: this rank's rows xp (sorted) to their
 * experts' ranks, the experts held here on what arrives, Y back into s->y;
 * 0, or 1 after recording the failure. */
static int experts_elsewhere(const struct moe_inst *mi, const struct dl_moe_view *v, const struct moe_saved *s,
                             const float *xp, const struct dl_kernel_args *args)
{
    const struct dl_expert_group *g = args->c.experts;
    struct dl_error e = {0};
    long C = v->C, F = v->F, E = v->E;
    if (dl_moe_rows_count(g, s->offset, E, s->received, &e))
        return exchange_failed(args, &e);
    long n = dl_moe_rows_received(s->received, E), rows = n > 0 ? n : 1;
    long *first = malloc(sizeof *first * (size_t)(v->EL + 1));
    float *xe = malloc(sizeof *xe * (size_t)(rows * (2 * C + 3 * F)));
    int rc = first && xe ? dl_moe_rows_dispatch(g, s->offset, s->received, E, xp, C, xe, &e) : DL_ERR_NOMEM;
    if (!rc) {
        float *ye = xe + rows * C, *h1 = ye + rows * C, *h3 = h1 + rows * F, *hs = h3 + rows * F;
        dl_moe_rows_first(s->received, g->size, v->EL, first);
        expert_products(mi, v, first, xe, C, h1, h3, hs, ye);
        rc = dl_moe_rows_return(g, s->offset, s->received, E, ye, C, s->y, &e);
    }
    free(first), free(xe);
    return rc ? exchange_failed(args, &e) : 0;
}

static void moe_forward(void *inst, const struct dl_kernel_args *args)
{
    const struct moe_inst *mi = inst;
    const struct dl_op_call *c = &args->c;
    struct dl_moe_view v = dl_moe_view(c);
    struct moe_saved s = kernel_saved(mi, c->saved, v.N, v.a);
    long M = v.M, C = v.C, E = v.E, F = v.F, K = v.K;
    float *x = malloc(sizeof *x * (size_t)(M * C)), *logits = malloc(sizeof *logits * (size_t)(M * E));
    float *xp = malloc(sizeof *xp * (size_t)(M * K * C + M * C + M * K * F));
    double *lse = malloc(sizeof *lse * (size_t)M);
    if (!x || !logits || !xp || !lse) {
        free(x), free(logits), free(xp), free(lse);
        dl_kernel_fail(args, "dnnl-gemm", "malloc", "out of memory for the experts' rows");
        return;
    }
    float *out = xp + M * K * C, *hs = out + M * C;
    gather(x, dl_tensor_const_f32(&c->in[0]), v.N, C, v.T);
    dl_sgemm(mi->lib, 0, 1, M, E, C, 1, x, C, v.wg, C, 0, logits, E);
    #pragma omp parallel
    {
        double *row = malloc(sizeof *row * (size_t)E);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) {
            for (long e = 0; e < E; e++)
                row[e] = logits[m * E + e];
            lse[m] = dl_moe_route(&v, m, row);
            s.lse[m] = (float)lse[m];
        }
        free(row);
    }
    dl_moe_capacity(&v);
    dl_moe_sample_losses(&v, lse);
    sort_rows(&v, &s);
    long R = s.offset[E];
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < R; r++)
        memcpy(xp + r * C, x + (long)s.position[r] * C, sizeof *xp * (size_t)C);
    int bad = c->experts ? experts_elsewhere(mi, &v, &s, xp, args) : 0;
    if (!c->experts) {
        long *first = malloc(sizeof *first * (size_t)(E + 1));
        for (long e = 0; first && e <= E; e++)
            first[e] = s.offset[e];
        if (first)
            expert_products(mi, &v, first, xp, C, s.h1, s.h3, hs, s.y);
        else
            bad = 1, dl_kernel_fail(args, "dnnl-gemm", "malloc", "out of memory for the experts' rows");
        free(first);
    }
    if (bad) {
        free(x), free(logits), free(xp), free(lse);
        return;
    }
    #pragma omp parallel
    {
        double *g = malloc(sizeof *g * (size_t)K);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) {
            dl_moe_gates(&v, m, g);
            float *o = out + m * C;
            memset(o, 0, sizeof *o * (size_t)C);
            for (long j = 0; j < K; j++) {
                int r = s.row_of[m * K + j];
                for (long k = 0; r >= 0 && k < C; k++)
                    o[k] += (float)g[j] * s.y[(long)r * C + k];
            }
        }
        free(g);
    }
    scatter(dl_tensor_f32(&c->out), out, v.N, C, v.T);
    free(x), free(logits), free(xp), free(lse);
}

/* Expert parallelism's backward: each row (x, gate dy) to its expert's
 * rank, H1 and H3 recomputed there, dX back into dxp; 0, or 1 after
 * recording the failure. */
static int gradients_elsewhere(const struct moe_inst *mi, const struct dl_moe_view *v, const struct moe_saved *s,
                               const float *xp, const float *dyp, float *dxp, const struct dl_kernel_args *args)
{
    const struct dl_expert_group *g = args->c.experts;
    struct dl_error e = {0};
    long C = v->C, F = v->F, E = v->E, R = s->offset[E];
    long n = dl_moe_rows_received(s->received, E), rows = n > 0 ? n : 1;
    long *first = malloc(sizeof *first * (size_t)(v->EL + 1));
    float *both = malloc(sizeof *both * (size_t)((R > 0 ? R : 1) * 2 * C));
    float *xe = malloc(sizeof *xe * (size_t)(rows * (3 * C + 5 * F)));
    int rc = first && both && xe ? DL_OK : DL_ERR_NOMEM;
    for (long r = 0; !rc && r < R; r++) { /* a row travels as [x, gate dy] */
        memcpy(both + r * 2 * C, xp + r * C, sizeof *both * (size_t)C);
        memcpy(both + r * 2 * C + C, dyp + r * C, sizeof *both * (size_t)C);
    }
    if (!rc)
        rc = dl_moe_rows_dispatch(g, s->offset, s->received, E, both, 2 * C, xe, &e);
    if (!rc) {
        float *dxe = xe + rows * 2 * C, *h1 = dxe + rows * C, *h3 = h1 + rows * F, *hs = h3 + rows * F,
              *dh1 = hs + rows * F, *dh3 = dh1 + rows * F;
        dl_moe_rows_first(s->received, g->size, v->EL, first);
        expert_products(mi, v, first, xe, 2 * C, h1, h3, NULL, NULL);
        expert_gradients(mi, v, &args->c, first, xe, 2 * C, xe + C, 2 * C, h1, h3, hs, dh1, dh3, dxe);
        rc = dl_moe_rows_return(g, s->offset, s->received, E, dxe, C, dxp, &e);
    }
    free(first), free(both), free(xe);
    return rc ? exchange_failed(args, &e) : 0;
}

static void moe_backward(void *inst, const struct dl_kernel_args *args)
{
    const struct moe_inst *mi = inst;
    const struct dl_op_call *c = &args->c;
    struct dl_moe_view v = dl_moe_view(c);
    struct moe_saved s = kernel_saved(mi, c->saved, v.N, v.a);
    long M = v.M, C = v.C, E = v.E, F = v.F, K = v.K, R = s.offset[E];
    double norm = c->loss_norm > 0 ? c->loss_norm : 1.0 / c->batch;
    size_t floats = (size_t)(2 * M * C + M * E + 3 * R * C + 3 * R * F + 1);
    float *x = malloc(sizeof *x * floats);
    double *dg = malloc(sizeof *dg * (size_t)(M * K + v.N * E + E + 1));
    long *first = malloc(sizeof *first * (size_t)(E + 1));
    if (!x || !dg || !first) {
        free(x), free(dg), free(first);
        dl_kernel_fail(args, "dnnl-gemm", "malloc", "out of memory for the experts' gradients");
        return;
    }
    float *dy = x + M * C, *dlogits = dy + M * C, *dyp = dlogits + M * E, *xp = dyp + R * C, *dxp = xp + R * C,
          *hs = dxp + R * C, *dh1 = hs + R * F, *dh3 = dh1 + R * F;
    double *share = dg + M * K;
    gather(x, dl_tensor_const_f32(&c->in[0]), v.N, C, v.T);
    gather(dy, dl_tensor_const_f32(&c->dout), v.N, C, v.T);
    #pragma omp parallel
    {
        double *g = malloc(sizeof *g * (size_t)K);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) {
            dl_moe_gates(&v, m, g);
            for (long j = 0; j < K; j++) {
                int r = s.row_of[m * K + j];
                double d = 0;
                for (long k = 0; r >= 0 && k < C; k++) {
                    d += (double)dy[m * C + k] * s.y[(long)r * C + k];
                    dyp[(long)r * C + k] = (float)g[j] * dy[m * C + k];
                }
                dg[m * K + j] = d;
            }
        }
        free(g);
    }
    for (long n = 0; n < v.N && v.a->aux_loss > 0; n++)
        dl_moe_balance_gradient(&v, n, share + n * E);
    #pragma omp parallel
    {
        double *d = malloc(sizeof *d * (size_t)E);
        #pragma omp for schedule(static)
        for (long m = 0; m < M; m++) {
            dl_moe_router_backward(&v, m, dg + m * K, s.lse[m], v.a->aux_loss > 0 ? share + m / v.T * E : NULL, norm,
                                   d);
            for (long e = 0; e < E; e++)
                dlogits[m * E + e] = (float)d[e];
        }
        free(d);
    }
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < R; r++) /* the rows of X, sorted by expert */
        memcpy(xp + r * C, x + (long)s.position[r] * C, sizeof *xp * (size_t)C);
    int bad = 0;
    if (c->experts) {
        bad = gradients_elsewhere(mi, &v, &s, xp, dyp, dxp, args);
    } else {
        for (long e = 0; e <= E; e++)
            first[e] = s.offset[e];
        expert_gradients(mi, &v, c, first, xp, C, dyp, C, s.h1, s.h3, hs, dh1, dh3, dxp);
    }
    if (!bad && c->dparam[0])
        dl_sgemm(mi->lib, 1, 0, E, C, M, 1, dlogits, E, x, C, 1, c->dparam[0], C);
    if (!bad && c->din[0].data) {
        float *dx = dy; /* dy is read: its rows become dX's */
        dl_sgemm(mi->lib, 0, 0, M, C, E, 1, dlogits, E, v.wg, C, 0, dx, C);
        #pragma omp parallel for schedule(static)
        for (long m = 0; m < M; m++)
            for (long j = 0; j < K; j++) {
                int r = s.row_of[m * K + j];
                for (long k = 0; r >= 0 && k < C; k++)
                    dx[m * C + k] += dxp[(long)r * C + k];
            }
        scatter(dl_tensor_f32(&c->din[0]), dx, v.N, C, v.T);
    }
    free(x), free(dg), free(first);
}

const struct dl_kernel dl_kernel_dnnl_gemm_moe = {
    .name = "dnnl-gemm", .backend = "cpu_blas", .op = &dl_op_moe, .create = moe_create, .destroy = moe_destroy,
    .saved_bytes = moe_saved_bytes, .forward = moe_forward, .backward_data = moe_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, .expert_parallel = 1,
};
