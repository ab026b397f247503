/* layout_cost.c: a layout's predicted step time (see layout_cost.h): the
 * per-layer costs under a tensor group (and an expert group), the schedule
 * simulated on the stages they add up to, and the data-parallel allreduce
 * after it. */
#include "planner/layout_cost.h"

#include <stdlib.h>
#include <string.h>

#include "parallel/grad_sync.h"
#include "plan/stages.h"

const char *const dl_time_source_names[] = {"flops", "db", "measured"};

int dl_layer_times_alloc(struct dl_layer_times *t, int n, struct dl_error *err)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->fwd = dl_calloc((size_t)n, sizeof *t->fwd, err);
    t->bwd = dl_calloc((size_t)n, sizeof *t->bwd, err);
    t->wgt = dl_calloc((size_t)n, sizeof *t->wgt, err);
    t->fwd0 = dl_calloc((size_t)n, sizeof *t->fwd0, err);
    t->bwd0 = dl_calloc((size_t)n, sizeof *t->bwd0, err);
    t->wgt0 = dl_calloc((size_t)n, sizeof *t->wgt0, err);
    t->source = dl_calloc((size_t)n, sizeof *t->source, err);
    if (t->fwd && t->bwd && t->wgt && t->fwd0 && t->bwd0 && t->wgt0 && t->source)
        return DL_OK;
    dl_layer_times_free(t);
    return DL_ERR_NOMEM;
}

void dl_layer_times_free(struct dl_layer_times *t)
{
    free(t->fwd), free(t->bwd), free(t->wgt), free(t->fwd0), free(t->bwd0), free(t->wgt0), free(t->source);
    memset(t, 0, sizeof *t);
}

void dl_tp_view_free(struct dl_tp_view *v)
{
    free(v->share), free(v->n_ops), free(v->op), free(v->params), free(v->by_samples);
    free(v->expert_params), free(v->routed_bytes);
    memset(v, 0, sizeof *v);
}

/* Bytes per sample of layer l's input k, whole. */
static double input_bytes(const struct dl_layer *l, int k)
{
    return 4.0 * (double)dl_shape_count(l->in_shape[k]);
}

static void add_op(struct dl_tp_view *v, int i, enum dl_tp_collective kind, int backward, double bytes)
{
    if (v->n_ops[i] < DL_TP_MAX_OPS)
        v->op[i][v->n_ops[i]++] = (struct dl_tp_op){kind, backward, bytes, 0};
}

/* The collectives shard.h's input kinds and partial sums imply for layer i. */
static void layer_ops(const struct dl_graph *g, const struct dl_shard *s, int i, struct dl_tp_view *v)
{
    const struct dl_layer *l = &g->layers[i];
    const struct dl_shard_layer *sl = &s->layer[i];
    for (int k = 0; k < l->n_in; k++) {
        double bytes = input_bytes(l, k);
        int grad_back = l->in[k] != DL_GRAPH_INPUT; /* the network's input needs no gradient */
        if (sl->batch_in[k] == DL_TP_IN_GATHER_BATCH) /* the shares gathered; backward keeps its share */
            add_op(v, i, DL_TP_ALLGATHER, 0, bytes);
        else if (sl->batch_in[k] == DL_TP_IN_SLICE_BATCH && grad_back) /* the shares' gradients gathered */
            add_op(v, i, DL_TP_ALLGATHER, 1, bytes);
        if (sl->rows_in[k] == DL_TP_IN_GATHER_ROWS)
            add_op(v, i, DL_TP_ALLGATHER, 0, bytes);
        else if (sl->rows_in[k] == DL_TP_IN_SLICE_ROWS && grad_back)
            add_op(v, i, DL_TP_ALLGATHER, 1, bytes);
        if (sl->in[k] == DL_TP_IN_GATHER) {
            add_op(v, i, DL_TP_ALLGATHER, 0, bytes);
            if (sl->by_output && grad_back)
                add_op(v, i, DL_TP_REDUCE_SCATTER, 1, bytes);
        } else if (sl->in[k] == DL_TP_IN_SLICE && grad_back) {
            add_op(v, i, DL_TP_ALLGATHER, 1, bytes);
        } else if (sl->in[k] == DL_TP_IN_AS_IS && sl->by_output && grad_back) {
            add_op(v, i, DL_TP_ALLREDUCE, 1, bytes);
        }
    }
    if (sl->partial)
        add_op(v, i, DL_TP_ALLREDUCE, 0, 4.0 * (double)dl_shape_count(l->out_shape));
    if (sl->split_batch && v->params[i] > 0 && v->n_ops[i] < DL_TP_MAX_OPS) /* each call's weight gradients summed */
        v->op[i][v->n_ops[i]++] = (struct dl_tp_op){DL_TP_ALLREDUCE, 1, 4.0 * (double)v->params[i], 1};
}

