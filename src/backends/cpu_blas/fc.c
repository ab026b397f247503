/* fc.c: fully connected layer as three GEMMs, on OpenBLAS ("openblas") or
 * oneDNN's JIT sgemm ("dnnl-gemm"): y = x W^T + b, dx = dy W, dW += dy^T x
 * (beta = 1 accumulates across micro-batches), db += column sums of dy.
 * x is the NCHW sample flattened (a (C,1,1) vector in nChw16c with C a
 * multiple of 16 is the same memory, so no reorder is needed there).  On a
 * sequence [T, C] (stored [C][T] per sample, core/shape.h) one GEMM per
 * sample: y_n (U x T) = W (U x C) x_n (C x T), dx_n = W^T dy_n,
 * dW += dy_n x_n^T; the samples' GEMMs go one to a thread when there are
 * as many samples as threads, else one after another, each GEMM on every
 * thread (a window of 1 x 1024 ran its products at 260 GFLOP/s on one of
 * 2 threads, against 450 for 4 x 256). */
#include "backends/cpu_blas/blas.h"

#include <stdlib.h>

#include "backends/cpu_blas/gemm.h"
#include "core/threads.h"
#include "ops/kinds.h"

struct fc_inst {
    enum dl_gemm_lib lib;
    long F, U;
    int bias;
    long T; /* positions of a sequence (F its features per position); 1 otherwise */
};

static int fc_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, enum dl_gemm_lib lib,
                     void **inst, struct dl_error *err)
{
    struct fc_inst *f = dl_calloc(1, sizeof *f, err);
    if (!f)
        return DL_ERR_NOMEM;
    int seq = dl_shape_rank(l->in_shape[0]) == 2;
    *f = (struct fc_inst){lib, seq ? l->in_shape[0].c : dl_shape_count(l->in_shape[0]), l->out_shape.c, l->n_params > 1,
                          seq ? l->in_shape[0].h : 1};
    *inst = f;
    return DL_OK;
}

static int fc_create_openblas(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                              struct dl_error *err)
{
    return fc_create(l, cfg, DL_GEMM_OPENBLAS, inst, err);
}

static int fc_create_dnnl(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                          struct dl_error *err)
{
    return fc_create(l, cfg, DL_GEMM_DNNL, inst, err);
}

static void fc_destroy(void *inst)
{
    free(inst);
}

/* 1 when a call's N samples' GEMMs should go one to a thread. */
static int by_sample(long N)
{
    return N >= dl_threads_get();
}

/* Sample n of a sequence: y_n = W x_n + b. */
static void forward_sample(const struct fc_inst *f, const struct dl_op_call *c, long n)
{
    long T = f->T;
    float *y = dl_tensor_f32(&c->out) + n * f->U * T;
    for (long u = 0; f->bias && u < f->U; u++)
        for (long t = 0; t < T; t++)
            y[u * T + t] = c->param[1][u];
    const float *x = dl_tensor_const_f32(&c->in[0]) + n * f->F * T;
    dl_sgemm(f->lib, 0, 0, f->U, T, f->F, 1, c->param[0], f->F, x, T, f->bias ? 1 : 0, y, T);
}

/* Sample n of a sequence: dx_n = W^T dy_n. */
static void backward_data_sample(const struct fc_inst *f, const struct dl_op_call *c, long n)
{
    long T = f->T;
    dl_sgemm(f->lib, 1, 0, f->F, T, f->U, 1, c->param[0], f->F, dl_tensor_const_f32(&c->dout) + n * f->U * T, T, 0,
             dl_tensor_f32(&c->din[0]) + n * f->F * T, T);
}

static void fc_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_inst *f = inst;
    const struct dl_op_call *c = &a->c;
    long N = c->batch;
    if (f->T > 1 && by_sample(N)) {
        #pragma omp parallel for schedule(static)
        for (long n = 0; n < N; n++)
            forward_sample(f, c, n);
        return;
    }
    if (f->T > 1) {
        for (long n = 0; n < N; n++)
            forward_sample(f, c, n);
        return;
    }
    if (f->bias)
        for (long n = 0; n < N; n++)
            for (long u = 0; u < f->U; u++)
                dl_tensor_f32(&c->out)[n * f->U + u] = c->param[1][u];
    dl_sgemm(f->lib, 0, 1, N, f->U, f->F, 1, dl_tensor_const_f32(&c->in[0]), f->F, c->param[0], f->F, f->bias ? 1 : 0,
             dl_tensor_f32(&c->out), f->U);
}

static void fc_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_inst *f = inst;
    const struct dl_op_call *c = &a->c;
    long T = f->T;
    if (c->din[0].data && T > 1 && by_sample(c->batch)) {
        #pragma omp parallel for schedule(static)
        for (long n = 0; n < c->batch; n++)
            backward_data_sample(f, c, n);
    } else if (c->din[0].data && T > 1) {
        for (long n = 0; n < c->batch; n++)
            backward_data_sample(f, c, n);
    } else if (c->din[0].data) {
        dl_sgemm(f->lib, 0, 0, c->batch, f->F, f->U, 1, dl_tensor_const_f32(&c->dout), f->U, c->param[0], f->F, 0,
                 dl_tensor_f32(&c->din[0]), f->F);
    }
}

static void fc_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct fc_inst *f = inst;
    const struct dl_op_call *c = &a->c;
    long T = f->T;
    if (T > 1) { /* samples in order, so the sums are the same on any thread count */
        for (long n = 0; n < c->batch; n++) {
            const float *dy = dl_tensor_const_f32(&c->dout) + n * f->U * T;
            if (c->dparam[0])
                dl_sgemm(f->lib, 0, 1, f->U, f->F, T, 1, dy, T, dl_tensor_const_f32(&c->in[0]) + n * f->F * T, T, 1,
                         c->dparam[0], f->F);
            for (long u = 0; f->bias && c->dparam[1] && u < f->U; u++) {
                double sum = 0;
                for (long t = 0; t < T; t++)
                    sum += dy[u * T + t];
                c->dparam[1][u] += (float)sum;
            }
        }
        return;
    }
    if (c->dparam[0])
        dl_sgemm(f->lib, 1, 0, f->U, f->F, c->batch, 1, dl_tensor_const_f32(&c->dout), f->U,
                 dl_tensor_const_f32(&c->in[0]), f->F, 1, c->dparam[0], f->F);
    if (f->bias && c->dparam[1]) /* row by row: contiguous, so it vectorizes */
        for (long n = 0; n < c->batch; n++) {
            const float *restrict dy = dl_tensor_const_f32(&c->dout) + n * f->U;
            float *restrict db = c->dparam[1];
            for (long u = 0; u < f->U; u++)
                db[u] += dy[u];
        }
}

#define FC_KERNEL(SYM, NAME, LIB)                                                                \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cpu_blas", .op = &dl_op_fc, .create = fc_create_##LIB,         \
        .destroy = fc_destroy, .forward = fc_forward, .backward_data = fc_backward_data,         \
        .backward_weights = fc_backward_weights, .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, \
    };
FC_KERNEL(dl_kernel_openblas_fc, "openblas", openblas)
FC_KERNEL(dl_kernel_dnnl_gemm_fc, "dnnl-gemm", dnnl)
