/* attention.c: multi-head attention (ops/attention.c) as GEMMs on oneDNN's
 * JIT sgemm ("dnnl-gemm"), one (sample, head) task per thread at a time
 * (backward: one (sample, kv head) task, its group of query heads in turn
 * adding into the kv head's gradients), query rows in blocks of 128 that
 * under the causal mask compute only the keys up to their last row (about
 * half the products of a long window), and under the document mask only
 * the keys of the block's documents (doc/executor.md).
 * q, k, v and the output of a head are [d][T] blocks of the [C][T]
 * storage (core/shape.h), which the GEMMs read in place (leading dim T):
 *   S = scale q^T k      (T x T; the causal part is masked afterwards),
 *   P = softmax(S) row by row in float, P' = P * dropout factors,
 *   y = v P'^T           (d x T, written into the output's block).
 * Backward recomputes S and P (nothing T x T outlives a call: the three
 * T x T matrices of a task live in its thread's workspace):
 *   dv = dy P',  dP' = dy^T v,  dP = dP' * factors,
 *   dS = scale P (dP - rowsum(P dP)),  dq = k dS^T,  dk = q dS.
 * Each task's GEMMs run on one thread, so results do not depend on the
 * thread count. */
#include "backends/cpu_blas/blas.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attention_rows.h"
#include "backends/cpu_blas/gemm.h"
#include "core/threads.h"
#include "ops/attention.h"
#include "ops/kinds.h"

struct attn_inst {
    struct dl_attention_dims a;
    int threads;
};

static int attn_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                       struct dl_error *err)
{
    struct attn_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->a = dl_attention_dims(l);
    m->threads = dl_threads_get();
    *inst = m;
    return DL_OK;
}

static void attn_destroy(void *inst)
{
    free(inst);
}

/* Per thread: P, P' (with dropout) and dP, T x T each. */
static size_t attn_ws(const void *inst, enum dl_dir dir)
{
    const struct attn_inst *m = inst;
    return dl_dtype_size(DL_F32) * 3 * (size_t)(m->a.T * m->a.T) * (size_t)m->threads;
}

struct head {
    const float *q, *k, *v;
    float *dq, *dk, *dv;
};

/* Head h of sample n: its q block, its kv head's k and v blocks, and their
 * gradients' (NULL: not wanted). */
static struct head head_of(const struct attn_inst *m, const struct dl_op_call *c, long n, long h)
{
    long T = m->a.T, C = m->a.C, Ckv = m->a.Ckv, off = h * m->a.d * T, kv_off = h / (m->a.H / m->a.KV) * m->a.d * T;
    struct head x = {0};
    if (m->a.packed) {
        long base = n * (C + 2 * Ckv) * T;
        x.q = dl_tensor_const_f32(&c->in[0]) + base + off;
        x.k = dl_tensor_const_f32(&c->in[0]) + base + C * T + kv_off, x.v = x.k + Ckv * T;
        if (c->din[0].data) {
            x.dq = dl_tensor_f32(&c->din[0]) + base + off;
            x.dk = dl_tensor_f32(&c->din[0]) + base + C * T + kv_off, x.dv = x.dk + Ckv * T;
        }
        return x;
    }
    x.q = dl_tensor_const_f32(&c->in[0]) + n * C * T + off;
    x.k = dl_tensor_const_f32(&c->in[1]) + n * Ckv * T + kv_off;
    x.v = dl_tensor_const_f32(&c->in[2]) + n * Ckv * T + kv_off;
    x.dq = c->din[0].data ? dl_tensor_f32(&c->din[0]) + n * C * T + off : NULL;
    x.dk = c->din[1].data ? dl_tensor_f32(&c->din[1]) + n * Ckv * T + kv_off : NULL;
    x.dv = c->din[2].data ? dl_tensor_f32(&c->din[2]) + n * Ckv * T + kv_off : NULL;
    return x;
}

