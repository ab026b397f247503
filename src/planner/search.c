/* search.c: exhaustive search over grids, chunks and schedules, with
 * stage cuts by dynamic programming (see search.h). */
#include "planner/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cuts.h"
#include "exec/exec.h"
#include "planner/layout_memory.h"

void dl_plan_result_free(struct dl_plan_result *r)
{
    free(r->c);
    free(r->rank);
    memset(r, 0, sizeof *r);
}

const char *dl_layout_schedule_str(const struct dl_plan_layout *l, char *buf, size_t size)
{
    if (dl_layout_V(l) > 1)
        snprintf(buf, size, "%s:%d", dl_schedule_kind_name(l->schedule), dl_layout_V(l));
    else
        snprintf(buf, size, "%s", dl_schedule_kind_name(l->schedule));
    return buf;
}

const char *dl_layout_str(const struct dl_plan_layout *l, char *buf, size_t size)
{
    char grid[64], sched[32];
    int len;
    if (l->dims.pp > 1)
        len = snprintf(buf, size, "%s %s x%d", dl_grid_str(&l->dims, grid, sizeof grid),
                       dl_layout_schedule_str(l, sched, sizeof sched), l->chunks);
    else
        len = snprintf(buf, size, "%s", dl_grid_str(&l->dims, grid, sizeof grid));
    if (l->bucket_bytes && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, " buckets %zuM", l->bucket_bytes >> 20);
    if (l->grad_dtype == DL_BF16 && l->dims.dp > 1 && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, " bf16 gradients");
    if (l->zero && l->dims.dp > 1 && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, " zero%d", l->zero);
    if (l->dims.sp && l->dims.tp > 1 && len > 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, " sequence-parallel");
    if (l->recompute && len > 0 && (size_t)len < size)
        snprintf(buf + len, size - (size_t)len, " recompute");
    return buf;
}

/* Appends a candidate. */
static struct dl_plan_candidate *push(struct dl_plan_result *r, int *cap, struct dl_error *err)
{
    if (r->n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        struct dl_plan_candidate *c = realloc(r->c, sizeof *c * (size_t)nc);
        if (!c) {
            dl_errorf(err, DL_ERR_NOMEM, "out of memory in the planner's search");
            return NULL;
        }
        r->c = c;
        *cap = nc;
    }
    struct dl_plan_candidate *c = &r->c[r->n++];
    memset(c, 0, sizeof *c);
    return c;
}

/* The cuts of layout l for per-layer costs and memories of one chunk (the
 * loss with the layer before it). */
static int cut(const struct dl_graph *g, const struct dl_tp_view *v, const struct dl_plan_request *req,
               double b, struct dl_plan_layout *l, double *cost, double *mem, struct dl_error *err)
{
    dl_layout_layer_costs(g, req->times, v, req->machine, &l->dims, b, cost);
    int n = g->n - 1;
    for (int i = 0; i < g->n; i++)
        mem[i] = 12.0 * dl_layout_rank_params(v, &l->dims, i) +
                 4.0 * (double)dl_shape_count(g->layers[i].out_shape) * b * v->share[i];
    cost[n - 1] += cost[n];
    mem[n - 1] += mem[n];
    int rc = dl_cuts_balance(cost, mem, n, dl_layout_stages(l), l->first, NULL, NULL, err);
    l->first[dl_layout_stages(l)] = g->n;
    return rc;
}

/* Predicts and sizes candidate c (its layout's cuts set) with the arenas
 * and parameters of its pipeline ranks (shared by the schedules; NULL:
 * memory not wanted). */
static int evaluate(const struct dl_plan_request *req, const struct dl_tp_view *v, const size_t *arena,
                    const size_t *params, int *slots, struct dl_plan_candidate *c, struct dl_error *err)
{
    int rc = dl_layout_predict(req->g, req->times, v, req->machine, &c->layout, req->batch, &c->pred, err);
    if (!rc && arena)
        rc = dl_layout_slots(&c->layout, slots, err);
    if (rc)
        return rc;
    if (arena)
        c->memory = dl_layout_memory_of(c->layout.dims.pp, dl_layout_V(&c->layout), arena, params, slots, NULL);
    c->feasible = 1;
    if (req->memory_limit && c->memory > req->memory_limit) {
        c->feasible = 0;
        c->over_memory = 1;
        snprintf(c->why, sizeof c->why, "needs %zu bytes per rank, over --memory-per-rank %zu", c->memory,
                 req->memory_limit);
    }
    return DL_OK;
}

