/* fc_rows.c: the fully connected layer on a sequence [T, C] (stored [C][T]
 * per sample, core/shape.h) with the positions of all the call's samples as
 * one matrix of N*T columns, on oneDNN's JIT sgemm ("dnnl-gemm-rows") or
 * OpenBLAS ("openblas-rows"), where fc.c runs one GEMM per sample.  The
 * input is copied [C][N T] into the workspace, so that
 *   Y (U x NT) = W (U x C) X (C x NT),  dX = W^T dY,  dW += dY X^T
 * are one product each (dW's reduction over all N*T positions at once),
 * and the output rows are copied back per sample with the bias added.  The
 * units are taken in blocks of at most 1 << 22 / (N T) rows (a vocabulary
 * head's 50,257), each block's output or gradient [B][N T] in the
 * workspace: W is read once per call, where the per-sample GEMMs read it
 * once per sample (and write dW once per sample).  The sums are the same
 * terms in another order (dX's over the blocks, dW's over the samples'
 * positions together), so results differ from fc.c's by rounding.  By
 * default dnnl-gemm-rows runs the layers whose weights pass 64 MiB (a
 * vocabulary head), one GEMM per sample the others; the tuner measures
 * both on each layer's shape (bench/README.md has figures per CPU). */
#include "backends/cpu_blas/blas.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu_blas/gemm.h"
#include "ops/kinds.h"

struct fc_rows {
    enum dl_gemm_lib lib;
    long C, U, T, mb, block; /* features, units, positions, samples per call, units per block */
    int bias;
};

static int rows_supports(const struct dl_layer *l)
{
    return dl_shape_rank(l->in_shape[0]) == 2 && l->in_shape[0].h > 1;
}

/* Weights from which one matrix is the default (64 MiB): beyond any last
 * level cache a core of ours shares, so that one GEMM per sample reads W
 * from memory once per sample.  GPT-2's 50,257 x 768 head (154 MB) is
 * past it: forward 1.29x, input gradient 1.18x, weight gradient 1.42x at
 * batch 4 x 64 on an AMD EPYC Zen 5 (bench/README.md); its blocks (2.4-9.4
 * MB of weights) are not, and there neither way wins everywhere. */
#define ROWS_DEFAULT_WEIGHTS (64L << 20)

static int rows_default_for(const struct dl_layer *l)
{
    return rows_supports(l) && (long)sizeof(float) * l->in_shape[0].c * l->out_shape.c >= ROWS_DEFAULT_WEIGHTS;
}

static int rows_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, enum dl_gemm_lib lib,
                       void **inst, struct dl_error *err)
{
    struct fc_rows *f = dl_calloc(1, sizeof *f, err);
    if (!f)
        return DL_ERR_NOMEM;
    long T = l->in_shape[0].h, mb = cfg->mb > 0 ? cfg->mb : 1, U = l->out_shape.c;
    long block = (1L << 22) / (mb * T);
    block = block < 64 ? 64 : block;
    *f = (struct fc_rows){lib, l->in_shape[0].c, U, T, mb, block < U ? block : U, l->n_params > 1};
    *inst = f;
    return DL_OK;
}

static int rows_create_dnnl(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                            struct dl_error *err)
{
    return rows_create(l, cfg, DL_GEMM_DNNL, inst, err);
}

static int rows_create_openblas(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                                struct dl_error *err)
{
    return rows_create(l, cfg, DL_GEMM_OPENBLAS, inst, err);
}

static void rows_destroy(void *inst)
{
    free(inst);
}

/* The workspace: the input or its gradient [C][N T], then a block [B][N T]. */
static size_t rows_workspace(const void *inst, enum dl_dir dir)
{
    (void)dir;
    const struct fc_rows *f = inst;
    return sizeof(float) * (size_t)((f->C + f->block) * f->mb * f->T);
}

/* Rows r0 .. r0+R-1 of each of N samples [R_all][T] into the matrix
 * [R][N T] (gather), or back from it (scatter). */
static void gather(float *rows, const float *samples, long N, long R, long R_all, long r0, long T)
{
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < R; r++)
        for (long n = 0; n < N; n++)
            memcpy(rows + (r * N + n) * T, samples + (n * R_all + r0 + r) * T, sizeof(float) * (size_t)T);
}

