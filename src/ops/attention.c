/* attention.c: multi-head scaled dot-product self-attention (GPT-2's, the
 * core of PyTorch's MultiheadAttention without its projections):
 *   y_h = softmax(q_h k_g^T / sqrt(d) + mask) v_g   for each head h,
 * on q of [T, C] split into `heads` heads of d = C / heads features (head
 * h: features [h d, (h+1) d)), and k, v of kv_heads heads of d features
 * (grouped-query attention, as the LLaMA family's: query head h reads kv
 * head g = h / (heads / kv_heads); kv_heads = heads, the default, is
 * GPT-2's, 1 is multi-query attention); the heads' outputs side by side
 * give y [T, C].  The input is one packed tensor [T, (heads + 2 kv_heads)
 * d] (q, k, v blocks in that order, as GPT-2's c_attn makes [T, 3C]) or
 * three inputs q [T, C], k and v [T, kv_heads d].
 * causal (the default) masks the positions after each query's own; with
 * document masking (the call's doc_start, op.h) a query sees only the keys
 * of its own document (causal: a block-causal mask, Megatron-LM's reset
 * attention mask, torchtitan's document mask).
 * Training with dropout zeroes each attention weight with probability
 * `dropout` and scales the others by 1/(1 - dropout); a weight's mask is a
 * hash of the call's key and its place (sample, head, query, key), so any
 * split of the batch draws what one process draws.
 * This is the plain reference: scores and sums in double, weights as
 * dl_real; backward recomputes each head's weights from q and k, so nothing
 * T x T is ever stored: saved[] is only the scratch of one query's weights
 * and their gradients per (sample, head), 2 T values each, so memory grows
 * with T, not T^2.
 * Features are stored first (core/shape.h): feature k of position t of a
 * sample is at k T + t. */
#include "ops/attention.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/rng.h"
#include "ops/op.h"

struct attention_attr {
    int heads;
    int causal;
    double dropout;
    int kv_heads; /* 0: heads */
    int head0; /* the whole layer's index of head 0 (a tensor rank's part: tp_heads), not a key */
};

static const struct dl_attr_desc attention_attrs[] = {
    {.key = "heads", .type = DL_ATTR_INT, .offset = offsetof(struct attention_attr, heads), .required = 1, .min = 1,
     .max = 1 << 16, .doc = "number of heads; it divides the width C (each head has C / heads features)"},
    {.key = "causal", .type = DL_ATTR_BOOL, .offset = offsetof(struct attention_attr, causal), .def = 1,
     .doc = "each position attends to itself and the positions before it only (a language model's mask)"},
    {.key = "dropout", .type = DL_ATTR_FLOAT, .offset = offsetof(struct attention_attr, dropout), .def = 0,
     .min = 0, .max = 1, .doc = "probability of zeroing an attention weight during training, in [0, 1)"},
    {.key = "kv_heads", .type = DL_ATTR_INT, .offset = offsetof(struct attention_attr, kv_heads), .def = 0,
     .min = 0, .max = 1 << 16,
     .doc = "heads of k and v (grouped-query attention: each serves heads / kv_heads query heads; 1: multi-query); "
            "it divides heads; 0: heads"},
};

/* The heads of k and v. */
static long kv_heads_of(const struct attention_attr *a)
{
    return a->kv_heads ? a->kv_heads : a->heads;
}

int dl_attention_kv_heads(const void *attr)
{
    return (int)kv_heads_of(attr);
}

static int attention_check(const void *attr, struct dl_error *err)
{
    const struct attention_attr *a = attr;
    if (a->dropout >= 1)
        return dl_errorf(err, DL_ERR_SPEC, "key 'dropout': expected a number in [0, 1), found %g", a->dropout);
    if (a->heads % kv_heads_of(a))
        return dl_errorf(err, DL_ERR_SPEC, "key 'kv_heads': expected a divisor of heads %d, found %d", a->heads,
                         a->kv_heads);
    return DL_OK;
}