#define DL_PLAN_MAX_V 4 /* the most stages a pipeline rank holds in a layout tried */

/* A layout over the memory limit made smaller step by step, each step a
 * candidate of its own, until one fits: sequence parallelism (tensor ranks
 * on a network of sequences: the same bytes, no time in the model), ZeRO
 * stage 1 then 2 over the data-parallel ranks (stage 2 without a
 * pipeline; neither with expert ranks, which the trainer refuses; its sums
 * after backward, not hidden), then full recomputation
 * of the network file's blocks (their forward again), then ZeRO stage 3
 * (the weights too: an allgather more a step).  The ranking then takes
 * the fastest that fits. */
static int memory_savers(const struct dl_plan_request *req, const struct dl_tp_view *v,
                         const struct dl_plan_layout *base, struct dl_plan_result *r, int *cap, struct dl_error *err)
{
    const struct dl_graph *g = req->g;
    int P = base->dims.pp, D = base->dims.dp, T = base->dims.tp, blocks = 0;
    int zero_allowed = dl_grid_ep(&base->dims) == 1; /* the trainer refuses ZeRO with expert ranks */
    for (int i = 0; i < g->n; i++)
        blocks |= g->layers[i].block >= 0;
    size_t *arena = dl_calloc((size_t)P * DL_PLAN_MAX_V, sizeof *arena, err);
    size_t *params = dl_calloc((size_t)P, sizeof *params, err);
    int *slots = dl_calloc((size_t)P * DL_PLAN_MAX_V, sizeof *slots, err);
    int rc = arena && params && slots ? DL_OK : DL_ERR_NOMEM;
    struct dl_exec_options eo = req->eo ? *req->eo : (struct dl_exec_options){0};
    struct dl_plan_layout l = *base;
    size_t before = 0; /* the last step's memory */
    for (int step = 0, fits = 0; !rc && !fits && step < 5; step++) {
        if (step == 0 && T > 1 && g->positions > 1 && !l.dims.sp)
            l.dims.sp = 1;
        else if (step == 1 && zero_allowed && D > 1 && l.zero < 1)
            l.zero = 1;
        else if (step == 2 && zero_allowed && D > 1 && P == 1 && l.zero < 2)
            l.zero = 2;
        else if (step == 3 && blocks && !l.recompute)
            l.recompute = 1, eo.recompute = DL_RECOMPUTE_FULL;
        else if (step == 4 && zero_allowed && D > 1 && P == 1 && l.zero < 3) /* the weights too */
            l.zero = 3;
        else
            continue;
        rc = dl_layout_arenas(g, &l, req->batch, &eo, req->optim, arena, params, err);
        struct dl_plan_candidate *c = rc ? NULL : push(r, cap, err);
        if (!rc && !c)
            rc = DL_ERR_NOMEM;
        if (!rc) {
            c->layout = l;
            rc = evaluate(req, v, arena, params, slots, c, err);
            fits = !rc && c->feasible;
            if (!rc && step == 2 && before && c->memory >= before) /* buckets as large as the gradient: no gain */
                l.zero = 1;
            else if (!rc)
                before = c->memory;
        }
    }
    free(arena), free(params), free(slots);
    return rc;
}

/* The data-parallel buckets tried when the allreduce overlaps backward
 * (dp > 1, one chunk), after grad_sync's default (0). */
static const size_t bucket_choices[] = {(size_t)1 << 20, (size_t)4 << 20};
#define N_BUCKET_CHOICES ((int)(sizeof bucket_choices / sizeof *bucket_choices))

/* The schedules tried on a pipeline, in enumeration order (the first
 * alone without one); V: stages per rank. */
static const struct {
    enum dl_pipe_schedule kind;
    int V;
} variants[] = {{DL_SCHED_1F1B, 1}, {DL_SCHED_GPIPE, 1}, {DL_SCHED_ZB_H1, 1}, {DL_SCHED_INTERLEAVED, 2},
                {DL_SCHED_INTERLEAVED, DL_PLAN_MAX_V}};
