/* moe.c: a mixture of experts (Shazeer et al. 2017; GShard; Switch; the
 * sparse MLP of Mixtral, OLMoE and Qwen-MoE) over each position of a
 * sequence [T, C] (or a feature vector).  A router scores E experts,
 * logits = W_g x, probs = softmax(logits); the token goes to the top_k
 * experts of highest probability (the lower index first among equals),
 * each weighted by its gate: its probability, divided by the sum of the
 * chosen ones' when normalize is set (Mixtral, and OLMoE with
 * norm_topk_prob; then the gates are the softmax over the chosen logits).
 * Expert e is a SwiGLU MLP, W2_e (silu(W1_e x) * (W3_e x)), of `units`
 * hidden features (Mixtral's w1, w3, w2; gate_proj, up_proj, down_proj);
 *   y = sum over the chosen e of gate_e expert_e(x).
 * Dropless unless capacity_factor > 0: then each expert takes at most
 * ceil(capacity_factor T k / E) of a sample's T k choices, first choices
 * of every position before second ones, in position order (GShard); a
 * choice over capacity adds nothing (its gate is not renormalised).
 * Load balancing, per sample and per layer (as Megatron-LM and torchtitan
 * add it per micro-batch and layer; Hugging Face's Mixtral pools the whole
 * batch and all layers before its product): the Switch auxiliary loss
 *   aux = aux_loss E sum_e F_e P_e,
 * F_e the share of the sample's positions that chose e among their k
 * (Hugging Face's count: the shares add up to k), P_e the mean of probs_e
 * over them (its gradient flows through P only); and the router z-loss
 *   z = z_loss mean over positions of logsumexp(logits)^2  (ST-MoE).
 * Both enter backward with the weight of one sample's loss in the
 * mini-batch's mean (the call's loss_norm), as the loss's own gradient does.
 * Reference in double; position by position. saved: per position probs
 * [E], the chosen experts [k] and whether each was kept [k]; per sample
 * its aux + z (added_loss). */
#include "ops/moe.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct dl_attr_desc moe_attrs[] = {
    {.key = "experts", .type = DL_ATTR_INT, .offset = offsetof(struct dl_moe_attr, experts), .required = 1, .min = 1,
     .max = 1 << 16, .doc = "E: the experts (SwiGLU MLPs) the router chooses among"},
    {.key = "top_k", .type = DL_ATTR_INT, .offset = offsetof(struct dl_moe_attr, top_k), .def = 2, .min = 1,
     .max = 256, .doc = "experts a position goes to (Mixtral 2, OLMoE 8)"},
    {.key = "units", .type = DL_ATTR_INT, .offset = offsetof(struct dl_moe_attr, units), .required = 1, .min = 1,
     .max = 1 << 24, .doc = "hidden features of each expert (intermediate_size)"},
    {.key = "normalize", .type = DL_ATTR_BOOL, .offset = offsetof(struct dl_moe_attr, normalize), .def = 1,
     .doc = "gates divided by the sum of the chosen probabilities (Mixtral; OLMoE's norm_topk_prob)"},
    {.key = "aux_loss", .type = DL_ATTR_FLOAT, .offset = offsetof(struct dl_moe_attr, aux_loss), .def = 0, .min = 0,
     .max = 1e6, .doc = "coefficient of the Switch load-balancing loss (router_aux_loss_coef; 0: none)"},
    {.key = "z_loss", .type = DL_ATTR_FLOAT, .offset = offsetof(struct dl_moe_attr, z_loss), .def = 0, .min = 0,
     .max = 1e6, .doc = "coefficient of the router z-loss, mean logsumexp(logits)^2 (router_z_loss_coef; 0: none)"},
    {.key = "capacity_factor", .type = DL_ATTR_FLOAT, .offset = offsetof(struct dl_moe_attr, capacity_factor),
     .def = 0, .min = 0, .max = 1e6,
     .doc = "each expert takes at most ceil(this x T x top_k / experts) of a sample's choices (0: dropless)"},
};

static int moe_check(const void *attr, struct dl_error *err)
{
    const struct dl_moe_attr *a = attr;
    if (a->top_k > a->experts)
        return dl_errorf(err, DL_ERR_SPEC, "top_k: expected at most experts (%d), found %d", a->experts, a->top_k);
    return DL_OK;
}