int dl_tp_view_make(const struct dl_graph *g, int T, int world, const struct dl_machine *m,
                    struct dl_tp_view *v, struct dl_error *err)
{
    memset(v, 0, sizeof *v);
    v->T = T;
    for (long r = 0; r + T <= world; r += T) /* tensor groups: T consecutive ranks */
        v->crosses |= !dl_machine_same_node(m, r, r + T - 1);
    int n = g->n;
    v->share = dl_calloc((size_t)n, sizeof *v->share, err);
    v->n_ops = dl_calloc((size_t)n, sizeof *v->n_ops, err);
    v->op = dl_calloc((size_t)n, sizeof *v->op, err);
    v->params = dl_calloc((size_t)n, sizeof *v->params, err);
    v->by_samples = dl_calloc((size_t)n, sizeof *v->by_samples, err);
    v->expert_params = dl_calloc((size_t)n, sizeof *v->expert_params, err);
    v->routed_bytes = dl_calloc((size_t)n, sizeof *v->routed_bytes, err);
    if (!v->share || !v->n_ops || !v->op || !v->params || !v->by_samples || !v->expert_params ||
        !v->routed_bytes) {
        dl_tp_view_free(v);
        return DL_ERR_NOMEM;
    }
    struct dl_grid_dims dims = {1, T, 1};
    struct dl_shard s;
    int rc = dl_shard_make(g, &dims, 1, 0, NULL, &s, err);
    if (rc) {
        dl_tp_view_free(v);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        const struct dl_layer *whole = &g->layers[i], *mine = &s.local.layers[i];
        double w = dl_stages_layer_cost(whole);
        v->share[i] = w > 0 ? dl_stages_layer_cost(mine) / w : 1;
        v->by_samples[i] = (unsigned char)s.layer[i].split_batch;
        if (s.layer[i].split_batch) /* its shapes are whole; its batch is a T-th */
            v->share[i] /= T;
        v->params[i] = dl_layer_param_count(mine);
        for (int j = 0; j < mine->n_params; j++)
            if (mine->param[j].per_expert && mine->param[j].trainable)
                v->expert_params[i] += mine->param[j].count;
        if (mine->kind->routed_rows) {
            long width = 0, rows = mine->kind->routed_rows(mine->attr, mine->in_shape, &width);
            v->routed_bytes[i] = 4.0 * (double)rows * (double)width;
        }
        if (T > 1)
            layer_ops(g, &s, i, v);
    }
    dl_shard_free(&s);
    return DL_OK;
}

static double collective(const struct dl_machine *m, const struct dl_tp_view *v, const struct dl_tp_op *op,
                         double bytes)
{
    switch (op->kind) {
    case DL_TP_ALLREDUCE: return dl_machine_allreduce(m, v->T, v->crosses, bytes);
    case DL_TP_ALLGATHER: return dl_machine_allgather(m, v->T, v->crosses, bytes);
    case DL_TP_REDUCE_SCATTER: return dl_machine_reduce_scatter(m, v->T, v->crosses, bytes);
    }
    return 0;
}

enum pass_part { PART_FORWARD, PART_BACKWARD, PART_WEIGHTS };

/* Layer i's compute seconds of one part for a chunk of b samples on a
 * rank of tensor group v: measured on such a rank when v has times for a
 * layer it splits, else the whole layer's scaled by the rank's share;
 * slower by the machine's compute_scale when ranks share cores. */
