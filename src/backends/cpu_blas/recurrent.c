/* recurrent.c: the recurrent layers (lstm, gru, rnn; ops/recurrent.h) on
 * oneDNN's JIT sgemm ("dnnl-gemm"): per layer and direction, the input's
 * products with W_ih for all T steps of all N samples as one GEMM, then the
 * recurrence, one [N, H] x [H, G H] GEMM a step, with the kind's own cell
 * (the reference's, ops/lstm.c, gru.c, rnn.c) on each sample's gates.
 * Backward: each step's cell and one GEMM for h_{t-1}'s gradient through
 * W_hh, going back; then the weight gradients and the input's as one GEMM
 * each over all steps: dW_ih += dA_x^T X, dW_hh += dA_h^T H_prev, dX = dA_x
 * W_ih.  Activations are time-major here, [T][N][features] (rows (t, n)),
 * gathered from and scattered to the tensors' [N][C][T]; each layer's
 * output and each step's cell values are saved for backward:
 *   saved = Y [L][T][N][D H], then ext [L][D][T][N][extra H], then with
 *   dropout, the layers' inputs above the first [L - 1][T][N][D H].
 * The sums are the reference's terms in another order (the GEMMs'), in
 * float where the reference sums in double. */
#include "backends/cpu_blas/blas.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu_blas/gemm.h"
#include "backends/cpu_blas/seq_rows.h"
#include "ops/kinds.h"
#include "ops/recurrent.h"

struct rnn_k {
    const struct dl_rnn_cell *cell;
    struct dl_rnn_attr a;
    long T, C, H, D, G, L, E, mb, in_max;
    int per; /* parameters a layer and direction */
};

static const struct dl_rnn_cell *cell_of(const struct dl_op_kind *k)
{
    return k == &dl_op_lstm ? &dl_rnn_cell_lstm : k == &dl_op_gru ? &dl_rnn_cell_gru : &dl_rnn_cell_rnn;
}

static int rnn_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    struct rnn_k *k = dl_calloc(1, sizeof *k, err);
    if (!k)
        return DL_ERR_NOMEM;
    const struct dl_rnn_attr *a = l->attr;
    k->cell = cell_of(l->kind);
    k->a = *a;
    k->T = l->in_shape[0].h, k->C = l->in_shape[0].c, k->H = a->hidden, k->D = a->bidirectional ? 2 : 1;
    k->G = k->cell->gates, k->L = a->layers, k->E = k->cell->extra, k->mb = cfg->mb > 0 ? cfg->mb : 1;
    k->in_max = k->C > k->D * k->H ? k->C : k->D * k->H;
    k->per = a->bias ? 4 : 2;
    *inst = k;
    return DL_OK;
}

static void rnn_destroy(void *inst)
{
    free(inst);
}

static size_t rnn_saved(const void *inst)
{
    const struct rnn_k *k = inst;
    long drops = k->a.dropout > 0 ? k->L - 1 : 0;
    return sizeof(float) * (size_t)((k->L * (1 + k->E) + drops) * k->T * k->mb * k->D * k->H);
}

/* The workspace for mb samples, doubles first (aligned): forward, ax, ah
 * [N G H], h [N H]; then floats X [T N I], A_x [T N G H], A_h [N G H],
 * zeros [H].
 * Backward: dh, carry, dhp [N H], dax, dah [N G H]; then floats, zeros
 * [H], next [N H], dA_x and dA_h [T N G H], X [T N C], dY and dX [T N I]. */
static size_t rnn_workspace(const void *inst, enum dl_dir dir)
{
    const struct rnn_k *k = inst;
    long TN = k->T * k->mb, GH = k->G * k->H;
    if (dir == DL_DIR_FORWARD)
        return sizeof(double) * (size_t)(k->mb * (2 * GH + k->H)) +
               sizeof(float) * (size_t)(TN * k->in_max + TN * GH + k->mb * GH + k->H);
    if (dir == DL_DIR_BACKWARD_DATA)
        return sizeof(double) * (size_t)(k->mb * (3 * k->H + 2 * GH)) +
               sizeof(float) * (size_t)(k->H + k->mb * k->H + 2 * TN * GH + TN * k->C + 2 * TN * k->in_max);
    return 0;
}