static int attention_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                           struct dl_error *err)
{
    const struct attention_attr *a = attr;
    long H = a->heads, KV = kv_heads_of(a);
    char buf[48], other[48];
    if (n_in == 2)
        return dl_errorf(err, DL_ERR_SPEC, "expected 1 input (q, k and v packed as [T, 3C]) or 3 (q, k, v, each "
                         "[T, C]), found 2");
    for (int i = 0; i < n_in; i++)
        if (dl_shape_rank(in[i]) != 2 || in[i].dtype != DL_F32 || in[i].c < 1)
            return dl_errorf(err, DL_ERR_SPEC, "expected sequences [T, C] of features, found %s",
                             dl_shape_str(in[i], buf, sizeof buf));
    long C = in[0].c;
    if (n_in == 1 && KV == H) { /* [T, 3C] */
        if (C % 3)
            return dl_errorf(err, DL_ERR_SPEC, "expected q, k and v packed as [T, 3C], found %s (%ld features is "
                             "not a multiple of 3)", dl_shape_str(in[0], buf, sizeof buf), C);
        if (C / 3 % H)
            return dl_errorf(err, DL_ERR_SPEC, "heads %ld do not divide the width %ld", H, C / 3);
        *out = dl_shape_seq(in[0].h, (int)(C / 3), DL_F32);
        return DL_OK;
    }
    if (n_in == 1) { /* [T, (H + 2 KV) d] */
        if (C % (H + 2 * KV))
            return dl_errorf(err, DL_ERR_SPEC, "expected q, k and v packed as [T, (heads + 2 kv_heads) d] = "
                             "[T, %ld d], found %s (%ld features is not a multiple of %ld)", H + 2 * KV,
                             dl_shape_str(in[0], buf, sizeof buf), C, H + 2 * KV);
        *out = dl_shape_seq(in[0].h, (int)(C / (H + 2 * KV) * H), DL_F32);
        return DL_OK;
    }
    if (C % H)
        return dl_errorf(err, DL_ERR_SPEC, "heads %ld do not divide the width %ld of q", H, C);
    struct dl_shape kv = dl_shape_seq(in[0].h, (int)(C / H * KV), DL_F32);
    for (int i = 1; i < n_in; i++)
        if (!dl_shape_eq(in[i], kv))
            return dl_errorf(err, DL_ERR_SPEC, "expected %s of kv_heads %ld x head features %ld for input %d (%s), "
                             "found %s", dl_shape_str(kv, buf, sizeof buf), KV, C / H, i + 1, i == 1 ? "k" : "v",
                             dl_shape_str(in[i], other, sizeof other));
    *out = in[0];
    return DL_OK;
}

/* Where q, k and v of sample n start (their feature k at position t is
 * at [k T + t]), and their gradients' (NULL: not wanted). */
struct qkv {
    const dl_real *q, *k, *v;
    dl_real *dq, *dk, *dv;
};

static struct qkv sample_qkv(const struct dl_op_call *c, long n, int with_grads)
{
    const struct attention_attr *a = c->attr;
    long T = c->out.shape.h, C = c->out.shape.c, Ckv = C / a->heads * kv_heads_of(a);
    struct qkv p = {0};
    if (c->n_in == 1) {
        long base = n * (C + 2 * Ckv) * T;
        p.q = dl_tensor_const_f32(&c->in[0]) + base, p.k = p.q + C * T, p.v = p.k + Ckv * T;
        if (with_grads && c->din[0].data)
            p.dq = dl_tensor_f32(&c->din[0]) + base, p.dk = p.dq + C * T, p.dv = p.dk + Ckv * T;
        return p;
    }
    long base = n * C * T, kv_base = n * Ckv * T;
    p.q = dl_tensor_const_f32(&c->in[0]) + base;
    p.k = dl_tensor_const_f32(&c->in[1]) + kv_base;
    p.v = dl_tensor_const_f32(&c->in[2]) + kv_base;
    if (with_grads) {
        p.dq = c->din[0].data ? dl_tensor_f32(&c->din[0]) + base : NULL;
        p.dk = c->din[1].data ? dl_tensor_f32(&c->din[1]) + kv_base : NULL;
        p.dv = c->din[2].data ? dl_tensor_f32(&c->din[2]) + kv_base : NULL;
    }
    return p;
}