/* T positions of C features: a sequence's, or one (a feature vector). */
static void moe_dims(struct dl_shape in, long *T, long *C)
{
    int seq = dl_shape_rank(in) == 2;
    *T = seq ? in.h : 1;
    *C = seq ? in.c : dl_shape_count(in);
}

static int moe_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                     struct dl_error *err)
{
    (void)attr, (void)n_in;
    char s[48];
    if (in[0].dtype != DL_F32 || dl_shape_rank(in[0]) == 3)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] or features [C], found %s",
                         dl_shape_str(in[0], s, sizeof s));
    *out = in[0];
    return DL_OK;
}

static int moe_params(const void *attr, const struct dl_shape *in, struct dl_shape out, struct dl_param_desc *p)
{
    (void)out;
    const struct dl_moe_attr *a = attr;
    if (!p)
        return 4;
    long T, C;
    moe_dims(in[0], &T, &C);
    int E = a->experts, F = a->units, c = (int)C, L = dl_moe_local_experts(a);
    p[0] = (struct dl_param_desc){.name = "gate.weight", .count = (long)E * c, .ndim = 2, .dims = {E, c},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = c, .trainable = 1};
    p[1] = (struct dl_param_desc){.name = "experts.w1", .count = (long)L * F * c, .ndim = 3, .dims = {L, F, c},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = c, .trainable = 1, .per_expert = 1};
    p[2] = (struct dl_param_desc){.name = "experts.w3", .count = (long)L * F * c, .ndim = 3, .dims = {L, F, c},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = c, .trainable = 1, .per_expert = 1};
    p[3] = (struct dl_param_desc){.name = "experts.w2", .count = (long)L * c * F, .ndim = 3, .dims = {L, c, F},
                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = F, .trainable = 1, .per_expert = 1};
    return 4;
}

/* Block `rank` of `ranks` of the experts (expert parallelism). */
static int moe_expert_split(const void *attr, int ranks, int rank, void *local)
{
    const struct dl_moe_attr *a = attr;
    struct dl_moe_attr *l = local;
    if (a->experts % ranks)
        return -1;
    l->local_experts = a->experts / ranks;
    l->expert0 = rank * l->local_experts;
    return 0;
}

/* A sample's rows to its experts: a row per choice of each position, at
 * most the capacity's ceil(capacity_factor T k / E) for each expert. */
static long moe_routed_rows(const void *attr, const struct dl_shape *in, long *width)
{
    const struct dl_moe_attr *a = attr;
    long T, rows;
    moe_dims(in[0], &T, width);
    rows = T * a->top_k;
    if (a->capacity_factor > 0) {
        long kept = a->experts * (long)ceil(a->capacity_factor * (double)rows / (double)a->experts);
        rows = kept < rows ? kept : rows;
    }
    return rows;
}

/* The experts a position does not go to: (E - k) of E, three matrices each. */
static long moe_idle_params(const void *attr, const struct dl_shape *in)
{
    const struct dl_moe_attr *a = attr;
    long T, C;
    moe_dims(in[0], &T, &C);
    return (long)(a->experts - a->top_k) * 3 * a->units * C;
}

static long moe_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out)
{
    (void)out;
    const struct dl_moe_attr *a = attr;
    long T, C;
    moe_dims(in[0], &T, &C);
    return dl_moe_saved_count(a, batch, T);
}

long dl_moe_saved_count(const struct dl_moe_attr *a, long N, long T)
{
    return N * (T * (a->experts + 2L * a->top_k) + 1);
}

/* Per position: the router's and the experts' work; the experts of the
 * top k (the router's share is small). */
static double moe_flops(const void *attr, const struct dl_shape *in, struct dl_shape out)
{
    (void)out;
    const struct dl_moe_attr *a = attr;
    long T, C;
    moe_dims(in[0], &T, &C);
    return (double)T * (2.0 * a->experts * C + a->top_k * (6.0 * a->units * C + 4.0 * a->units + 2.0 * C));
}

