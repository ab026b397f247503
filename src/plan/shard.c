/* shard.c: a rank's view of the network (see shard.h).  The splits are
 * decided in topological order from each layer's `split:` key and how its
 * inputs are spread: every rank decides the same for every layer, so the
 * plan is the same on all ranks without any message.  The default rule,
 * the same for convolutions and fully connected layers: a whole input
 * splits the layer by its outputs (filters, columns) when the tensor ranks
 * divide them, a split input by its inputs (channels, rows), whose partial
 * outputs are summed into a whole tensor again.  So fc layers pair up
 * column/row as in Megatron-LM, convolutions alternate filters/channels as
 * in Dryden et al. 2019, and an fc after a split convolution takes its
 * channel blocks as row blocks.  Channel-local layers follow their inputs;
 * a loss that can (split_classes) reads split class scores as they are;
 * anything else reads whole tensors.  A convolution with `split: height`
 * takes bands of rows (Dryden et al., IPDPS 2019), and the convolutions and
 * row-local layers after it keep them while they can; other layers read
 * the bands gathered.  A layer with `split: batch` runs whole on this
 * rank's share of the samples; the layers after it that treat samples
 * independently (all but a loss) keep the share, other layers read the
 * shares gathered.  With sequence parallelism (dims.sp; Korthikanti et al.
 * 2022) a layer on sequences that treats positions independently (row-
 * local: layer norm, residual adds) runs on a band of the positions, as
 * for a height split: whole inputs cut to the band, and the band's layers
 * after it keep it until a layer needs them all (the next linear), which
 * reads them gathered. */
#include "plan/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_output_request(enum dl_split s)
{
    return s == DL_SPLIT_COLUMN || s == DL_SPLIT_FILTERS;
}

static int by_input_request(enum dl_split s)
{
    return s == DL_SPLIT_ROW || s == DL_SPLIT_CHANNELS;
}

/* The distribution of input k of layer i: 1 when split into channel blocks. */
static int input_split(const struct dl_shard *s, const struct dl_layer *l, int k)
{
    return l->in[k] != DL_GRAPH_INPUT && s->layer[l->in[k]].split_out;
}

/* The channel groups of layer i's split output (shard.h's groups). */
static int groups_of(const struct dl_shard *s, int i)
{
    return s->layer[i].groups > 1 ? s->layer[i].groups : 1;
}

/* The groups of input k of layer l when it is split, else 1. */
static int input_groups(const struct dl_shard *s, const struct dl_layer *l, int k)
{
    return input_split(s, l, k) ? groups_of(s, l->in[k]) : 1;
}

/* The groups layer i's output should be split in for the layers that read
 * it: the packing of every reader split by heads (3: q, k and v in one
 * tensor), when they agree and the tensor ranks divide each group; else 1. */
static int groups_for_readers(const struct dl_shard *s, int i)
{
    const struct dl_graph *g = s->g;
    int want = 0, T = s->dims.tp;
    for (int j = i + 1; j < g->n; j++)
        for (int k = 0; k < g->layers[j].n_in; k++) {
            const struct dl_layer *r = &g->layers[j];
            if (r->in[k] != i)
                continue;
            int G = 1;
            if (r->kind->tp_heads && r->split == DL_SPLIT_AUTO) {
                char scratch[256];
                G = r->attr && r->kind->attr_size <= sizeof scratch ? r->kind->tp_heads(r->attr, r->n_in, T, 0, scratch)
                                                                      : 1;
            }
            if (G < 1 || (want && want != G))
                return 1;
            want = G;
        }
    return want > 1 && g->layers[i].out_shape.c % (want * T) == 0 ? want : 1;
}

/* 1 when layer i holds a parameter tied to another layer's (share:), or
 * one another layer's is tied to. */
static int tied(const struct dl_graph *g, int i)
{
    for (int j = 0; j < g->layers[i].n_params; j++)
        if (g->layers[i].param[j].shares)
            return 1;
    for (int k = 0; k < g->n; k++)
        for (int j = 0; j < g->layers[k].n_params; j++)
            if (g->layers[k].param[j].shares && g->layers[k].param[j].share_layer == i)
                return 1;
    return 0;
}

/* 1 when input k of layer l is split into bands of rows. */
static int input_rows(const struct dl_shard *s, const struct dl_layer *l, int k)
{
    return l->in[k] != DL_GRAPH_INPUT && s->layer[l->in[k]].split_rows;
}