/* [N][R][T] (a tensor's samples) to [T][N][R] (rows (t, n)), and back. */
static void to_rows(float *rows, const float *x, long N, long R, long T)
{
    dl_seq_rows(rows, (float *)x, N, R, T, 1, N, 0);
}

static void from_rows(float *x, const float *rows, long N, long R, long T)
{
    dl_seq_rows((float *)rows, x, N, R, T, 1, N, 1);
}

/* Layer l's output, [T][N][D H], in saved (for mb samples: the layout does
 * not depend on the call's batch N <= mb). */
static float *y_of(const struct rnn_k *k, float *saved, long l, long N)
{
    return saved + l * k->T * N * k->D * k->H;
}

static float *ext_of(const struct rnn_k *k, float *saved, long N, long l, long d, long t, long n)
{
    float *base = saved + k->L * k->T * N * k->D * k->H;
    return base + ((((l * k->D + d) * k->T + t) * N + n) * k->E) * k->H;
}

/* A step's cells run on the threads from this many gates of the call on
 * (fewer: a few microseconds of work, less than a parallel region's cost
 * on a busy machine). */
#define CELLS_PARALLEL (1L << 16)

/* Layer l > 0's input in training with dropout, [T][N][D H], after ext. */
static float *dropped_of(const struct rnn_k *k, float *saved, long N, long l)
{
    return saved + (k->L * (1 + k->E) + l - 1) * k->T * N * k->D * k->H;
}

/* x[(t N + n) D H + i] times layer l's dropout factor of sample n's element
 * (i, t) (ops/recurrent.h), into y (which may be x). */
static void drop_rows(const struct rnn_k *k, const struct dl_op_call *c, long l, float *y, const float *x)
{
    long N = c->batch, DH = k->D * k->H;
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < N; n++)
        for (long t = 0; t < k->T; t++)
            for (long i = 0; i < DH; i++)
                y[(t * N + n) * DH + i] =
                    (float)((double)x[(t * N + n) * DH + i] * dl_rnn_dropout_factor(c, (int)l, n, i * k->T + t));
}

/* Layer l's input rows: the call's (X), the layer below's output, or that
 * with dropout applied. */
static const float *input_of(const struct rnn_k *k, const struct dl_op_call *c, float *saved, long l, const float *X)
{
    return !l ? X : dl_rnn_dropping(c) ? dropped_of(k, saved, c->batch, l) : y_of(k, saved, l - 1, c->batch);
}

static long step_t(const struct rnn_k *k, long d, long s)
{
    return d ? k->T - 1 - s : s;
}

static long layer_in(const struct rnn_k *k, long l)
{
    return l ? k->D * k->H : k->C;
}