struct dl_moe_view dl_moe_view(const struct dl_op_call *c)
{
    struct dl_moe_view v = {.a = c->attr, .N = c->batch};
    moe_dims(c->in[0].shape, &v.T, &v.C);
    v.E = v.a->experts, v.K = v.a->top_k, v.F = v.a->units, v.M = v.N * v.T;
    v.EL = dl_moe_local_experts(v.a), v.e0 = v.a->expert0;
    v.wg = c->param[0], v.w1 = c->param[1], v.w3 = c->param[2], v.w2 = c->param[3];
    v.probs = c->saved, v.chosen = c->saved + v.M * v.E, v.kept = v.chosen + v.M * v.K, v.loss = v.kept + v.M * v.K;
    return v;
}

static long at(const struct dl_moe_view *v, long m, long k)
{
    return (m / v->T * v->C + k) * v->T + m % v->T;
}

static double sigmoid(double g)
{
    return 1 / (1 + exp(-g));
}

/* Position m's router logits into logits[E], in double. */
static void router_logits(const struct dl_moe_view *v, const dl_real *x, long m, double *logits)
{
    for (long e = 0; e < v->E; e++) {
        double s = 0;
        for (long k = 0; k < v->C; k++)
            s += (double)v->wg[e * v->C + k] * x[at(v, m, k)];
        logits[e] = s;
    }
}

/* log sum exp x[0..n), from the largest. */
static double logsumexp(const double *x, long n)
{
    double top = -INFINITY, sum = 0;
    for (long i = 0; i < n; i++)
        top = x[i] > top ? x[i] : top;
    for (long i = 0; i < n; i++)
        sum += exp(x[i] - top);
    return top + log(sum);
}

