/* shard.c: a rank's view of the network (see shard.h): its pipeline
 * stages, each layer's split over the tensor group (decided by
 * tp_split.c, layer by layer in topological order), the attributes,
 * shapes and parameters of its part that follow from the split, where each
 * local parameter sits in the whole tensor, and the tensors that cross a
 * stage cut. */
#include "plan/shard.h"
#include "plan/tp_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int local_view(struct dl_shard *s, int i, void *local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    const struct dl_shard_layer *L = &s->layer[i];
    struct dl_layer *v = &s->local.layers[i];
    int T = s->dims.tp;
    *v = *l;
    v->attr = local_attr;
    for (int k = 0; k < l->n_in; k++) {
        struct dl_shape whole = l->in_shape[k];
        int as_is = L->in[k] == DL_TP_IN_AS_IS && L->rows_in[k] != DL_TP_IN_GATHER_ROWS && l->in[k] != DL_GRAPH_INPUT;
        v->in_shape[k] = as_is ? s->local.layers[l->in[k]].out_shape : whole;
        if (L->in[k] == DL_TP_IN_SLICE)
            v->in_shape[k].c = whole.c / T;
        if (L->rows_in[k] == DL_TP_IN_SLICE_ROWS) {
            int lo;
            dl_shard_band(whole.h, T, s->pos.t, &lo, &v->in_shape[k].h);
        }
        v->in_shape[k].h += 2 * L->halo;
    }
    struct dl_error e = {0};
    if (l->kind->infer(v->attr, v->n_in, v->in_shape, &v->out_shape, &e))
        return dl_errorf(err, DL_ERR_INTERNAL, "layer '%s': its part for %d tensor ranks: %s", l->name, T, e.msg);
    v->param = NULL;
    v->n_params = dl_op_param_descs(l->kind, v->attr, v->in_shape, v->out_shape, &v->param, err);
    if (v->n_params < 0) {
        v->n_params = 0;
        return DL_ERR_NOMEM;
    }
    v->flops = l->kind->flops ? l->kind->flops(v->attr, v->in_shape, v->out_shape) : 0;
    struct dl_shard_layer *W = &s->layer[i];
    free(W->slice);
    W->slice = v->n_params ? dl_calloc((size_t)v->n_params, sizeof *W->slice, err) : NULL;
    if (v->n_params && !W->slice)
        return DL_ERR_NOMEM;
    if (L->split_out) /* its block's first channel: t C / T (equal blocks: t times its own) */
        W->channel0 = (long)s->pos.t * l->out_shape.c / T;
    for (int j = 0; j < v->n_params; j++) {
        struct dl_param_desc *p = &v->param[j];
        int dim = !dl_dtype_traits(p->dtype)->is_float ? -1 /* a counter: whole on every rank */
                  : L->by_output || L->by_vocab || (L->split_out && !L->by_input && !L->by_heads) ? 0
                  : L->by_input && j == 0                                                      ? 1
                                                                                               : -1;
        int G = dim == 0 ? dl_tp_groups_of(s, i) : dim == 1 ? dl_tp_input_groups(s, l, 0) : 1;
        long count = dim < 0 ? p->count : p->dims[dim] / G;
        long extent = dim < 0 ? 0 : l->param[j].dims[dim] / G; /* of a group, whole */
        W->slice[j] = dim < 0 ? (struct dl_param_slice){-1, 0, p->count, 1}
                              : (struct dl_param_slice){dim, (long)s->pos.t * extent / T, count, G};
        if (p->per_expert && dl_grid_ep(&s->dims) > 1) /* block d % ep of the experts */
            W->slice[j] = (struct dl_param_slice){0, (long)(s->pos.d % s->dims.ep) * p->dims[0], p->dims[0], 1};
        /* tied: the owner's slice of it (tied_alike) */
        p->shares = l->param[j].shares;
        p->share_layer = l->param[j].share_layer;
        p->share_param = l->param[j].share_param;
        /* the owner on another rank's stage: a copy here */
        p->replica = p->shares && dl_shard_runs(s, i) && !dl_shard_runs(s, p->share_layer);
    }
    return DL_OK;
}

long dl_param_slice_index(const struct dl_param_desc *p, const struct dl_param_slice *sl, long i)
{
    if (sl->dim < 0)
        return i;
    long stride = 1;
    for (int d = sl->dim + 1; d < p->ndim; d++)
        stride *= p->dims[d];
    int G = sl->groups > 1 ? sl->groups : 1;
    long extent = p->dims[sl->dim], coord = i / stride % extent, group = coord / (extent / G),
         in_group = coord % (extent / G);
    if (in_group < sl->offset || in_group >= sl->offset + sl->count)
        return -1;
    return i / (stride * extent) * (G * sl->count * stride) + (group * sl->count + in_group - sl->offset) * stride +
           i % stride;
}