#define N_VARIANTS ((int)(sizeof variants / sizeof *variants))

/* The candidates of grid (D, T, P) with E expert ranks (1: none). */
static int grid_candidates(const struct dl_plan_request *req, const struct dl_tp_view *v, const char *tp_error,
                           const struct dl_plan_layout *choice, int D, int T, int P, int E, struct dl_plan_result *r,
                           int *cap, double *cost, double *mem, struct dl_error *err)
{
    const struct dl_graph *g = req->g;
    struct dl_plan_layout base = {.dims = {D, T, P, req->sequence_parallel, E > 1 ? E : 0},
                                  .schedule = DL_SCHED_1F1B, .chunks = 1, .n_whole = choice->n_whole,
                                  .by_samples = choice->by_samples,
                                  .grad_dtype = req->grad_dtype, .zero = req->zero,
                                  .recompute = req->eo && req->eo->recompute == DL_RECOMPUTE_FULL};
    memcpy(base.whole, choice->whole, sizeof base.whole);
    const char *why = NULL;
    char msg[320];
    if (req->batch < D) {
        snprintf(msg, sizeof msg, "dp=%d needs a mini-batch of at least %d samples (--batch %d)", D, D, req->batch);
        why = msg;
    } else if (tp_error) {
        why = tp_error;
    } else if (P > g->n - 1) {
        snprintf(msg, sizeof msg, "pp=%d stages, but the network has %d layers before its loss", P, g->n - 1);
        why = msg;
    } else if (req->zero && E > 1) {
        snprintf(msg, sizeof msg, "--zero %d: not with expert ranks (ep=%d) yet", req->zero, E);
        why = msg;
    } else if (req->no_experts && E > 1) {
        why = req->no_experts;
    } else if (req->zero >= 2 && D > 1 && P > 1) {
        snprintf(msg, sizeof msg, "--zero %d does not run with a pipeline (pp=%d)", req->zero, P);
        why = msg;
    } else if (P > DL_SCHED_MAX_STAGES) {
        snprintf(msg, sizeof msg, "pp=%d is over the %d stages a schedule may have", P, DL_SCHED_MAX_STAGES);
        why = msg;
    }
    int local = dl_layout_local_batch(req->batch, D);
    if (!why && P > 1 && local < P) {
        snprintf(msg, sizeof msg, "pp=%d needs at least %d chunks, but a rank's part of the batch has %d samples",
                 P, P, local);
        why = msg;
    }
    if (!why && base.by_samples && local / (P > 1 ? P : 1) < T) {
        snprintf(msg, sizeof msg, "convolutions by samples over tp=%d need chunks of at least %d samples, but a "
                 "rank's part of the batch has %d", T, T, local);
        why = msg;
    }
    if (why) {
        struct dl_plan_candidate *c = push(r, cap, err);
        if (!c)
            return DL_ERR_NOMEM;
        c->layout = base;
        snprintf(c->why, sizeof c->why, "%s", why);
        return DL_OK;
    }
    for (int f = 1; f <= (P > 1 ? 8 : 1); f *= 2) {
        int M = P > 1 ? f * P : 1;
        if (M > local || M > DL_SCHED_MAX_CHUNKS || (base.by_samples && local / M < T))
            break;
        size_t *arena = dl_calloc((size_t)P * DL_PLAN_MAX_V, sizeof *arena, err);
        size_t *params = dl_calloc((size_t)P, sizeof *params, err);
        int *slots = dl_calloc((size_t)P * DL_PLAN_MAX_V, sizeof *slots, err);
        int rc = arena && params && slots ? DL_OK : DL_ERR_NOMEM;
        struct dl_plan_layout l = base, planned = {0}; /* planned: the layout the arenas are of */
        for (int k = 0; !rc && k < (P > 1 ? N_VARIANTS : 1); k++) {
            int S = P * variants[k].V;
            if (S > g->n - 1 || S > DL_SCHED_MAX_STAGES)
                continue;
            l.chunks = M;
            l.schedule = variants[k].kind;
            l.V = variants[k].V;
            if (dl_layout_stages(&l) != dl_layout_stages(&planned) || planned.chunks == 0)
                rc = cut(g, v, req, (double)local / M, &l, cost, mem, err);
            /* arenas follow the cuts, and zb-h1's backward in two passes */
            int replan = memcmp(l.first, planned.first, sizeof l.first) || planned.chunks == 0 ||
                         (l.schedule == DL_SCHED_ZB_H1) != (planned.schedule == DL_SCHED_ZB_H1);
            if (!rc && replan && !req->skip_memory)
                rc = dl_layout_arenas(g, &l, req->batch, req->eo, req->optim, arena, params, err);
            planned = l;
            struct dl_plan_candidate *c = rc ? NULL : push(r, cap, err);
            if (!rc && !c)
                rc = DL_ERR_NOMEM;
            int over = 0;
            if (!rc) {
                c->layout = l;
                rc = evaluate(req, v, req->skip_memory ? NULL : arena, params, slots, c, err);
                over = c->over_memory;
            }
            for (int q = 0; !rc && D > 1 && M == 1 && !req->zero && q < N_BUCKET_CHOICES; q++) { /* zero: no buckets */
                struct dl_plan_candidate *o = push(r, cap, err), *first = &r->c[r->n - 2 - q];
                if (!o) {
                    rc = DL_ERR_NOMEM;
                    break;
                }
                o->layout = first->layout;
                o->layout.bucket_bytes = bucket_choices[q];
                rc = evaluate(req, v, NULL, params, slots, o, err);
                /* buckets leave the memory as it is */
                o->memory = first->memory, o->feasible = first->feasible, o->over_memory = first->over_memory;
                memcpy(o->why, first->why, sizeof o->why);
            }
            if (!rc && over)
                rc = memory_savers(req, v, &l, r, cap, err);
        }
        free(arena), free(params), free(slots);
        if (rc)
            return rc;
    }
    return DL_OK;
}