double dl_moe_route(const struct dl_moe_view *v, long m, const double *logits)
{
    double lse = logsumexp(logits, v->E);
    dl_real *p = v->probs + m * v->E, *chosen = v->chosen + m * v->K;
    for (long e = 0; e < v->E; e++)
        p[e] = (dl_real)exp(logits[e] - lse);
    for (long j = 0; j < v->K; j++) {
        long best = -1;
        for (long e = 0; e < v->E; e++) {
            int taken = 0;
            for (long i = 0; i < j && !taken; i++)
                taken = (long)chosen[i] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        chosen[j] = (dl_real)best;
        v->kept[m * v->K + j] = 1;
    }
    return lse;
}

void dl_moe_capacity(const struct dl_moe_view *v)
{
    if (v->a->capacity_factor <= 0)
        return;
    long cap = (long)ceil(v->a->capacity_factor * (double)(v->T * v->K) / (double)v->E);
    long *load = calloc((size_t)v->E, sizeof *load);
    for (long n = 0; load && n < v->N; n++) {
        memset(load, 0, sizeof *load * (size_t)v->E);
        for (long j = 0; j < v->K; j++)
            for (long m = n * v->T; m < (n + 1) * v->T; m++) {
                long e = (long)v->chosen[m * v->K + j];
                v->kept[m * v->K + j] = load[e] < cap;
                load[e] += load[e] < cap;
            }
    }
    free(load);
}

void dl_moe_sample_losses(const struct dl_moe_view *v, const double *lse)
{
    for (long n = 0; n < v->N; n++) {
        double aux = 0, z = 0;
        for (long e = 0; e < v->E && v->a->aux_loss > 0; e++) {
            double f = 0, p = 0;
            for (long m = n * v->T; m < (n + 1) * v->T; m++) {
                for (long j = 0; j < v->K; j++)
                    f += (long)v->chosen[m * v->K + j] == e;
                p += v->probs[m * v->E + e];
            }
            aux += f / (double)v->T * p / (double)v->T;
        }
        for (long m = n * v->T; m < (n + 1) * v->T; m++)
            z += lse[m] * lse[m];
        v->loss[n] = (dl_real)(v->a->aux_loss * (double)v->E * aux + v->a->z_loss * z / (double)v->T);
    }
}

void dl_moe_gates(const struct dl_moe_view *v, long m, double *g)
{
    double sum = 0;
    for (long j = 0; j < v->K; j++)
        sum += g[j] = v->probs[m * v->E + (long)v->chosen[m * v->K + j]];
    for (long j = 0; j < v->K && v->a->normalize; j++)
        g[j] /= sum;
}

void dl_moe_balance_gradient(const struct dl_moe_view *v, long n, double *share)
{
    for (long e = 0; e < v->E; e++)
        share[e] = 0;
    for (long m = n * v->T; m < (n + 1) * v->T; m++)
        for (long j = 0; j < v->K; j++)
            share[(long)v->chosen[m * v->K + j]] += 1.0 / (double)v->T;
    for (long e = 0; e < v->E; e++)
        share[e] *= v->a->aux_loss * (double)v->E / (double)v->T;
}

void dl_moe_router_backward(const struct dl_moe_view *v, long m, const double *dg, double lse, const double *share,
                            double norm, double *dlogits)
{
    const dl_real *p = v->probs + m * v->E, *chosen = v->chosen + m * v->K;
    double g[v->K > 0 ? v->K : 1];
    dl_moe_gates(v, m, g);
    for (long e = 0; e < v->E; e++) /* d/dprobs, then through the softmax */
        dlogits[e] = share ? share[e] * norm : 0;
    double dot = 0, sum = 0, pdp = 0;
    for (long j = 0; j < v->K; j++)
        dot += dg[j] * g[j], sum += p[(long)chosen[j]];
    for (long j = 0; j < v->K; j++) /* gates -> probs: g_j = p_j / S when normalised */
        dlogits[(long)chosen[j]] += v->a->normalize ? (dg[j] - dot) / sum : dg[j];
    for (long e = 0; e < v->E; e++)
        pdp += p[e] * dlogits[e];
    for (long e = 0; e < v->E; e++)
        dlogits[e] = p[e] * (dlogits[e] - pdp) + v->a->z_loss * 2 * lse * p[e] / (double)v->T * norm;
}

/* Expert e's hidden pre-activations at position m: a = W1_e x, b = W3_e x. */
static void hidden(const struct dl_moe_view *v, const dl_real *x, long m, long e, double *a, double *b)
{
    const dl_real *w1 = v->w1 + e * v->F * v->C, *w3 = v->w3 + e * v->F * v->C;
    for (long f = 0; f < v->F; f++) {
        double s1 = 0, s3 = 0;
        for (long k = 0; k < v->C; k++) {
            double xk = x[at(v, m, k)];
            s1 += (double)w1[f * v->C + k] * xk;
            s3 += (double)w3[f * v->C + k] * xk;
        }
        a[f] = s1, b[f] = s3;
    }
}

/* Every position's routing (the saved state) and logsumexp into lse[M]. */
static void choose(const struct dl_moe_view *v, const dl_real *x, double *lse)
{
    #pragma omp parallel
    {
        double *logits = malloc(sizeof *logits * (size_t)v->E);
        #pragma omp for schedule(static)
        for (long m = 0; m < v->M; m++) {
            router_logits(v, x, m, logits);
            lse[m] = dl_moe_route(v, m, logits);
        }
        free(logits);
    }
    dl_moe_capacity(v);
}

static void moe_forward(const struct dl_op_call *c)
{
    struct dl_moe_view v = dl_moe_view(c);
    const dl_real *x = dl_tensor_const_f32(&c->in[0]);
    dl_real *y = dl_tensor_f32(&c->out);
    double *lse = malloc(sizeof *lse * (size_t)v.M);
    if (!lse)
        return;
    choose(&v, x, lse);
    dl_moe_sample_losses(&v, lse);
    free(lse);
    #pragma omp parallel
    {
        double *a = malloc(sizeof *a * (size_t)(2 * v.F + v.C + v.K)), *b = a + v.F, *out = b + v.F,
               *g = out + v.C;
        #pragma omp for schedule(static)
        for (long m = 0; m < v.M; m++) {
            dl_moe_gates(&v, m, g);
            memset(out, 0, sizeof *out * (size_t)v.C);
            for (long j = 0; j < v.K; j++) {
                if (!v.kept[m * v.K + j])
                    continue;
                long e = (long)v.chosen[m * v.K + j];
                hidden(&v, x, m, e, a, b);
                for (long f = 0; f < v.F; f++)
                    a[f] = a[f] * sigmoid(a[f]) * b[f];
                const dl_real *w2 = v.w2 + e * v.C * v.F;
                for (long k = 0; k < v.C; k++) {
                    double s = 0;
                    for (long f = 0; f < v.F; f++)
                        s += (double)w2[k * v.F + f] * a[f];
                    out[k] += g[j] * s;
                }
            }
            for (long k = 0; k < v.C; k++)
                y[at(&v, m, k)] = (dl_real)out[k];
        }
        free(a);
    }
}

/* Backward of position m: the router's logit gradient into dlogits[E] and
 * the input gradient into dx (when not NULL); tmp holds 3F + 2K + 2E. */
static void position_backward(const struct dl_moe_view *v, const struct dl_op_call *c, long m, double norm,
                              const double *share, double *dlogits, dl_real *dx, double *tmp)
{
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *dy = dl_tensor_const_f32(&c->dout);
    double *a = tmp, *b = a + v->F, *dh = b + v->F, *g = dh + v->F, *dg = g + v->K, *logits = dg + v->K;
    double *dxm = dx ? calloc((size_t)v->C, sizeof *dxm) : NULL;
    router_logits(v, x, m, logits);
    dl_moe_gates(v, m, g);
    for (long j = 0; j < v->K; j++) {
        dg[j] = 0;
        if (!v->kept[m * v->K + j])
            continue;
        long e = (long)v->chosen[m * v->K + j];
        const dl_real *w1 = v->w1 + e * v->F * v->C, *w3 = v->w3 + e * v->F * v->C, *w2 = v->w2 + e * v->C * v->F;
        hidden(v, x, m, e, a, b);
        for (long f = 0; f < v->F; f++) {
            double s = 0, h = a[f] * sigmoid(a[f]) * b[f];
            for (long k = 0; k < v->C; k++)
                s += (double)w2[k * v->F + f] * dy[at(v, m, k)];
            dg[j] += s * h;
            dh[f] = g[j] * s;
        }
        for (long f = 0; dxm && f < v->F; f++) {
            double s = sigmoid(a[f]), da = dh[f] * b[f] * s * (1 + a[f] * (1 - s)), db = dh[f] * a[f] * s;
            for (long k = 0; k < v->C; k++)
                dxm[k] += (double)w1[f * v->C + k] * da + (double)w3[f * v->C + k] * db;
        }
    }
    dl_moe_router_backward(v, m, dg, logsumexp(logits, v->E), share, norm, dlogits);
    for (long e = 0; dxm && e < v->E; e++)
        for (long k = 0; k < v->C; k++)
            dxm[k] += (double)v->wg[e * v->C + k] * dlogits[e];
    for (long k = 0; dxm && k < v->C; k++)
        dx[at(v, m, k)] = (dl_real)dxm[k];
    free(dxm);
}

/* Expert e's weight gradients over every position that chose and kept it,
 * in position order. */
static void expert_backward(const struct dl_moe_view *v, const struct dl_op_call *c, long e, double *tmp)
{
    const dl_real *x = dl_tensor_const_f32(&c->in[0]), *dy = dl_tensor_const_f32(&c->dout);
    double *a = tmp, *b = a + v->F, *g = b + v->F;
    dl_real *dw1 = c->dparam[1] ? c->dparam[1] + e * v->F * v->C : NULL;
    dl_real *dw3 = c->dparam[2] ? c->dparam[2] + e * v->F * v->C : NULL;
    dl_real *dw2 = c->dparam[3] ? c->dparam[3] + e * v->C * v->F : NULL;
    const dl_real *w2 = v->w2 + e * v->C * v->F;
    for (long m = 0; m < v->M; m++)
        for (long j = 0; j < v->K; j++) {
            if ((long)v->chosen[m * v->K + j] != e || !v->kept[m * v->K + j])
                continue;
            dl_moe_gates(v, m, g);
            hidden(v, x, m, e, a, b);
            for (long f = 0; f < v->F; f++) {
                double s = sigmoid(a[f]), h = a[f] * s * b[f], dh = 0;
                for (long k = 0; k < v->C; k++) {
                    double d = dy[at(v, m, k)];
                    dh += (double)w2[k * v->F + f] * d;
                    if (dw2)
                        dw2[k * v->F + f] += (dl_real)(g[j] * d * h);
                }
                dh *= g[j];
                double da = dh * b[f] * s * (1 + a[f] * (1 - s)), db = dh * a[f] * s;
                for (long k = 0; k < v->C; k++) {
                    double xk = x[at(v, m, k)];
                    if (dw1)
                        dw1[f * v->C + k] += (dl_real)(da * xk);
                    if (dw3)
                        dw3[f * v->C + k] += (dl_real)(db * xk);
                }
            }
        }
}

static double moe_added_loss(const struct dl_op_call *c)
{
    struct dl_moe_view v = dl_moe_view(c);
    double sum = 0;
    for (long n = 0; n < c->batch; n++)
        sum += v.loss[n];
    return sum;
}

/* The choices each expert took [E], those dropped, and all of them. */
static int moe_stats_count(const void *attr)
{
    return ((const struct dl_moe_attr *)attr)->experts + 2;
}

static void moe_stats(const struct dl_op_call *c, double *acc)
{
    struct dl_moe_view v = dl_moe_view(c);
    for (long i = 0; i < v.M * v.K; i++) {
        acc[(long)v.chosen[i]] += v.kept[i] != 0;
        acc[v.E] += v.kept[i] == 0;
    }
    acc[v.E + 1] += (double)(v.M * v.K);
}

static void moe_backward(const struct dl_op_call *c)
{
    struct dl_moe_view v = dl_moe_view(c);
    const dl_real *x = dl_tensor_const_f32(&c->in[0]);
    dl_real *dx = c->din[0].data ? dl_tensor_f32(&c->din[0]) : NULL;
    double norm = c->loss_norm > 0 ? c->loss_norm : 1.0 / c->batch;
    double *dlogits = malloc(sizeof *dlogits * (size_t)(v.M * v.E));
    double *share = calloc((size_t)(c->batch * v.E), sizeof *share);
    if (!dlogits || !share) {
        free(dlogits);
        free(share);
        return;
    }
    for (long n = 0; n < c->batch && v.a->aux_loss > 0; n++)
        dl_moe_balance_gradient(&v, n, share + n * v.E);
    #pragma omp parallel
    {
        double *tmp = malloc(sizeof *tmp * (size_t)(3 * v.F + 2 * v.K + 2 * v.E));
        #pragma omp for schedule(static)
        for (long m = 0; m < v.M; m++)
            position_backward(&v, c, m, norm, v.a->aux_loss > 0 ? share + m / v.T * v.E : NULL, dlogits + m * v.E,
                              dx, tmp);
        #pragma omp for schedule(static)
        for (long e = 0; e < v.E; e++)
            expert_backward(&v, c, e, tmp);
        free(tmp);
    }
    if (c->dparam[0]) {
        #pragma omp parallel for schedule(static)
        for (long e = 0; e < v.E; e++)
            for (long k = 0; k < v.C; k++) {
                double s = 0;
                for (long m = 0; m < v.M; m++)
                    s += dlogits[m * v.E + e] * x[at(&v, m, k)];
                c->dparam[0][e * v.C + k] += (dl_real)s;
            }
    }
    free(dlogits);
    free(share);
}

const struct dl_op_kind dl_op_moe = {
    .name = "moe",
    .summary = "a mixture of SwiGLU experts: a router sends each position to its top_k of E (Mixtral, OLMoE)",
    .attr_size = sizeof(struct dl_moe_attr),
    .attrs = moe_attrs,
    .n_attrs = sizeof moe_attrs / sizeof moe_attrs[0],
    .min_inputs = 1,
    .max_inputs = 1,
    .check = moe_check,
    .infer = moe_infer,
    .params = moe_params,
    .saved_size = moe_saved_size,
    .forward = moe_forward,
    .backward = moe_backward,
    .added_loss = moe_added_loss,
    .stats_count = moe_stats_count,
    .stats = moe_stats,
    .weight_products = 1,
    .idle_params = moe_idle_params,
    .expert_split = moe_expert_split,
    .routed_rows = moe_routed_rows,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
    .flops = moe_flops,
};