static void scatter(float *samples, const float *rows, long N, long R, long R_all, long r0, long T)
{
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < R; r++)
        for (long n = 0; n < N; n++)
            memcpy(samples + (n * R_all + r0 + r) * T, rows + (r * N + n) * T, sizeof(float) * (size_t)T);
}

static void rows_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_rows *f = inst;
    const struct dl_op_call *c = &a->c;
    long N = c->batch, T = f->T, NT = N * T;
    float *x = a->workspace, *y = x + f->C * f->mb * T, *out = dl_tensor_f32(&c->out);
    gather(x, dl_tensor_const_f32(&c->in[0]), N, f->C, f->C, 0, T);
    for (long u0 = 0; u0 < f->U; u0 += f->block) {
        long B = f->U - u0 < f->block ? f->U - u0 : f->block;
        dl_sgemm(f->lib, 0, 0, B, NT, f->C, 1, c->param[0] + u0 * f->C, f->C, x, NT, 0, y, NT);
        if (f->bias) {
            #pragma omp parallel for schedule(static)
            for (long u = 0; u < B; u++)
                for (long j = 0; j < NT; j++)
                    y[u * NT + j] += c->param[1][u0 + u];
        }
        scatter(out, y, N, B, f->U, u0, T);
    }
}

static void rows_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_rows *f = inst;
    const struct dl_op_call *c = &a->c;
    if (!c->din[0].data)
        return;
    long N = c->batch, T = f->T, NT = N * T;
    float *dx = a->workspace, *dy = dx + f->C * f->mb * T;
    for (long u0 = 0; u0 < f->U; u0 += f->block) {
        long B = f->U - u0 < f->block ? f->U - u0 : f->block;
        gather(dy, dl_tensor_const_f32(&c->dout), N, B, f->U, u0, T);
        dl_sgemm(f->lib, 1, 0, f->C, NT, B, 1, c->param[0] + u0 * f->C, f->C, dy, NT, u0 ? 1 : 0, dx, NT);
    }
    scatter(dl_tensor_f32(&c->din[0]), dx, N, f->C, f->C, 0, T);
}

static void rows_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_rows *f = inst;
    const struct dl_op_call *c = &a->c;
    long N = c->batch, T = f->T, NT = N * T;
    float *x = a->workspace, *dy = x + f->C * f->mb * T;
    if (c->dparam[0])
        gather(x, dl_tensor_const_f32(&c->in[0]), N, f->C, f->C, 0, T);
    for (long u0 = 0; u0 < f->U; u0 += f->block) {
        long B = f->U - u0 < f->block ? f->U - u0 : f->block;
        gather(dy, dl_tensor_const_f32(&c->dout), N, B, f->U, u0, T);
        if (c->dparam[0])
            dl_sgemm(f->lib, 0, 1, B, f->C, NT, 1, dy, NT, x, NT, 1, c->dparam[0] + u0 * f->C, f->C);
        if (f->bias && c->dparam[1]) {
            #pragma omp parallel for schedule(static)
            for (long u = 0; u < B; u++) {
                double sum = 0;
                for (long j = 0; j < NT; j++)
                    sum += dy[u * NT + j];
                c->dparam[1][u0 + u] += (float)sum;
            }
        }
    }
}

#define FC_ROWS_KERNEL(SYM, NAME, LIB)                                                                  \
    const struct dl_kernel SYM = {                                                                      \
        .name = NAME, .backend = "cpu_blas", .op = &dl_op_fc, .create = rows_create_##LIB,              \
        .destroy = rows_destroy, .supports = rows_supports, .default_for = rows_default_for,            \
        .forward = rows_forward,                                                                        \
        .backward_data = rows_backward_data, .backward_weights = rows_backward_weights,                 \
        .workspace_bytes = rows_workspace, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,        \
    };
FC_ROWS_KERNEL(dl_kernel_dnnl_gemm_fc_rows, "dnnl-gemm-rows", dnnl)
FC_ROWS_KERNEL(dl_kernel_openblas_fc_rows, "openblas-rows", openblas)