/* 1 when input k of layer l is this rank's share of the samples. */
static int input_batch(const struct dl_shard *s, const struct dl_layer *l, int k)
{
    return l->in[k] != DL_GRAPH_INPUT && s->layer[l->in[k]].split_batch;
}

/* Layer i whole (attributes in local_attr) on this rank's share of the
 * samples: split inputs gathered whole first, whole ones cut to the share. */
static void split_by_batch(struct dl_shard *s, int i, void *local_attr)
{
    const struct dl_layer *l = &s->g->layers[i];
    struct dl_shard_layer *L = &s->layer[i];
    if (local_attr != l->attr)
        memcpy(local_attr, l->attr, l->kind->attr_size);
    L->split = DL_SPLIT_BATCH;
    L->split_batch = 1;
    for (int k = 0; k < l->n_in; k++) {
        L->in[k] = input_split(s, l, k) ? DL_TP_IN_GATHER : DL_TP_IN_AS_IS;
        L->rows_in[k] = input_rows(s, l, k) ? DL_TP_IN_GATHER_ROWS : DL_TP_IN_AS_IS;
        L->batch_in[k] = input_batch(s, l, k) ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE_BATCH;
    }
}

/* Inputs of layer l that are shares of the samples gathered into the
 * whole batch (the layer then sees whole inputs). */
static void gather_batch_inputs(struct dl_shard *s, const struct dl_layer *l, struct dl_shard_layer *L)
{
    for (int k = 0; k < l->n_in; k++)
        if (input_batch(s, l, k))
            L->batch_in[k] = DL_TP_IN_GATHER_BATCH;
}

static int refuse(const struct dl_layer *l, const char *why, struct dl_error *err)
{
    return dl_errorf(err, DL_ERR_SPEC, "layer '%s' (%s), split %s: %s", l->name, l->kind->name,
                     dl_split_names[l->split], why);
}

/* Why layer l cannot be split by height over the tensor ranks (NULL: it
 * can; then local_attr holds its part's attributes and *halo the rows it
 * needs from each neighbour): its kind, its attributes, or bands thinner
 * than the halo (a neighbour's band must hold it; buf holds that message). */
static const char *height_misfit(const struct dl_shard *s, const struct dl_layer *l, void *local_attr, int *halo,
                                 char *buf, size_t size)
{
    int H = l->in_shape[0].h, T = s->dims.tp;
    if (!l->kind->height_split)
        return "only stride-1 'same' convolutions are split by height; element-wise layers, add and batch norm "
               "follow a height-split input";
    const char *why = l->kind->height_split(l->attr, l->in_shape[0], local_attr, halo);
    if (why)
        return why;
    if (H < T)
        snprintf(buf, size, "its %d rows are fewer than the %d tensor ranks", H, T);
    else if (H / T < *halo)
        snprintf(buf, size, "bands of %d of its %d rows on %d tensor ranks are thinner than the %d rows its "
                 "window reads from each neighbour", H / T, H, T, *halo);
    else
        return NULL;
    return buf;
}

/* A layer with weights split by height (bands of rows, halos from the
 * neighbours, weight gradients summed over the group), by its outputs or
 * inputs, or kept whole.  Auto keeps a row-split input split when the
 * layer fits (else the bands are gathered and the channel rule applies). */