/* Whether E > 1 expert ranks can hold g's experts (*fits): g has a layer
 * with experts, and each such layer's divide into E equal blocks (its
 * kind's expert_split on a scratch copy of its attributes). */
static int experts_divide(const struct dl_graph *g, int E, int *fits, struct dl_error *err)
{
    int any = 0, all = 1;
    for (int i = 0; i < g->n && all; i++) {
        const struct dl_layer *l = &g->layers[i];
        if (!l->kind->expert_split)
            continue;
        void *scratch = dl_calloc(1, l->kind->attr_size, err);
        if (!scratch)
            return DL_ERR_NOMEM;
        memcpy(scratch, l->attr, l->kind->attr_size);
        any = 1;
        all = l->kind->expert_split(l->attr, E, 0, scratch) == 0;
        free(scratch);
    }
    *fits = any && all;
    return DL_OK;
}

/* The candidates of grid (D, T, P): without expert ranks, then with each
 * E > 1 dividing D and every layer's experts, when the batch divides over
 * D (as the trainer wants it: every expert rank runs as many samples). */
static int grid_and_expert_candidates(const struct dl_plan_request *req, const struct dl_tp_view *v,
                                      const char *tp_error, const struct dl_plan_layout *choice, int D, int T, int P,
                                      struct dl_plan_result *r, int *cap, double *cost, double *mem,
                                      struct dl_error *err)
{
    int rc = grid_candidates(req, v, tp_error, choice, D, T, P, 1, r, cap, cost, mem, err);
    for (int E = 2; !rc && E <= D && req->batch % D == 0; E++) {
        int fits = 0;
        if (D % E == 0)
            rc = experts_divide(req->g, E, &fits, err);
        if (!rc && fits)
            rc = grid_candidates(req, v, tp_error, choice, D, T, P, E, r, cap, cost, mem, err);
    }
    return rc;
}

struct rank_key {
    double step_s;
    size_t memory;
    int index;
};

/* Faster first, then less memory, then enumeration order. */
static int by_prediction(const void *pa, const void *pb)
{
    const struct rank_key *x = pa, *y = pb;
    if (x->step_s != y->step_s)
        return x->step_s < y->step_s ? -1 : 1;
    if (x->memory != y->memory)
        return x->memory < y->memory ? -1 : 1;
    return x->index - y->index;
}

