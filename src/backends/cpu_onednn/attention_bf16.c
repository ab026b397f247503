/* attention_bf16.c: multi-head attention in bf16 ("onednn-bf16") on
 * oneDNN's matmul, as PyTorch's autocast runs attention's products: q, k,
 * v, the output and their gradients bf16; each product's sums f32; the
 * softmax and its gradient f32 (oneDNN's, vectorized).  Per (sample, head)
 * task, on the [d][T] blocks of the [C][T] storage (core/shape.h):
 *   S = q^T k (f32),  P = softmax(scale S) (f32),  P' = bf16(P * dropout),
 *   y = v P'^T (bf16 out);
 * backward recomputes S, P and P', then
 *   dv = dy P',  dP' = dy^T v (f32),  dS = bf16(scale P (dP - rowsum)),
 *   dq = k dS^T,  dk = q dS  (bf16 out).
 * So the weights and their gradient are rounded to bf16 before the second
 * products, as autocast's bmm rounds them.  Each task runs on one thread
 * (results do not depend on the thread count): every thread has its own
 * primitives' memory objects, stream and scratchpad (primitives are
 * stateless; oneDNN runs one single-threaded inside our parallel region).
 * Incremental decoding (a key/value cache) is the f32 kernels' (the
 * executor decodes in f32): a cached call records a fault. */
#include "backends/cpu_onednn/onednn.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attention_rows.h"
#include "backends/cpu_onednn/common.h"
#include "core/bf16.h"
#include "core/dtype.h"
#include "core/threads.h"
#include "ops/attention.h"

/* The three products, each a [rows x K] by [K x cols] matmul on blocks with
 * leading dimension T, and oneDNN's softmax over the rows of T x T f32
 * (in place; its backward dS = P (dP - rowsum(P dP)) in place of dP): */
enum {
    SCORES,  /* a^T b -> f32 T x T: S = q^T k, dP' = dy^T v */
    BY_T,    /* a b^T -> bf16 d x T: y = v P'^T, dq = k dS^T */
    PLAIN,   /* a b -> bf16 d x T: dv = dy P', dk = q dS */
    SOFTMAX, /* src = dst */
    SOFTMAX_BACK, /* dst, diff dst = diff src */
    N_PRODS
};

struct per_thread {
    struct dl_dnnl_prim prod[N_PRODS];
    dnnl_stream_t stream;
};

struct attnb_inst {
    struct dl_attention_dims a;
    int threads;
    size_t scratch; /* the largest scratchpad of the primitives */
    struct per_thread *th;
};

static void attnb_destroy(void *inst)
{
    struct attnb_inst *m = inst;
    if (!m)
        return;
    for (int t = 0; m->th && t < m->threads; t++) {
        for (int p = 0; p < N_PRODS; p++)
            dl_dnnl_prim_free(&m->th[t].prod[p]);
        if (m->th[t].stream)
            dnnl_stream_destroy(m->th[t].stream);
    }
    free(m->th);
    free(m);
}

/* A 2-D descriptor rows x cols with strides (sr, sc). */
static void block(dnnl_memory_desc_t *md, long rows, long cols, long sr, long sc, dnnl_data_type_t t)
{
    dnnl_memory_desc_init_by_strides(md, 2, (dnnl_dims_t){rows, cols}, t, (dnnl_dims_t){sr, sc});
}

static int product(struct dl_dnnl_prim *p, int which, long T, long d, const struct dl_dnnl_prim *softmax,
                   struct dl_error *err)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_data_type_t bf = dnnl_bf16;
    if (which >= SOFTMAX) {
        dnnl_softmax_desc_t sd;
        block(&a, T, T, T, 1, dnnl_f32);
        int rc = which == SOFTMAX ? dnnl_softmax_forward_desc_init(&sd, dnnl_forward_training, &a, 1)
                                  : dnnl_softmax_backward_desc_init(&sd, &a, &a, 1);
        static const int fwd[] = {DNNL_ARG_SRC, DNNL_ARG_DST, 0},
                         bwd[] = {DNNL_ARG_DST, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, 0};
        rc = dl_dnnl_check(rc, "softmax descriptor", err);
        return rc ? rc : dl_dnnl_prim_init(p, &sd, softmax ? softmax->pd : NULL, which == SOFTMAX ? fwd : bwd, err);
    }
    if (which == SCORES)
        block(&a, T, d, 1, T, bf), block(&b, d, T, T, 1, bf), block(&c, T, T, T, 1, dnnl_f32);
    else if (which == BY_T)
        block(&a, d, T, T, 1, bf), block(&b, T, T, 1, T, bf), block(&c, d, T, T, 1, bf);
    else
        block(&a, d, T, T, 1, bf), block(&b, T, T, T, 1, bf), block(&c, d, T, T, 1, bf);
    dnnl_matmul_desc_t desc;
    int rc = dl_dnnl_check(dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c), "matmul descriptor", err);
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, 0};
    return rc ? rc : dl_dnnl_prim_init(p, &desc, NULL, args, err);
}