static int decide_linear(struct dl_shard *s, int i, void *local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    struct dl_shard_layer *L = &s->layer[i];
    int T = s->dims.tp, sh = input_split(s, l, 0), rows = input_rows(s, l, 0);
    enum dl_split want = l->split;
    if (want == DL_SPLIT_BATCH) {
        split_by_batch(s, i, local_attr);
        return DL_OK;
    }
    gather_batch_inputs(s, l, L);
    if (want == DL_SPLIT_HEIGHT || (want == DL_SPLIT_AUTO && rows)) {
        char buf[200];
        int halo = 0;
        const char *why = height_misfit(s, l, local_attr, &halo, buf, sizeof buf);
        if (!why) {
            L->split = DL_SPLIT_HEIGHT;
            L->split_rows = 1;
            L->halo = halo;
            L->rows_in[0] = rows ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE_ROWS;
            L->in[0] = sh ? DL_TP_IN_GATHER : DL_TP_IN_AS_IS;
            return DL_OK;
        }
        if (want == DL_SPLIT_HEIGHT)
            return refuse(l, why, err);
    }
    if (rows) /* whole again, then as a whole input */
        L->rows_in[0] = DL_TP_IN_GATHER_ROWS;
    /* 0 whole, 1 by outputs, 2 by inputs; auto takes a split input as it is */
    int mode = by_output_request(want) ? 1 : by_input_request(want) ? 2 : want == DL_SPLIT_AUTO ? (sh ? 2 : 1) : 0;
    const struct dl_param_desc *own = l->param[0].shares ? &l->param[0] : NULL; /* a tied weight: its owner's slice */
    int uneven = 0; /* as an owner split in unequal bands */
    if (want == DL_SPLIT_AUTO && mode && own && s->layer[own->share_layer].slice[own->share_param].dim == 0) {
        mode = 1; /* split as the owner (a vocabulary-parallel embedding: the head's columns) */
        uneven = s->layer[own->share_layer].uneven;
    } else if (want == DL_SPLIT_AUTO && mode && tied(s->g, i)) {
        L->whole_because = own ? "its weight is tied to another layer's (share:), which stays whole"
                               : "another layer's weight is tied to it (share:), so it stays whole";
        mode = 0;
    }
    if (mode == 2 && l->in_shape[0].c % T) {
        char why[160];
        snprintf(why, sizeof why, "%d tensor ranks do not divide its %d input channels", T, l->in_shape[0].c);
        if (want != DL_SPLIT_AUTO)
            return refuse(l, why, err);
        mode = 1;
    }
    long U = l->out_shape.c;
    if (uneven) /* the owner's band of the rows: outputs [t U / T, (t+1) U / T) */
        l->kind->tp_outputs(l->attr, s->pos.t * U / T, (s->pos.t + 1) * U / T, local_attr);
    else if (mode && l->kind->tp_split(l->attr, mode == 1, T, s->pos.t == 0, local_attr) != 0) {
        if (want != DL_SPLIT_AUTO) {
            char why[160];
            snprintf(why, sizeof why, "%d tensor ranks do not divide its %d outputs (or it is a grouped convolution)",
                     T, l->out_shape.c);
            return refuse(l, why, err);
        }
        L->whole_because = "the tensor ranks do not divide its outputs (or it is a grouped convolution)";
        mode = 0;
    }
    if (!mode)
        memcpy(local_attr, l->attr, l->kind->attr_size);
    L->split = mode == 1 ? DL_SPLIT_COLUMN : mode == 2 ? DL_SPLIT_ROW : DL_SPLIT_NONE;
    L->by_output = mode == 1;
    L->by_input = mode == 2;
    L->split_out = mode == 1;
    L->uneven = uneven;
    L->groups = mode == 1 && !uneven ? groups_for_readers(s, i) : 1;
    L->partial = mode == 2;
    L->in[0] = mode == 2 ? (sh ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE) : (sh ? DL_TP_IN_GATHER : DL_TP_IN_AS_IS);
    L->in_groups[0] = input_groups(s, l, 0);
    return DL_OK;
}

/* A layer over heads (op.h's tp_heads: attention) runs whole heads, block
 * t of each of its inputs' channel groups: its inputs as they come when
 * split in those groups, whole ones cut so; its output is split into
 * plain blocks (the heads side by side).  Heads the tensor ranks do not
 * divide are refused; inputs split otherwise are read whole. */
static int decide_heads(struct dl_shard *s, int i, void *local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    struct dl_shard_layer *L = &s->layer[i];
    int T = s->dims.tp, G = l->kind->tp_heads(l->attr, l->n_in, T, s->pos.t, local_attr);
    if (G < 1) {
        char why[160];
        snprintf(why, sizeof why, "%d tensor ranks do not divide its heads (each rank runs whole heads)", T);
        return refuse(l, why, err);
    }
    gather_batch_inputs(s, l, L);
    int fits = 1;
    for (int k = 0; k < l->n_in; k++) {
        if (input_rows(s, l, k))
            L->rows_in[k] = DL_TP_IN_GATHER_ROWS, fits = 0;
        if (input_split(s, l, k) && input_groups(s, l, k) != G)
            fits = 0;
    }
    if (!fits) {
        memcpy(local_attr, l->attr, l->kind->attr_size);
        L->whole_because = "its inputs are not split by heads (they are gathered whole)";
        for (int k = 0; k < l->n_in; k++) {
            L->in[k] = input_split(s, l, k) ? DL_TP_IN_GATHER : DL_TP_IN_AS_IS;
            L->in_groups[k] = input_groups(s, l, k);
        }
        return DL_OK;
    }
    L->by_heads = 1;
    L->split_out = 1;
    L->groups = 1;
    for (int k = 0; k < l->n_in; k++) {
        L->in[k] = input_split(s, l, k) ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE;
        L->in_groups[k] = G;
    }
    return DL_OK;
}