/* The kv head that query head h reads. */
static long kv_head(const struct attention_attr *a, long h)
{
    return h / (a->heads / kv_heads_of(a));
}

/* Sample n's document starts (NULL: one document). */
static const int *doc_of(const struct dl_op_call *c, long n)
{
    return c->doc_start ? c->doc_start + n * c->out.shape.h : NULL;
}

/* Attention weights of query t of head h of sample n over the keys it
 * sees, [*lo, len) (dl_attention_keys: the causal and document masks):
 * w[s].  Returns len. */
static long weights_of(const struct dl_op_call *c, const struct qkv *p, long n, long h, long t, dl_real *w, long *lo)
{
    const struct attention_attr *a = c->attr;
    long T = c->out.shape.h, d = c->out.shape.c / a->heads, len = dl_attention_keys(doc_of(c, n), T, t, a->causal, lo);
    const dl_real *q = p->q + h * d * T, *k = p->k + kv_head(a, h) * d * T;
    double scale = 1 / sqrt((double)d), most = -INFINITY, sum = 0;
    for (long s = *lo; s < len; s++) {
        double dot = 0;
        for (long j = 0; j < d; j++)
            dot += (double)q[j * T + t] * (double)k[j * T + s];
        most = dot * scale > most ? dot * scale : most;
        w[s] = (dl_real)(dot * scale);
    }
    for (long s = *lo; s < len; s++) {
        double e = exp((double)w[s] - most);
        sum += e;
        w[s] = (dl_real)e;
    }
    for (long s = *lo; s < len; s++)
        w[s] = (dl_real)((double)w[s] / sum);
    return len;
}

double dl_attention_kept(uint64_t key, long sample, long h, long t, long s, long T, double rate)
{
    if (rate == 0)
        return 1;
    uint64_t k = dl_rng_hash(key, (uint64_t)sample);
    return dl_rng_hash_uniform(k, (uint64_t)((h * T + t) * T + s)) >= rate ? 1 / (1 - rate) : 0;
}

/* Dropout's factor for weight (t, s) of head h of sample n of the call. */
static double kept(const struct dl_op_call *c, long n, long h, long t, long s)
{
    const struct attention_attr *a = c->attr;
    return c->training ? dl_attention_kept(c->key, c->sample0 + n, a->head0 + h, t, s, c->out.shape.h, a->dropout)
                       : 1;
}

long dl_attention_first_head(const void *attr)
{
    return ((const struct attention_attr *)attr)->head0;
}

/* Rank t of T runs heads [t H/T, (t+1) H/T) on block t of each of q, k
 * and v: of each input, or of each third of the packed one.  With grouped
 * kv heads, T must divide them too (rank t's kv heads are then those its
 * query heads read) and q, k, v must be three inputs (the packed tensor's
 * blocks are not equal). */
static int attention_tp_heads(const void *attr, int n_in, int T, int t, void *local)
{
    const struct attention_attr *a = attr;
    struct attention_attr *l = local;
    long KV = kv_heads_of(a);
    if (a->heads % T || KV % T || (n_in == 1 && KV != a->heads))
        return -1;
    *l = *a;
    l->heads = a->heads / T;
    l->kv_heads = a->kv_heads ? (int)(KV / T) : 0;
    l->head0 = a->head0 + t * l->heads;
    return n_in == 1 ? 3 : 1;
}

/* saved: 2 T values of scratch per (sample, head) task. */
static long attention_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out)
{
    const struct attention_attr *a = attr;
    return 2L * batch * a->heads * out.h;
}