static int attnb_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                        struct dl_error *err)
{
    (void)cfg;
    struct attnb_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->a = dl_attention_dims(l);
    m->threads = dl_threads_get();
    m->th = dl_calloc((size_t)m->threads, sizeof *m->th, err);
    int rc = m->th ? DL_OK : DL_ERR_NOMEM;
    for (int t = 0; !rc && t < m->threads; t++) {
        for (int p = 0; !rc && p < N_PRODS; p++) {
            rc = product(&m->th[t].prod[p], p, m->a.T, m->a.d, &m->th[t].prod[SOFTMAX], err);
            if (!rc && m->th[t].prod[p].scratch > m->scratch)
                m->scratch = m->th[t].prod[p].scratch;
        }
        if (!rc)
            rc = dl_dnnl_check(dnnl_stream_create(&m->th[t].stream, dl_dnnl_engine(), dnnl_stream_default_flags),
                               "stream", err);
    }
    if (rc) {
        attnb_destroy(m);
        return rc;
    }
    *inst = m;
    return DL_OK;
}

/* A thread's part of the workspace: P and dP' (f32, T x T each), P' and
 * dS (bf16), the scratchpad. */
static size_t thread_bytes(const struct attnb_inst *m)
{
    size_t tt = (size_t)(m->a.T * m->a.T);
    return dl_dnnl_align(2 * tt * dl_dtype_size(DL_F32)) + dl_dnnl_align(2 * tt * dl_dtype_size(DL_BF16)) +
           dl_dnnl_align(m->scratch);
}

static size_t attnb_ws(const void *inst, enum dl_dir dir)
{
    (void)dir;
    const struct attnb_inst *m = inst;
    return thread_bytes(m) * (size_t)m->threads;
}

struct thread_ws {
    float *p, *dp;
    dl_bf16 *pd, *ds;
    void *scratch;
};

static struct thread_ws thread_ws(const struct attnb_inst *m, void *workspace)
{
    size_t tt = (size_t)(m->a.T * m->a.T);
    char *w = (char *)workspace + thread_bytes(m) * (size_t)omp_get_thread_num();
    struct thread_ws x = {.p = (float *)w};
    x.dp = x.p + tt;
    x.pd = (dl_bf16 *)(w + dl_dnnl_align(2 * tt * sizeof *x.p));
    x.ds = x.pd + tt;
    x.scratch = (char *)x.pd + dl_dnnl_align(2 * tt * sizeof *x.pd);
    return x;
}

struct head {
    const dl_bf16 *q, *k, *v;
    dl_bf16 *dq, *dk, *dv;
};

/* Head h of sample n: its q, k, v blocks and their gradients' (NULL: not wanted). */
static struct head head_of(const struct attnb_inst *m, const struct dl_op_call *c, long n, long h)
{
    long T = m->a.T, C = m->a.C, off = h * m->a.d * T;
    const dl_bf16 *in[3];
    dl_bf16 *din[3];
    for (int i = 0; i < 3; i++) {
        long base = m->a.packed ? n * 3 * C * T + i * C * T + off : n * C * T + off;
        int j = m->a.packed ? 0 : i;
        in[i] = dl_tensor_const_bf16(&c->in[j]) + base;
        din[i] = c->din[j].data ? dl_tensor_bf16(&c->din[j]) + base : NULL;
    }
    return (struct head){in[0], in[1], in[2], din[0], din[1], din[2]};
}

/* One product on this thread: a, b -> c. */
static void run(const struct attnb_inst *m, const struct thread_ws *w, int which, const void *a, const void *b,
                void *c)
{
    const struct per_thread *t = &m->th[omp_get_thread_num()];
    dnnl_exec_arg_t args[DL_DNNL_MAX_ARGS];
    void *const ptr[] = {(void *)a, (void *)b, c};
    dl_dnnl_prim_args(&t->prod[which], ptr, w->scratch, t->stream, args);
    dnnl_primitive_execute(t->prod[which].prim, t->stream, t->prod[which].n, args);
    dnnl_stream_wait(t->stream);
}

static int drops(const struct attnb_inst *m, const struct dl_op_call *c)
{
    return c->training && m->a.dropout > 0;
}

/* The scores scaled, -inf where the causal mask hides a key (softmax's
 * exp makes them 0, or nearly: masked() sets 0 after). */
static void scaled_scores(float *p, long T, int causal, float scale)
{
    for (long t = 0; t < T; t++) {
        float *row = p + t * T;
        long len = causal ? t + 1 : T;
        for (long s = 0; s < len; s++)
            row[s] *= scale;
        for (long s = len; s < T; s++)
            row[s] = -INFINITY;
    }
}