/* Query rows go in blocks of ROWS; a block's rows [r0, r1) see keys
 * [c0, c1): all T, or under the causal mask only up to r1 (the keys after
 * the block's last row are masked for every row of it: never computed),
 * and under the document mask only from the first row's document start
 * on (and, not causal, to the last row's document end): the key tiles
 * wholly masked for the block are skipped, so short documents cost about
 * ROWS keys a row. */
enum { ROWS = 128 };

static struct dl_attention_cols key_cols(const struct attn_inst *m, const struct dl_op_call *c, long n, long r0,
                                         long r1)
{
    struct dl_attention_cols k = {0, m->a.T, c->doc_start ? c->doc_start + n * m->a.T : NULL};
    long lo;
    if (k.doc)
        k.c0 = k.doc[r0];
    k.c1 = m->a.causal ? r1 : dl_attention_keys(k.doc, m->a.T, r1 - 1, 0, &lo);
    return k;
}

/* Rows [r0, r1) of P = softmax(scale q^T k) with the causal and document
 * masks, and of P' = P with sample n's dropout factors for head h (pd == p
 * when none apply), over the block's columns kc. */
static void weights(const struct attn_inst *m, const struct dl_op_call *c, const struct head *x, long n, long h,
                    long r0, long r1, float *p, float *pd)
{
    long T = m->a.T;
    struct dl_attention_cols kc = key_cols(m, c, n, r0, r1);
    dl_sgemm(DL_GEMM_DNNL, 1, 0, r1 - r0, kc.c1 - kc.c0, m->a.d, (float)(1 / sqrt((double)m->a.d)), x->q + r0, T,
             x->k + kc.c0, T, 0, p + r0 * T + kc.c0, T);
    dl_attention_softmax(p, T, r0, r1, kc, m->a.causal, 1);
    if (pd == p)
        return;
    for (long t = r0; t < r1; t++)
        for (long s = kc.c0; s < kc.c1; s++)
            pd[t * T + s] = p[t * T + s] *
                            (float)dl_attention_kept(c->key, c->sample0 + n, m->a.head0 + h, t, s, T, m->a.dropout);
}

static int drops(const struct attn_inst *m, const struct dl_op_call *c)
{
    return c->training && m->a.dropout > 0;
}

static void attn_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct attn_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    long T = m->a.T, tasks = (long)c->batch * m->a.H;
    if (c->cache && (c->position0 > 0 || T == 1)) { /* incremental decoding: the reference's cached pass */
        dl_op_attention.forward(c);
        return;
    }
    if (c->cache) /* a prompt's window from position 0: its keys and values start the cache */
        for (long n = 0; n < c->batch; n++) {
            struct head x = head_of(m, c, n, 0);
            const float *k = x.k, *v = x.v;
            float *K = c->cache + n * 2 * m->a.C * c->cache_len, *V = K + m->a.C * c->cache_len;
            for (long j = 0; j < m->a.Ckv; j++) {
                memcpy(K + j * c->cache_len, k + j * T, sizeof *K * (size_t)T);
                memcpy(V + j * c->cache_len, v + j * T, sizeof *V * (size_t)T);
            }
        }
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (long task = 0; task < tasks; task++) {
        long n = task / m->a.H, h = task % m->a.H;
        float *p = (float *)a->workspace + 3 * (size_t)(T * T) * (size_t)omp_get_thread_num(), *pd = p + T * T;
        struct head x = head_of(m, c, n, h);
        if (!drops(m, c))
            pd = p;
        float *y = dl_tensor_f32(&c->out) + n * m->a.C * T + h * m->a.d * T;
        for (long r0 = 0; r0 < T; r0 += ROWS) { /* y[:, rows] = v[:, c0:c1] P'[rows, c0:c1]^T */
            long r1 = r0 + ROWS < T ? r0 + ROWS : T;
            struct dl_attention_cols kc = key_cols(m, c, n, r0, r1);
            weights(m, c, &x, n, h, r0, r1, p, pd);
            dl_sgemm(DL_GEMM_DNNL, 0, 1, m->a.d, r1 - r0, kc.c1 - kc.c0, 1, x.v + kc.c0, T, pd + r0 * T + kc.c0, T, 0,
                     y + r0, T);
        }
    }
}