static double compute_s(const struct dl_layer_times *t, const struct dl_tp_view *v, const struct dl_machine *m,
                        int i, enum pass_part part, double b)
{
    double share = v->share[i], scale = m->compute_scale > 1 ? m->compute_scale : 1;
    if (v->times && share < 1 && !v->by_samples[i]) /* measured with the default splits */
        t = v->times, share = 1;
    switch (part) {
    case PART_FORWARD: return scale * (t->fwd0[i] + t->fwd[i] * share * b);
    case PART_BACKWARD: return scale * (t->bwd0[i] + t->bwd[i] * share * b);
    case PART_WEIGHTS: return scale * (t->wgt0[i] + t->wgt[i] * share * b);
    }
    return 0;
}

/* A layout's expert groups: E ranks each (1: none), and whether one of
 * them spans two nodes. */
struct expert_groups {
    int E, crosses;
};

/* 1 when one of the grid's groups spans two nodes: for each tensor and
 * pipeline position, the groups of n data ranks d0, d0 + step, ...,
 * d0 + (n-1) step for d0 = 0, first_stride, ... (n_groups of them). */
static int groups_span_nodes(const struct dl_machine *m, const struct dl_grid_dims *d, int n_groups,
                             int first_stride, int n, int step)
{
    for (int p = 0; n > 1 && p < d->pp; p++)
        for (int t = 0; t < d->tp; t++)
            for (int k = 0; k < n_groups; k++) {
                int d0 = k * first_stride;
                if (!dl_machine_same_node(m, dl_grid_rank(d, (struct dl_grid_pos){t, d0, p}),
                                          dl_grid_rank(d, (struct dl_grid_pos){t, d0 + (n - 1) * step, p})))
                    return 1;
            }
    return 0;
}

/* The expert groups of grid d: each E consecutive data ranks. */
static struct expert_groups expert_groups_of(const struct dl_machine *m, const struct dl_grid_dims *d)
{
    int E = dl_grid_ep(d);
    return (struct expert_groups){E, groups_span_nodes(m, d, d->dp / E, E, E, 1)};
}

/* Layer i's all-to-alls over its expert group in one pass for a chunk of
 * b samples (X: the bytes of the rows it sends): forward sends the rows to
 * their experts and takes the outputs back (X each way), backward sends
 * each row with its output's gradient (2X) and takes the input's back (X). */
static double expert_exchange(const struct dl_tp_view *v, const struct expert_groups *x, const struct dl_machine *m,
                              int i, int dir, double b)
{
    if (x->E <= 1 || v->routed_bytes[i] <= 0)
        return 0;
    double X = v->routed_bytes[i] * b;
    if (dir == 0)
        return 2 * dl_machine_alltoall(m, x->E, x->crosses, X);
    return dl_machine_alltoall(m, x->E, x->crosses, 2 * X) + dl_machine_alltoall(m, x->E, x->crosses, X);
}

/* Layer i's forward (dir 0) or backward (dir 1) seconds for a chunk of b
 * samples: compute and, in *tp and *ep, its tensor collectives and its
 * expert all-to-alls. */
static double layer_pass(const struct dl_layer_times *t, const struct dl_tp_view *v, const struct expert_groups *x,
                         const struct dl_machine *m, int i, int dir, double b, double *tp, double *ep)
{
    double c = 0;
    for (int k = 0; k < v->n_ops[i]; k++)
        if (v->op[i][k].backward == dir)
            c += collective(m, v, &v->op[i][k], v->op[i][k].bytes * (v->op[i][k].per_call ? 1 : b));
    double a = expert_exchange(v, x, m, i, dir, b);
    *tp += c;
    *ep += a;
    return compute_s(t, v, m, i, dir ? PART_BACKWARD : PART_FORWARD, b) + c + a;
}

void dl_layout_layer_costs(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_tp_view *v,
                           const struct dl_machine *m, const struct dl_grid_dims *d, double b, double *cost)
{
    struct expert_groups x = expert_groups_of(m, d);
    for (int i = 0; i < g->n; i++) {
        double tp = 0, ep = 0;
        cost[i] = layer_pass(t, v, &x, m, i, 0, b, &tp, &ep) + layer_pass(t, v, &x, m, i, 1, b, &tp, &ep);
    }
}