/* 1 when every layer tied to layer i's weight can split its outputs in
 * any bands (tp_outputs) and every reader of theirs is a loss reading
 * split classes as they are: a vocabulary the tensor ranks do not divide
 * splits into unequal bands, which nothing may gather. */
static int bands_read_as_they_are(const struct dl_shard *s, int i)
{
    const struct dl_graph *g = s->g;
    for (int u = i + 1; u < g->n; u++) {
        const struct dl_layer *l = &g->layers[u];
        if (!(l->n_params && l->param[0].shares && l->param[0].share_layer == i))
            continue;
        if (!l->kind->tp_outputs || l->split != DL_SPLIT_AUTO)
            return 0;
        for (int r = u + 1; r < g->n; r++)
            for (int k = 0; k < g->layers[r].n_in; k++)
                if (g->layers[r].in[k] == u &&
                    (!g->layers[r].kind->split_classes || g->layers[r].split != DL_SPLIT_AUTO ||
                     l->out_shape.c / s->dims.tp < 2))
                    return 0;
    }
    return 1;
}

/* A lookup table (op.h's tp_vocab) split by its rows: the ids whole on
 * every rank, its output a partial sum, summed over the group. */
static int decide_vocab(struct dl_shard *s, int i, void *local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    struct dl_shard_layer *L = &s->layer[i];
    gather_batch_inputs(s, l, L);
    int T = s->dims.tp, uneven = l->param[0].dims[0] % T != 0;
    if (l->kind->tp_vocab(l->attr, T, s->pos.t, local_attr) || (uneven && !bands_read_as_they_are(s, i))) {
        memcpy(local_attr, l->attr, l->kind->attr_size);
        L->whole_because = uneven ? "the tensor ranks do not divide its rows (the vocabulary), and a layer tied to "
                                    "it has readers that would gather unequal blocks"
                                  : "it has fewer rows than the tensor ranks";
        return DL_OK;
    }
    L->by_vocab = 1;
    L->uneven = uneven;
    L->partial = 1;
    return DL_OK;
}

/* 1 when layer l reads and writes sequences [T, C] of at least T
 * positions (sequence parallelism splits their positions). */
static int on_positions(const struct dl_layer *l, int T)
{
    for (int k = 0; k < l->n_in; k++)
        if (dl_shape_rank(l->in_shape[k]) != 2 || l->in_shape[k].h < T)
            return 0;
    return dl_shape_rank(l->out_shape) == 2;
}

/* A layer without split weights: channel-local ones follow their inputs
 * (a whole input of a multi-input layer whose others are split is cut to
 * this rank's block), the rest read whole tensors. */