/* Incremental decoding (c->cache, op.h): the call's T positions, at
 * position0 onwards, join the cache of their sample's keys and values, and
 * each query attends over the cache up to its own position (all of it when
 * not causal); no dropout (inference only). */
static void attention_forward_cached(const struct dl_op_call *c)
{
    const struct attention_attr *a = c->attr;
    long T = c->out.shape.h, C = c->out.shape.c, H = a->heads, d = C / H, L = c->cache_len, p0 = c->position0;
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < (long)c->batch; n++) {
        struct qkv p = sample_qkv(c, n, 0);
        dl_real *K = c->cache + n * 2 * C * L, *V = K + C * L; /* kv_heads d of the C rows of each */
        for (long j = 0; j < d * kv_heads_of(a); j++)
            for (long t = 0; t < T; t++) {
                K[j * L + p0 + t] = p.k[j * T + t];
                V[j * L + p0 + t] = p.v[j * T + t];
            }
    }
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * H; task++) {
        long n = task / H, h = task % H;
        struct qkv p = sample_qkv(c, n, 0);
        const dl_real *K = c->cache + n * 2 * C * L + kv_head(a, h) * d * L, *V = K + C * L, *q = p.q + h * d * T;
        dl_real *y = dl_tensor_f32(&c->out) + n * C * T + h * d * T;
        double scale = 1 / sqrt((double)d);
        for (long t = 0; t < T; t++) {
            long len = a->causal ? p0 + t + 1 : p0 + T;
            double w[len], most = -INFINITY, sum = 0;
            for (long s = 0; s < len; s++) {
                double dot = 0;
                for (long j = 0; j < d; j++)
                    dot += (double)q[j * T + t] * (double)K[j * L + s];
                w[s] = dot * scale;
                most = w[s] > most ? w[s] : most;
            }
            for (long s = 0; s < len; s++)
                sum += w[s] = exp(w[s] - most);
            for (long j = 0; j < d; j++) {
                double acc = 0;
                for (long s = 0; s < len; s++)
                    acc += w[s] / sum * (double)V[j * L + s];
                y[j * T + t] = (dl_real)acc;
            }
        }
    }
}

static void attention_forward(const struct dl_op_call *c)
{
    const struct attention_attr *a = c->attr;
    if (c->cache) {
        attention_forward_cached(c);
        return;
    }
    long T = c->out.shape.h, C = c->out.shape.c, H = a->heads, d = C / H;
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * H; task++) {
        long n = task / H, h = task % H;
        dl_real *w = c->saved + 2 * task * T;
        struct qkv p = sample_qkv(c, n, 0);
        const dl_real *v = p.v + kv_head(a, h) * d * T;
        dl_real *y = dl_tensor_f32(&c->out) + n * C * T + h * d * T;
        for (long t = 0; t < T; t++) {
            long lo, len = weights_of(c, &p, n, h, t, w, &lo);
            for (long j = 0; j < d; j++) {
                double acc = 0;
                for (long s = lo; s < len; s++)
                    acc += (double)w[s] * kept(c, n, h, t, s) * (double)v[j * T + s];
                y[j * T + t] = (dl_real)acc;
            }
        }
    }
}

/* Backward of one head of one sample, query by query: with P the weights,
 * D the dropout factors and dy the output gradient,
 *   dv[s] += P D [t, s] dy[t],  dP = (dy . v[s]) D,
 *   dS = P (dP - sum_s P dP),   dq[t] = scale sum_s dS k[s],
 *   dk[s] += scale dS q[t]
 * (dk and dv of its kv head: added to what its group's other heads gave). */