double dl_layout_rank_params(const struct dl_tp_view *v, const struct dl_grid_dims *d, int i)
{
    return (double)(v->params[i] - v->expert_params[i]) + (double)(v->expert_params[i] / dl_grid_ep(d));
}

int dl_layout_local_batch(int batch, int dp)
{
    return (batch + dp - 1) / dp;
}

int dl_layout_chunk_batch(int batch, int dp, int chunks)
{
    int local = dl_layout_local_batch(batch, dp);
    return (local + chunks - 1) / chunks;
}

/* Bytes per sample crossing the cut before stage s (outputs of earlier
 * stages read in stage s or later: what stage s-1 sends on, once per
 * reading stage as the executor's edges do, counted at the cut they
 * cross first). */
static double cut_bytes(const struct dl_graph *g, const struct dl_plan_layout *l, int s)
{
    double bytes = 0;
    int P = dl_layout_stages(l);
    for (int i = l->first[s - 1]; i < l->first[s]; i++) {
        int reads_later[DL_SCHED_MAX_STAGES] = {0};
        for (int j = l->first[s]; j < g->n; j++)
            for (int k = 0; k < g->layers[j].n_in; k++)
                if (g->layers[j].in[k] == i) {
                    int st = s;
                    while (st + 1 < P && j >= l->first[st + 1])
                        st++;
                    reads_later[st] = 1;
                }
        for (int st = s; st < P; st++)
            bytes += reads_later[st] ? 4.0 * (double)dl_shape_count(g->layers[i].out_shape) : 0;
    }
    return bytes;
}

/* The data-parallel sums of a pipeline rank's gradients: the dense
 * weights' over its D data ranks, the per-expert weights' (an E-th of them
 * on the rank) over the D/E replicas holding the same experts; whether
 * each group spans nodes. */
struct grad_groups {
    int D, crosses;
    int E, replicas, replicas_cross;
};

static double group_allreduce(const struct dl_machine *m, const struct grad_groups *gg, int per_expert, double bytes)
{
    return per_expert ? dl_machine_allreduce(m, gg->replicas, gg->replicas_cross, bytes)
                      : dl_machine_allreduce(m, gg->D, gg->crosses, bytes);
}

/* The exposed part of a data-parallel allreduce overlapped with one
 * backward pass of layers [first, end) (one chunk, no pipeline: the
 * trainer overlaps only then), as grad_sync.c runs it: the gradient cut
 * into buckets of at most `per` floats from the last layer backwards
 * (closed before a layer would overflow one, or before per-expert weights
 * would share one with others: a layer's per-expert weights lie above its
 * others; a layer larger than a bucket cut into bucket-sized pieces from
 * its end), each bucket handed over when backward has finished its every
 * layer, and reduced one after another over its group.  bwd[i]: layer i's
 * backward seconds; *total: the allreduces' sum. */
static double overlapped_allreduce(const struct dl_machine *m, const struct dl_tp_view *v, const double *bwd,
                                   int first, int end, long per, const struct grad_groups *gg, double value_bytes,
                                   double *total)
{
    double now = 0, comm_end = 0, open_ready = 0;
    long open = 0;
    int open_kind = 0; /* 1: the open bucket's weights are per-expert */
    *total = 0;
#define REDUCE(floats, ready, kind)                                                                  \
    do {                                                                                             \
        double t_ = group_allreduce(m, gg, kind, value_bytes * (double)(floats));                    \
        comm_end = ((ready) > comm_end ? (ready) : comm_end) + t_;                                   \
        *total += t_;                                                                                \
    } while (0)
    for (int i = end - 1; i >= first; i--) {
        now += bwd[i];
        long runs[2] = {v->expert_params[i] / gg->E, v->params[i] - v->expert_params[i]}; /* per-expert first */
        for (int k = 0; k < 2; k++) {
            long w = runs[k];
            int kind = k == 0;
            if (w == 0)
                continue;
            if (open > 0 && (open + w > per || kind != open_kind)) {
                REDUCE(open, open_ready, open_kind);
                open = 0;
            }
            open_kind = kind;
            open += w;
            while (open > per) {
                REDUCE(per, now, kind);
                open -= per;
            }
            open_ready = now;
        }
    }
    if (open > 0)
        REDUCE(open, open_ready, open_kind);
#undef REDUCE
    return comm_end > now ? comm_end - now : 0;
}