const char *dl_shard_describe(const struct dl_shard *s, int i, char *buf, size_t size)
{
    const struct dl_shard_layer *L = &s->layer[i];
    const char *what = L->by_output                 ? "outputs"
                       : L->by_vocab                ? "vocabulary, partial sums"
                       : L->by_heads                ? "heads"
                       : L->by_input                ? "inputs, partial sums"
                       : L->split_classes           ? "classes (no gather)"
                       : L->split_out               ? "follows channel blocks"
                       : L->split == DL_SPLIT_HEIGHT ? "height, halo"
                       : L->split_rows && s->dims.sp && dl_shape_rank(s->g->layers[i].out_shape) == 2
                                                    ? "positions (sequence parallel)"
                       : L->split_rows              ? "follows row bands"
                       : L->split == DL_SPLIT_BATCH ? "batch share"
                                                    : "whole";
    int n = snprintf(buf, size, "%s", what);
    if (L->split_out && dl_tp_groups_of(s, i) > 1)
        n += snprintf(buf + n, size - (size_t)n, " (by %d groups: q, k, v)", dl_tp_groups_of(s, i));
    if (L->split == DL_SPLIT_HEIGHT)
        n += snprintf(buf + n, size - (size_t)n, " %d", L->halo);
    for (int j = 0; j < s->local.layers[i].n_params && (size_t)n < size; j++)
        if (s->local.layers[i].param[j].per_expert && L->slice[j].dim == 0) { /* expert ranks: its block */
            n += snprintf(buf + n, size - (size_t)n, "; experts %ld-%ld of %d", L->slice[j].offset,
                          L->slice[j].offset + L->slice[j].count - 1, s->g->layers[i].param[j].dims[0]);
            break;
        }
    for (int k = 0; k < s->g->layers[i].n_in && (size_t)n < size; k++) { /* the adapters in the order they run */
        const char *step[5] = {L->batch_in[k] == DL_TP_IN_GATHER_BATCH ? "batch gathered" : NULL,
                               L->rows_in[k] == DL_TP_IN_GATHER_ROWS ? "rows gathered" : NULL,
                               L->in[k] == DL_TP_IN_GATHER ? "gathered" : L->in[k] == DL_TP_IN_SLICE ? "sliced" : NULL,
                               L->rows_in[k] == DL_TP_IN_SLICE_ROWS ? "rows sliced" : NULL,
                               L->batch_in[k] == DL_TP_IN_SLICE_BATCH ? "batch sliced" : NULL};
        for (int j = 0, first = 1; j < 5 && (size_t)n < size; j++)
            if (step[j]) {
                n += first ? snprintf(buf + n, size - (size_t)n, "; input %d: %s", k, step[j])
                           : snprintf(buf + n, size - (size_t)n, ", %s", step[j]);
                first = 0;
            }
    }
    return buf;
}

void dl_shard_free(struct dl_shard *s)
{
    for (int i = 0; s->local.layers && s->g && i < s->g->n; i++) {
        if (s->local.layers[i].attr != s->g->layers[i].attr)
            free(s->local.layers[i].attr);
        if (s->local.layers[i].param != s->g->layers[i].param)
            free(s->local.layers[i].param);
    }
    for (int i = 0; s->layer && s->g && i < s->g->n; i++)
        free(s->layer[i].slice);
    free(s->local.layers);
    free(s->layer);
    free(s->edge);
    dl_stages_free(&s->stages);
    memset(s, 0, sizeof *s);
}

/* Every (layer, later stage reading it) pair, in layer then stage order. */
static int find_edges(struct dl_shard *s, struct dl_error *err)
{
    const struct dl_graph *g = s->g;
    int S = s->stages.S;
    unsigned char *reads = calloc((size_t)g->n * (size_t)S, 1);
    if (!reads)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory planning the shard");
    for (int j = 0; j < g->n; j++)
        for (int k = 0; k < g->layers[j].n_in; k++) {
            int p = g->layers[j].in[k];
            if (p != DL_GRAPH_INPUT && s->layer[p].stage != s->layer[j].stage)
                reads[(size_t)p * (size_t)S + (size_t)s->layer[j].stage] = 1;
        }
    for (size_t i = 0; i < (size_t)g->n * (size_t)S; i++)
        s->n_edges += reads[i];
    s->edge = calloc((size_t)s->n_edges + 1, sizeof *s->edge);
    if (!s->edge) {
        free(reads);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory planning the shard");
    }
    int n = 0;
    for (size_t i = 0; i < (size_t)g->n * (size_t)S; i++)
        if (reads[i])
            s->edge[n++] = (struct dl_stage_edge){(int)(i / (size_t)S), (int)(i % (size_t)S)};
    free(reads);
    return DL_OK;
}