static void rnn_forward(void *inst, const struct dl_kernel_args *args)
{
    const struct rnn_k *k = inst;
    const struct dl_op_call *c = &args->c;
    long N = c->batch, T = k->T, H = k->H, DH = k->D * H, GH = k->G * H, TN = T * N;
    double *ax = args->workspace, *ah = ax + N * GH, *h = ah + N * GH;
    float *X = (float *)(h + N * H), *AX = X + TN * k->in_max, *AH = AX + TN * GH, *zero_h = AH + N * GH;
    memset(zero_h, 0, sizeof *zero_h * (size_t)H); /* h_{t-1} at the first step */
    float *saved = (float *)c->saved;
    to_rows(X, dl_tensor_const_f32(&c->in[0]), N, k->C, T);
    for (long l = 0; l < k->L; l++) {
        long I = layer_in(k, l);
        if (l && dl_rnn_dropping(c))
            drop_rows(k, c, l, dropped_of(k, saved, N, l), y_of(k, saved, l - 1, N));
        const float *Xl = input_of(k, c, saved, l, X);
        float *Y = y_of(k, saved, l, N);
        for (long d = 0; d < k->D; d++) {
            float *const *p = c->param + (l * k->D + d) * k->per;
            dl_sgemm(DL_GEMM_DNNL, 0, 1, TN, GH, I, 1, Xl, I, p[0], I, 0, AX, GH);
            for (long s = 0; s < T; s++) {
                long t = step_t(k, d, s), tp = d ? t + 1 : t - 1;
                if (s)
                    dl_sgemm(DL_GEMM_DNNL, 0, 1, N, GH, H, 1, Y + tp * N * DH + d * H, DH, p[1], H, 0, AH, GH);
                #pragma omp parallel for schedule(static) if (N * GH >= CELLS_PARALLEL)
                for (long n = 0; n < N; n++) {
                    double *axn = ax + n * GH, *ahn = ah + n * GH, *hn = h + n * H;
                    const float *ar = AX + (t * N + n) * GH;
                    for (long g = 0; g < GH; g++) {
                        axn[g] = (double)ar[g] + (k->a.bias ? (double)p[2][g] : 0);
                        ahn[g] = (s ? (double)AH[n * GH + g] : 0) + (k->a.bias ? (double)p[3][g] : 0);
                    }
                    float *yn = Y + (t * N + n) * DH + d * H;
                    k->cell->forward(&k->a, (int)H, axn, ahn, s ? Y + (tp * N + n) * DH + d * H : zero_h,
                                     s ? ext_of(k, saved, N, l, d, tp, n) : NULL, ext_of(k, saved, N, l, d, t, n), hn);
                    for (long j = 0; j < H; j++)
                        yn[j] = (float)hn[j];
                }
            }
        }
    }
    from_rows(dl_tensor_f32(&c->out), y_of(k, saved, k->L - 1, N), N, DH, T);
}

/* sum over rows of A [R][n] added into b[n] (in double, each column's rows
 * in order): blocks of columns, the rows read along them. */
static void column_sums(float *b, const float *A, long R, long n)
{
    enum { BLOCK = 64 };
    #pragma omp parallel for schedule(static)
    for (long g0 = 0; g0 < n; g0 += BLOCK) {
        long w = n - g0 < BLOCK ? n - g0 : BLOCK;
        double s[BLOCK] = {0};
        for (long r = 0; r < R; r++)
            for (long g = 0; g < w; g++)
                s[g] += A[r * n + g0 + g];
        for (long g = 0; g < w; g++)
            b[g0 + g] += (float)s[g];
    }
}

/* Direction d of layer l: the weights' gradients added, the input's
 * gradient added into dX [T][N][I] (rows), from dY [T][N][D H]. */
static void backward_direction(const struct rnn_k *k, const struct dl_op_call *c, void *ws, long l, long d,
                               const float *Xl, const float *dY, float *dX)
{
    long N = c->batch, T = k->T, H = k->H, DH = k->D * H, GH = k->G * H, TN = T * N, I = layer_in(k, l);
    float *saved = (float *)c->saved, *Y = y_of(k, saved, l, N);
    double *dh = ws, *carry = dh + N * H, *dhp = carry + N * H, *dax = dhp + N * H, *dah = dax + N * GH;
    float *zero_h = (float *)(dah + N * GH), *next = zero_h + H, *dAX = next + N * H, *dAH = dAX + TN * GH;
    float *const *p = c->param + (l * k->D + d) * k->per, *const *dp = c->dparam + (l * k->D + d) * k->per;
    memset(zero_h, 0, sizeof *zero_h * (size_t)H); /* h_{t-1} at the first step */
    memset(next, 0, sizeof *next * (size_t)(N * H));
    memset(carry, 0, sizeof *carry * (size_t)(N * H));
    for (long s = T - 1; s >= 0; s--) {
        long t = step_t(k, d, s), tp = d ? t + 1 : t - 1;
        #pragma omp parallel for schedule(static) if (N * GH >= CELLS_PARALLEL)
        for (long n = 0; n < N; n++) {
            double *dhn = dh + n * H, *daxn = dax + n * GH, *dahn = dah + n * GH, *dhpn = dhp + n * H;
            const float *dyn = dY + (t * N + n) * DH + d * H, *hp = s ? Y + (tp * N + n) * DH + d * H : NULL;
            for (long j = 0; j < H; j++)
                dhn[j] = (double)dyn[j] + (double)next[n * H + j];
            k->cell->backward(&k->a, (int)H, dhn, carry + n * H, hp ? hp : zero_h, Y + (t * N + n) * DH + d * H,
                              s ? ext_of(k, saved, N, l, d, tp, n) : NULL, ext_of(k, saved, N, l, d, t, n), daxn,
                              dahn, dhpn);
            for (long g = 0; g < GH; g++) {
                dAX[(t * N + n) * GH + g] = (float)daxn[g];
                dAH[(t * N + n) * GH + g] = (float)dahn[g];
            }
            for (long j = 0; j < H; j++)
                next[n * H + j] = (float)dhpn[j];
        }
        if (s)
            dl_sgemm(DL_GEMM_DNNL, 0, 0, N, H, GH, 1, dAH + t * N * GH, GH, p[1], H, 1, next, H);
    }
    if (dp[0])
        dl_sgemm(DL_GEMM_DNNL, 1, 0, GH, I, TN, 1, dAX, GH, Xl, I, 1, dp[0], I);
    if (dp[1] && T > 1) { /* step t's dA_h with h_{t-1}: rows of steps 1.. against rows of steps ..T-2 */
        const float *A = d ? dAH : dAH + N * GH, *B = d ? Y + N * DH + d * H : Y + d * H;
        dl_sgemm(DL_GEMM_DNNL, 1, 0, GH, H, (T - 1) * N, 1, A, GH, B, DH, 1, dp[1], H);
    }
    if (k->a.bias && dp[2])
        column_sums(dp[2], dAX, TN, GH);
    if (k->a.bias && dp[3]) /* every step's, the first's (h_{t-1} = 0) too */
        column_sums(dp[3], dAH, TN, GH);
    if (dX)
        dl_sgemm(DL_GEMM_DNNL, 0, 0, TN, I, GH, 1, dAX, GH, p[0], I, d ? 1 : 0, dX, I);
}