/* A layer --recompute full runs twice (exec/recompute.c): one of a block
 * instance, without running statistics. */
static int recomputed(const struct dl_layer *l)
{
    for (int j = 0; j < l->n_params; j++)
        if (!l->param[j].trainable)
            return 0;
    return l->block >= 0;
}

int dl_layout_predict(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_tp_view *v,
                      const struct dl_machine *m, const struct dl_plan_layout *l, int batch,
                      struct dl_layout_prediction *out, struct dl_error *err)
{
    const int P = l->dims.pp, D = l->dims.dp, T = l->dims.tp, M = l->chunks, S = dl_layout_stages(l);
    const long world = (long)P * D * T;
    memset(out, 0, sizeof *out);
    double b = (double)dl_layout_local_batch(batch, D) / M;
    double *fwd = dl_calloc((size_t)S, sizeof *fwd, err), *bwd = dl_calloc((size_t)S, sizeof *bwd, err);
    double *tp = dl_calloc((size_t)S, sizeof *tp, err), *busy = dl_calloc((size_t)P, sizeof *busy, err);
    double *wgt = dl_calloc((size_t)S, sizeof *wgt, err), *ep = dl_calloc((size_t)S, sizeof *ep, err);
    int rc = fwd && bwd && tp && busy && wgt && ep ? DL_OK : DL_ERR_NOMEM;
    const int split = l->schedule == DL_SCHED_ZB_H1;
    const struct expert_groups eg = expert_groups_of(m, &l->dims);
    double send = 0;
    for (int s = 0; !rc && s < S; s++) {
        for (int i = l->first[s]; i < l->first[s + 1]; i++) {
            fwd[s] += layer_pass(t, v, &eg, m, i, 0, b, &tp[s], &ep[s]);
            bwd[s] += layer_pass(t, v, &eg, m, i, 1, b, &tp[s], &ep[s]);
            if (l->recompute && recomputed(&g->layers[i])) /* its forward again, before the block's backward */
                bwd[s] += layer_pass(t, v, &eg, m, i, 0, b, &tp[s], &ep[s]);
            if (split) /* the weight gradients leave the input-gradient pass */
                wgt[s] += compute_s(t, v, m, i, PART_WEIGHTS, b);
        }
        bwd[s] -= wgt[s];
        if (fwd[s] + bwd[s] + wgt[s] > out->stage_max_s)
            out->stage_max_s = fwd[s] + bwd[s] + wgt[s];
        tp[s] *= M;
        ep[s] *= M;
    }
    /* The cut before stage s: its messages go from pipeline rank (s-1) % P
     * to s % P, each of the T*D ranks of one to its counterpart.  A
     * message occupies its sender for the bytes' time (sends go out as
     * copies, one after another on the link: stage s-1's forward sends the
     * activations, stage s's backward their gradients) and arrives alpha
     * later. */
    for (int s = 1; !rc && s < S; s++) {
        int crosses = 0;
        long from = (long)((s - 1) % P) * T * D, to = (long)(s % P) * T * D;
        for (long j = 0; j < (long)T * D; j++)
            crosses |= !dl_machine_same_node(m, from + j, to + j);
        double x = cut_bytes(g, l, s) * b, alpha = dl_machine_send(m, crosses, 0);
        double copy = dl_machine_send(m, crosses, x) - alpha;
        fwd[s - 1] += copy;
        bwd[s] += copy;
        send = alpha > send ? alpha : send;
    }
    struct dl_schedule sched = {0};
    double makespan = 0, idle = 0;
    if (!rc)
        rc = dl_schedule_make(l->schedule, P, M, dl_layout_V(l), &sched, err);
    if (!rc) {
        struct dl_sched_costs costs = {.fwd = fwd, .bwd_in = bwd, .bwd_w = wgt, .send_latency = send};
        rc = dl_schedule_simulate(&sched, &costs, &makespan, busy, &idle, err);
    }
    /* Each pipeline rank's data-parallel group: ranks t + T*(d + D*p),
     * the gradients of its stages p, p + P, ...; its allreduce overlaps
     * backward with one chunk (no pipeline: one stage), else follows it.
     * With expert ranks the per-expert weights' part goes over the
     * replicas of the rank's experts: data ranks d % E alike. */
    double dp = 0, exposed = 0, tp_max = 0, ep_max = 0;
    struct grad_groups gg = {D, 0, eg.E, D / eg.E, groups_span_nodes(m, &l->dims, eg.E, 1, D / eg.E, eg.E)};
    /* ZeRO's reduce-scatter (stage 2: its reduces, between backward's
     * layers on the compute thread) and allgather: nothing hidden */
    int overlaps = M == 1 && D > 1 && !l->zero;
    double *layer_bwd = overlaps && !rc ? dl_calloc((size_t)g->n, sizeof *layer_bwd, err) : NULL;
    if (overlaps && !rc && !layer_bwd)
        rc = DL_ERR_NOMEM;
    long per = (long)((l->bucket_bytes ? l->bucket_bytes : DL_GRAD_SYNC_BUCKET_BYTES) / dl_dtype_size(DL_F32));
    double value_bytes = (double)dl_dtype_size(l->grad_dtype); /* a gradient value on the wire */
    for (int s = 0; !rc && s < P; s++) {
        double dense = 0, experts = 0, tp_rank = 0, ep_rank = 0;
        for (int st = s; st < S; st += P) {
            for (int i = l->first[st]; i < l->first[st + 1]; i++) {
                dense += (double)(v->params[i] - v->expert_params[i]);
                experts += (double)(v->expert_params[i] / eg.E);
            }
            tp_rank += tp[st];
            ep_rank += ep[st];
        }
        double values = dense + experts;
        int crosses = 0;
        for (long r = (long)s * T * D; r < (long)(s + 1) * T * D && r < world; r++)
            crosses |= !dl_machine_same_node(m, (long)s * T * D, r);
        gg.crosses = crosses && D > 1;
        double a = group_allreduce(m, &gg, 0, value_bytes * dense) +
                   (experts > 0 ? group_allreduce(m, &gg, 1, value_bytes * experts) : 0);
        if (l->zero == 3 && D > 1) /* the weights gathered in forward and backward: an allgather more */
            a *= 1.5;
        double e = a;
        if (layer_bwd && !m->comm_shares_cores) {
            double unused_tp = 0, unused_ep = 0;
            for (int i = l->first[s]; i < l->first[s + 1]; i++)
                layer_bwd[i] = layer_pass(t, v, &eg, m, i, 1, b, &unused_tp, &unused_ep);
            e = overlapped_allreduce(m, v, layer_bwd, l->first[s], l->first[s + 1], per > 0 ? per : 1, &gg,
                                     value_bytes, &a);
        }
        dp = a > dp ? a : dp;
        exposed = e > exposed ? e : exposed;
        double update = values * t->optim_per_param * (m->compute_scale > 1 ? m->compute_scale : 1);
        if (l->zero && D > 1) /* ZeRO: each rank updates its block */
            update /= D;
        out->optim_s = update > out->optim_s ? update : out->optim_s;
        if (tp_rank > tp_max)
            tp_max = tp_rank;
        if (ep_rank > ep_max)
            ep_max = ep_rank;
    }
    free(layer_bwd);
    if (!rc) {
        out->makespan_s = makespan;
        out->dp_s = dp;
        out->dp_exposed_s = exposed;
        out->tp_s = tp_max;
        out->ep_s = ep_max;
        out->bubble = P > 1 ? idle : 0;
        out->step_s = makespan + exposed + out->optim_s;
        out->samples_per_s = out->step_s > 0 ? batch / out->step_s : 0;
        out->comm_share = out->step_s > 0 ? (tp_max + ep_max + exposed) / out->step_s : 0;
    }
    dl_schedule_free(&sched);
    free(fwd), free(bwd), free(tp), free(busy), free(wgt), free(ep);
    return rc;
}