/* Backward of head h of sample n, block by block of query rows: dq of its
 * rows, dk and dv (zeroed by the caller) added to over the keys it sees. */
static void head_backward(const struct attn_inst *m, const struct dl_op_call *c, long n, long h, float *p, float *pd,
                          float *dp)
{
    long T = m->a.T, d = m->a.d;
    float scale = (float)(1 / sqrt((double)d));
    struct head x = head_of(m, c, n, h);
    int dropout = drops(m, c);
    const float *dy = dl_tensor_const_f32(&c->dout) + n * m->a.C * T + h * d * T;
    if (!dropout)
        pd = p;
    for (long r0 = 0; r0 < T; r0 += ROWS) {
        long r1 = r0 + ROWS < T ? r0 + ROWS : T, rows = r1 - r0;
        struct dl_attention_cols kc = key_cols(m, c, n, r0, r1);
        long c0 = kc.c0, cols = kc.c1 - kc.c0; /* the block's keys [c0, c0 + cols) */
        weights(m, c, &x, n, h, r0, r1, p, pd);
        if (x.dv) /* dv[:, c0:c1] += dy[:, rows] P' */
            dl_sgemm(DL_GEMM_DNNL, 0, 0, d, cols, rows, 1, dy + r0, T, pd + r0 * T + c0, T, 1, x.dv + c0, T);
        dl_sgemm(DL_GEMM_DNNL, 1, 0, rows, cols, d, 1, dy + r0, T, x.v + c0, T, 0, dp + r0 * T + c0, T);
        struct dl_attention_drop drop = {c->key, c->sample0 + n, m->a.head0 + h, dropout ? m->a.dropout : 0};
        dl_attention_score_grad(dp, p, T, r0, r1, kc, m->a.causal, scale, &drop);
        if (x.dq) /* dq[:, rows] = k[:, c0:c1] dS^T */
            dl_sgemm(DL_GEMM_DNNL, 0, 1, d, rows, cols, 1, x.k + c0, T, dp + r0 * T + c0, T, 0, x.dq + r0, T);
        if (x.dk) /* dk[:, c0:c1] += q[:, rows] dS */
            dl_sgemm(DL_GEMM_DNNL, 0, 0, d, cols, rows, 1, x.q + r0, T, dp + r0 * T + c0, T, 1, x.dk + c0, T);
    }
}

static void attn_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct attn_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    int any = 0;
    for (int i = 0; i < c->n_in; i++)
        any |= c->din[i].data != NULL;
    if (!any)
        return;
    long T = m->a.T, G = m->a.H / m->a.KV, tasks = (long)c->batch * m->a.KV;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (long task = 0; task < tasks; task++) {
        long n = task / m->a.KV, g = task % m->a.KV;
        float *p = (float *)a->workspace + 3 * (size_t)(T * T) * (size_t)omp_get_thread_num(), *pd = p + T * T,
              *dp = pd + T * T;
        struct head x = head_of(m, c, n, g * G); /* the kv head's gradients: d rows of T, contiguous */
        if (x.dk)
            memset(x.dk, 0, sizeof *x.dk * (size_t)(m->a.d * T));
        if (x.dv)
            memset(x.dv, 0, sizeof *x.dv * (size_t)(m->a.d * T));
        for (long h = g * G; h < (g + 1) * G; h++) /* the group's heads add into dk and dv in order */
            head_backward(m, c, n, h, p, pd, dp);
    }
}

const struct dl_kernel dl_kernel_dnnl_gemm_attention = {
    .name = "dnnl-gemm", .backend = "cpu_blas", .op = &dl_op_attention, .create = attn_create,
    .destroy = attn_destroy, .workspace_bytes = attn_ws, .forward = attn_forward, .backward_data = attn_backward,
    .doc_mask = 1,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, /* q, k, v: the weights recomputed */
};