static int decide_follower(struct dl_shard *s, int i, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    struct dl_shard_layer *L = &s->layer[i];
    int T = s->dims.tp, any = 0, rows = 0, batch = 0;
    for (int k = 0; k < l->n_in; k++)
        batch |= input_batch(s, l, k);
    if (l->split == DL_SPLIT_BATCH && l->kind->is_loss)
        return refuse(l, "a loss reads the whole batch, so that its mean counts each sample once (leave split "
                      "out: a share of the samples is gathered for it)", err);
    if (l->split == DL_SPLIT_BATCH || (batch && l->split == DL_SPLIT_AUTO && !l->kind->is_loss)) {
        split_by_batch(s, i, l->attr);
        return DL_OK;
    }
    gather_batch_inputs(s, l, L);
    if (l->split == DL_SPLIT_HEIGHT)
        return refuse(l, "only stride-1 'same' convolutions are split by height; element-wise layers, add and "
                      "batch norm follow a height-split input (leave split out)", err);
    if (l->split != DL_SPLIT_AUTO && l->split != DL_SPLIT_NONE)
        return refuse(l, "only convolutions and fully connected layers are split; this layer follows its input "
                      "(or stays whole with split none)", err);
    for (int k = 0; k < l->n_in; k++) {
        any |= input_split(s, l, k);
        rows |= input_rows(s, l, k);
    }
    if (rows && !any && l->kind->row_local && l->split == DL_SPLIT_AUTO) { /* bands in, bands out */
        L->split = DL_SPLIT_NONE;
        L->split_rows = 1;
        for (int k = 0; k < l->n_in; k++)
            L->rows_in[k] = input_rows(s, l, k) ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE_ROWS;
        return DL_OK;
    }
    if (s->dims.sp && !rows && !any && l->kind->row_local && l->split == DL_SPLIT_AUTO && on_positions(l, T)) {
        L->split = DL_SPLIT_NONE; /* sequence parallelism: this rank's positions of whole inputs */
        L->split_rows = 1;
        for (int k = 0; k < l->n_in; k++)
            L->rows_in[k] = DL_TP_IN_SLICE_ROWS;
        return DL_OK;
    }
    for (int k = 0; k < l->n_in; k++) /* whole again; the channel rule below sees whole inputs */
        if (input_rows(s, l, k))
            L->rows_in[k] = DL_TP_IN_GATHER_ROWS;
    int G = 0; /* the split inputs' groups, when they agree (else -1) */
    for (int k = 0; k < l->n_in; k++)
        if (input_split(s, l, k))
            G = !G || G == input_groups(s, l, k) ? input_groups(s, l, k) : -1;
    if (any && l->kind->split_classes && l->split == DL_SPLIT_AUTO && G == 1) { /* a loss over split class scores */
        if (l->in_shape[0].c / T >= 2) {
            L->split = DL_SPLIT_NONE;
            L->split_classes = 1;
            L->channel0 = s->layer[l->in[0]].channel0; /* the block of the classes it reads */
            L->in[0] = DL_TP_IN_AS_IS;
            return DL_OK;
        }
        L->whole_because = "its class scores are gathered: a tensor rank would hold fewer than 2 classes";
    }
    int follow = any && l->kind->channel_local && l->split == DL_SPLIT_AUTO && G >= 1;
    for (int k = 0; k < l->n_in; k++) /* unequal blocks are read as they are by a loss only */
        if (input_split(s, l, k) && s->layer[l->in[k]].uneven)
            return refuse(l, "its input is split in unequal blocks (a vocabulary the tensor ranks do not divide), "
                          "which only a loss reads", err);
    for (int k = 0; k < l->n_in && follow; k++)
        follow = input_split(s, l, k) || l->in_shape[k].c % (G * T) == 0;
    L->split = DL_SPLIT_NONE;
    L->split_out = follow;
    L->groups = follow ? G : 1;
    for (int k = 0; k < l->n_in; k++) {
        L->in[k] = input_split(s, l, k) ? (follow ? DL_TP_IN_AS_IS : DL_TP_IN_GATHER)
                                        : (follow ? DL_TP_IN_SLICE : DL_TP_IN_AS_IS);
        L->in_groups[k] = input_split(s, l, k) ? input_groups(s, l, k) : follow ? G : 1;
    }
    return DL_OK;
}

/* The rank's view of layer i from its decision: local input shapes, then
 * the op's own shape inference, parameters and FLOPs. */
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
        int G = dim == 0 ? groups_of(s, i) : dim == 1 ? input_groups(s, l, 0) : 1;
        long count = dim < 0 ? p->count : p->dims[dim] / G;
        long extent = dim < 0 ? 0 : l->param[j].dims[dim] / G; /* of a group, whole */
        W->slice[j] = dim < 0 ? (struct dl_param_slice){-1, 0, p->count, 1}
                              : (struct dl_param_slice){dim, (long)s->pos.t * extent / T, count, G};
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
    if (L->split_out && groups_of(s, i) > 1)
        n += snprintf(buf + n, size - (size_t)n, " (by %d groups: q, k, v)", groups_of(s, i));
    if (L->split == DL_SPLIT_HEIGHT)
        n += snprintf(buf + n, size - (size_t)n, " %d", L->halo);
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
        const struct dl_layer *l = &g->layers[i];
        void *local_attr = l->attr;
        int T = dims->tp, vocab = T > 1 && l->kind->tp_vocab && l->split == DL_SPLIT_AUTO,
            heads = T > 1 && l->kind->tp_heads && l->split == DL_SPLIT_AUTO, linear = T > 1 && l->kind->tp_split;
        if (vocab || heads || linear) { /* its part's attributes: owned from here, freed with the shard */
            if (!(local_attr = calloc(1, l->kind->attr_size)))
                rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory planning the shard");
            else
                s->local.layers[i].attr = local_attr;
        }
        if (rc)
            break;
        if (vocab)
            rc = decide_vocab(s, i, local_attr, err);
        else if (heads)
            rc = decide_heads(s, i, local_attr, err);
        else if (linear)
            rc = decide_linear(s, i, local_attr, err);
        else if (T > 1)
            rc = decide_follower(s, i, err);
        else
            s->layer[i].split = DL_SPLIT_NONE;
        if (!rc)
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