int dl_plan_search(const struct dl_plan_request *req, struct dl_plan_result *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    out->least_memory_at = -1;
    const int N = req->ranks;
    const struct dl_graph *g = req->g;
    double *cost = dl_calloc((size_t)g->n, sizeof *cost, err), *mem = dl_calloc((size_t)g->n, sizeof *mem, err);
    int cap = 0, rc = cost && mem ? DL_OK : DL_ERR_NOMEM;
    int first[DL_PLAN_MAX_PAIRS], second[DL_PLAN_MAX_PAIRS], n_pairs = dl_split_pairs(g, first, second);
    for (int T = 1; !rc && T <= N; T++) {
        if (N % T)
            continue;
        struct dl_layer_times measured;
        struct dl_error measure_err = {0};
        int have_times = 0;
        if (T > 1 && req->tensor_times) {
            int mrc = req->tensor_times(req->tensor_ctx, g, T, &measured, &measure_err);
            have_times = mrc == DL_OK;
            if (mrc == DL_ERR_NOMEM)
                *err = measure_err, rc = mrc;
        }
        /* with tensor ranks, every choice of splits for the fc pairs, and
         * (the bit above them) the convolutions by filters or by samples */
        int n_choices = n_pairs + dl_split_has_sample_choice(g);
        for (unsigned mask = 0; !rc && mask < (T > 1 ? 1u << n_choices : 1u); mask++) {
            struct dl_plan_layout choice = {.dims = {1, T, 1}, .first = {0, g->n}};
            choice.n_whole = dl_split_choice_layers(first, second, n_pairs, mask, choice.whole);
            choice.by_samples = n_choices > n_pairs && (mask >> n_pairs & 1u);
            struct dl_graph split;
            rc = dl_layout_staged_graph(g, &choice, &split, err);
            struct dl_tp_view v;
            struct dl_error tp_err = {0};
            char tp_msg[320] = "";
            int vrc = rc ? rc : dl_tp_view_make(&split, T, N, req->machine, &v, &tp_err);
            if (vrc == DL_ERR_NOMEM && !rc) {
                *err = tp_err;
                rc = vrc;
            }
            if (vrc && !rc)
                snprintf(tp_msg, sizeof tp_msg, "tp=%d: %s", T, tp_err.msg);
            if (!vrc && have_times)
                v.times = &measured;
            for (int P = 1; !rc && P <= N / T; P++)
                if ((N / T) % P == 0)
                    rc = grid_and_expert_candidates(req, vrc ? NULL : &v, vrc ? tp_msg : NULL, &choice, N / T / P,
                                                    T, P, out, &cap, cost, mem, err);
            if (!vrc)
                dl_tp_view_free(&v);
            if (split.layers != g->layers)
                free(split.layers);
        }
        if (have_times)
            dl_layer_times_free(&measured);
    }
    free(cost), free(mem);
    if (!rc) {
        out->rank = dl_calloc((size_t)(out->n > 0 ? out->n : 1), sizeof *out->rank, err);
        rc = out->rank ? DL_OK : DL_ERR_NOMEM;
    }
    for (int i = 0; !rc && i < out->n; i++) {
        const struct dl_plan_candidate *c = &out->c[i];
        if (c->feasible)
            out->rank[out->n_feasible++] = i;
        else if (c->over_memory && (out->least_memory_at < 0 || c->memory < out->least_memory))
            out->least_memory = c->memory, out->least_memory_at = i;
    }
    struct rank_key *keys = rc ? NULL : dl_calloc((size_t)(out->n_feasible + 1), sizeof *keys, err);
    if (!rc && !keys)
        rc = DL_ERR_NOMEM;
    if (!rc) {
        for (int i = 0; i < out->n_feasible; i++)
            keys[i] = (struct rank_key){out->c[out->rank[i]].pred.step_s, out->c[out->rank[i]].memory, out->rank[i]};
        qsort(keys, (size_t)out->n_feasible, sizeof *keys, by_prediction);
        for (int i = 0; i < out->n_feasible; i++)
            out->rank[i] = keys[i].index;
    }
    free(keys);
    if (rc)
        dl_plan_result_free(out);
    return rc;
}