static void rnn_backward(void *inst, const struct dl_kernel_args *args)
{
    const struct rnn_k *k = inst;
    const struct dl_op_call *c = &args->c;
    long N = c->batch, T = k->T, H = k->H, DH = k->D * H, GH = k->G * H, TN = T * N;
    /* past the directions' part of the workspace (for mb samples) */
    float *X = (float *)((double *)args->workspace + k->mb * (3 * H + 2 * GH)) + H + k->mb * H + 2 * k->T * k->mb * GH;
    float *bufs[2] = {X + TN * k->C, X + TN * k->C + TN * k->in_max}, *saved = (float *)c->saved;
    to_rows(X, dl_tensor_const_f32(&c->in[0]), N, k->C, T);
    /* layer l's output gradient in bufs[(l + 1) % 2], its input's in bufs[l % 2] */
    to_rows(bufs[k->L % 2], dl_tensor_const_f32(&c->dout), N, DH, T);
    for (long l = k->L - 1; l >= 0; l--) {
        const float *dY = bufs[(l + 1) % 2];
        float *dX = l || c->din[0].data ? bufs[l % 2] : NULL;
        const float *Xl = input_of(k, c, saved, l, X);
        for (long d = 0; d < k->D; d++)
            backward_direction(k, c, args->workspace, l, d, Xl, dY, dX);
        if (l && dl_rnn_dropping(c))
            drop_rows(k, c, l, dX, dX);
        if (!l && dX)
            from_rows(dl_tensor_f32(&c->din[0]), dX, N, k->C, T);
    }
}

static int rnn_supports(const struct dl_layer *l)
{
    return 1;
}

#define RNN_KERNEL(SYM, OP)                                                                                \
    const struct dl_kernel SYM = {                                                                         \
        .name = "dnnl-gemm", .backend = "cpu_blas", .op = &OP, .create = rnn_create, .destroy = rnn_destroy, \
        .supports = rnn_supports, .forward = rnn_forward, .backward_data = rnn_backward,                  \
        .workspace_bytes = rnn_workspace, .saved_bytes = rnn_saved,                                        \
        .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,                                             \
    };
RNN_KERNEL(dl_kernel_dnnl_gemm_lstm, dl_op_lstm)
RNN_KERNEL(dl_kernel_dnnl_gemm_gru, dl_op_gru)
RNN_KERNEL(dl_kernel_dnnl_gemm_rnn, dl_op_rnn)