static void head_backward(const struct dl_op_call *c, long n, long h, dl_real *w, dl_real *dp)
{
    const struct attention_attr *a = c->attr;
    long T = c->out.shape.h, C = c->out.shape.c, d = C / a->heads;
    struct qkv p = sample_qkv(c, n, 1);
    long off = h * d * T, kv_off = kv_head(a, h) * d * T;
    const dl_real *q = p.q + off, *k = p.k + kv_off, *v = p.v + kv_off;
    const dl_real *dy = dl_tensor_const_f32(&c->dout) + n * C * T + off;
    dl_real *dq = p.dq ? p.dq + off : NULL, *dk = p.dk ? p.dk + kv_off : NULL, *dv = p.dv ? p.dv + kv_off : NULL;
    double scale = 1 / sqrt((double)d);
    for (long t = 0; t < T; t++) {
        long lo, len = weights_of(c, &p, n, h, t, w, &lo);
        double row = 0;
        for (long s = lo; s < len; s++) {
            double D = kept(c, n, h, t, s), g = 0;
            for (long j = 0; j < d; j++)
                g += (double)dy[j * T + t] * (double)v[j * T + s];
            if (dv)
                for (long j = 0; j < d; j++)
                    dv[j * T + s] += (dl_real)((double)w[s] * D * (double)dy[j * T + t]);
            dp[s] = (dl_real)(g * D);
            row += (double)w[s] * (double)dp[s];
        }
        for (long s = lo; s < len; s++)
            dp[s] = (dl_real)((double)w[s] * ((double)dp[s] - row) * scale); /* dS, scaled */
        for (long j = 0; dq && j < d; j++) {
            double acc = 0;
            for (long s = lo; s < len; s++)
                acc += (double)dp[s] * (double)k[j * T + s];
            dq[j * T + t] = (dl_real)acc;
        }
        for (long s = lo; dk && s < len; s++)
            for (long j = 0; j < d; j++)
                dk[j * T + s] += (dl_real)((double)dp[s] * (double)q[j * T + t]);
    }
}

static void attention_backward(const struct dl_op_call *c)
{
    const struct attention_attr *a = c->attr;
    long T = c->out.shape.h, H = a->heads;
    int any = 0;
    for (int i = 0; i < c->n_in; i++)
        any |= c->din[i].data != NULL;
    if (!any)
        return;
    /* a task per kv head of a sample: its group's query heads in order add
     * into its dk and dv (the same sums on any thread count) */
    long KV = kv_heads_of(a), G = H / KV, d = c->out.shape.c / H;
    #pragma omp parallel for schedule(static)
    for (long task = 0; task < (long)c->batch * KV; task++) {
        long n = task / KV, g = task % KV;
        struct qkv p = sample_qkv(c, n, 1);
        if (p.dk)
            memset(p.dk + g * d * T, 0, sizeof *p.dk * (size_t)(d * T));
        if (p.dv)
            memset(p.dv + g * d * T, 0, sizeof *p.dv * (size_t)(d * T));
        for (long h = g * G; h < (g + 1) * G; h++) {
            dl_real *scratch = c->saved + 2 * (n * H + h) * T;
            head_backward(c, n, h, scratch, scratch + T);
        }
    }
}

/* The two products, q k^T and the weights times v: 2 T^2 C multiply-adds,
 * or about half of them under the causal mask (T (T + 1) / 2 pairs). */
static double attention_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    const struct attention_attr *a = attr;
    double T = out.h, pairs = a->causal ? T * (T + 1) / 2 : T * T;
    return 2 * 2 * pairs * out.c;
}

const struct dl_op_kind dl_op_attention = {
    .name = "attention",
    .summary = "multi-head scaled dot-product self-attention, causal by default (GPT-2's), on packed q, k, v "
               "[T, 3C] or three [T, C] inputs; grouped-query with kv_heads",
    .attr_size = sizeof(struct attention_attr),
    .attrs = attention_attrs,
    .n_attrs = sizeof attention_attrs / sizeof attention_attrs[0],
    .min_inputs = 1,
    .max_inputs = 3,
    .micro_batch = 1,
    .kv_cache = 1,
    .doc_mask = 1,
    .check = attention_check,
    .infer = attention_infer,
    .saved_size = attention_saved_size,
    .forward = attention_forward,
    .backward = attention_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS /* q, k, v: the weights recomputed */,
    .flops = attention_flops,
    .tp.tp_heads = attention_tp_heads,
};