/* 0 where the causal mask hides a key. */
static void masked(float *p, long T, int causal)
{
    for (long t = 0; causal && t < T - 1; t++)
        memset(p + t * T + t + 1, 0, sizeof *p * (size_t)(T - t - 1));
}

/* P from q and k in w->p (oneDNN's softmax), and P' (the dropped weights)
 * rounded in w->pd. */
static void weights(const struct attnb_inst *m, const struct dl_op_call *c, const struct head *x, long n, long h,
                    const struct thread_ws *w)
{
    long T = m->a.T;
    run(m, w, SCORES, x->q, x->k, w->p);
    scaled_scores(w->p, T, m->a.causal, (float)(1 / sqrt((double)m->a.d)));
    run(m, w, SOFTMAX, w->p, w->p, NULL);
    masked(w->p, T, m->a.causal);
    if (!drops(m, c)) {
        dl_cast(w->p, DL_F32, w->pd, DL_BF16, T * T, NULL); /* vectorized */
        return;
    }
    for (long t = 0; t < T; t++)
        for (long s = 0; s < T; s++) {
            float f = (float)dl_attention_kept(c->key, c->sample0 + n, m->a.head0 + h, t, s, T, m->a.dropout);
            w->pd[t * T + s] = dl_f32_to_bf16(w->p[t * T + s] * f);
        }
}

/* A cached call (incremental decoding) is the f32 kernels'. */
static int uncached(const struct dl_kernel_args *a)
{
    if (!a->c.cache)
        return 1;
    dl_kernel_fail(a, "onednn-bf16", "attention", "incremental decoding (a key/value cache) runs in f32");
    return 0;
}

static void attnb_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct attnb_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    long T = m->a.T, tasks = (long)c->batch * m->a.H;
    if (!uncached(a))
        return;
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (long task = 0; task < tasks; task++) {
        long n = task / m->a.H, h = task % m->a.H;
        struct thread_ws w = thread_ws(m, a->workspace);
        struct head x = head_of(m, c, n, h);
        weights(m, c, &x, n, h, &w);
        run(m, &w, BY_T, x.v, w.pd, dl_tensor_bf16(&c->out) + n * m->a.C * T + h * m->a.d * T);
    }
}

static void attnb_backward(void *inst, const struct dl_kernel_args *a)
{
    /* called when an input gradient is wanted (kernel.h's dl_kernel_runs) */
    const struct attnb_inst *m = inst;
    const struct dl_op_call *c = &a->c;
    long T = m->a.T, tasks = (long)c->batch * m->a.H;
    float scale = (float)(1 / sqrt((double)m->a.d));
    #pragma omp parallel for num_threads(m->threads) schedule(static)
    for (long task = 0; task < tasks; task++) {
        long n = task / m->a.H, h = task % m->a.H;
        struct thread_ws w = thread_ws(m, a->workspace);
        struct head x = head_of(m, c, n, h);
        weights(m, c, &x, n, h, &w);
        const dl_bf16 *dy = dl_tensor_const_bf16(&c->dout) + n * m->a.C * T + h * m->a.d * T;
        if (x.dv)
            run(m, &w, PLAIN, dy, w.pd, x.dv);
        run(m, &w, SCORES, dy, x.v, w.dp);
        for (long t = 0; drops(m, c) && t < T; t++)
            for (long s = 0; s < T; s++)
                w.dp[t * T + s] *=
                    (float)dl_attention_kept(c->key, c->sample0 + n, m->a.head0 + h, t, s, T, m->a.dropout);
        run(m, &w, SOFTMAX_BACK, w.p, w.dp, w.dp); /* 0 where P is */
        for (long i = 0; i < T * T; i++)
            w.dp[i] *= scale;
        dl_cast(w.dp, DL_F32, w.ds, DL_BF16, T * T, NULL);
        if (x.dq)
            run(m, &w, BY_T, x.k, w.ds, x.dq);
        if (x.dk)
            run(m, &w, PLAIN, x.q, w.ds, x.dk);
    }
}

/* Not yet grouped kv heads (the reference-bf16 runs those). */
static int attnb_supports(const struct dl_layer *l)
{
    return dl_dnnl_bf16_supports(l) && dl_attention_ungrouped(l);
}

const struct dl_kernel dl_kernel_onednn_attention_bf16 = {
    .name = "onednn-bf16", .backend = "cpu_onednn", .op = &dl_op_attention, .dtype = DL_BF16,
    .supports = attnb_supports, .create = attnb_create, .destroy = attnb_destroy,
    .workspace_bytes = attnb_ws, .forward = attnb_forward, .backward_data = attnb_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS, /* q, k, v: the weights recomputed */
};