int dl_shard_edge(const struct dl_shard *s, int layer, int to)
{
    for (int e = 0; e < s->n_edges; e++)
        if (s->edge[e].layer == layer && s->edge[e].to == to)
            return e;
    return -1;
}

/* Expert parallelism: a layer with experts holds block d % ep of them, in
 * new attributes of its own (*local_attr, owned by the shard). */
static int expert_split(struct dl_shard *s, int i, void **local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    int ep = dl_grid_ep(&s->dims);
    if (ep == 1 || !l->kind->expert_split)
        return DL_OK;
    void *mine = dl_calloc(1, l->kind->attr_size, err);
    if (!mine)
        return DL_ERR_NOMEM;
    memcpy(mine, *local_attr, l->kind->attr_size);
    if (*local_attr != l->attr)
        free(*local_attr);
    *local_attr = mine;
    if (l->kind->expert_split(l->attr, ep, s->pos.d % ep, mine))
        return dl_errorf(err, DL_ERR_SPEC, "layer '%s' (%s): its experts do not divide into ep=%d equal blocks",
                         l->name, l->kind->name, ep);
    return DL_OK;
}

/* A tied parameter is the same slice in both layers under tensor
 * parallelism (decide_linear splits a tied layer as its owner, or keeps
 * both whole): each tensor rank holds it and sums both layers' gradients,
 * as one process does (or, the layers in stages of two ranks, each holds
 * a copy: op.h's replica). */
static int tied_alike(const struct dl_shard *s, int i, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    for (int j = 0; j < l->n_params; j++) {
        const struct dl_param_desc *p = &l->param[j];
        if (!p->shares)
            continue;
        int o = p->share_layer;
        const struct dl_param_slice *a = &s->layer[i].slice[j], *b = &s->layer[o].slice[p->share_param];
        if (a->dim != b->dim || (a->dim >= 0 && (a->offset != b->offset || a->count != b->count ||
                                                 a->groups != b->groups)))
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s': its %s is layer '%s''s (share:), but tensor "
                             "parallelism splits them differently; leave split out on both, or set split: none "
                             "on both", l->name, p->name, s->g->layers[o].name);
    }
    return DL_OK;
}

int dl_shard_make(const struct dl_graph *g, const struct dl_grid_dims *dims, int V, int rank, const double *cost,
                  struct dl_shard *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    struct dl_shard *s = out;
    s->g = g;
    s->dims = *dims;
    s->pos = dl_grid_position(dims, rank);
    s->local = *g;
    s->local.layers = calloc((size_t)g->n, sizeof *s->local.layers);
    s->layer = calloc((size_t)g->n, sizeof *s->layer);
    if (!s->local.layers || !s->layer) {
        dl_shard_free(s);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory planning the shard");
    }
    s->V = V;
    int rc = dl_stages_cut(g, dims->pp, V, cost, &s->stages, err);
    for (int i = 0; !rc && i < g->n; i++)
        s->layer[i].stage = dl_stages_of(&s->stages, i);
    for (int i = 0; !rc && i < g->n; i++) {
        void *local_attr = g->layers[i].attr;
        rc = dl_tp_split_layer(s, i, &local_attr, err);
        if (rc)
            break;
        rc = expert_split(s, i, &local_attr, err);
        if (rc) {
            if (local_attr != g->layers[i].attr) /* not the view's yet */
                free(local_attr);
            break;
        }
        rc = local_view(s, i, local_attr, err);
    }
    for (int i = 0; !rc && i < g->n; i++)
        rc = tied_alike(s, i, err);
    if (!rc)
        rc = find_edges(s, err);
    if (rc)
        dl_shard_free(s);
    return rc;
}

int dl_shard_whole(const struct dl_graph *g, struct dl_shard *out, struct dl_error *err)
{
    const struct dl_grid_dims one = {1, 1, 1};
    return dl_shard_make(g, &one, 1, 0, NULL, out, err);
}
