/* tp_split.c: tensor parallelism's splits, one layer at a time (see
 * tp_split.h; doc/parallel.md).  The splits are decided in topological order from each layer's `split:` key and how its
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
#include "plan/tp_split.h"

#include <stdlib.h>

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
int dl_tp_groups_of(const struct dl_shard *s, int i)
{
    return s->layer[i].groups > 1 ? s->layer[i].groups : 1;
}

/* The groups of input k of layer l when it is split, else 1. */
int dl_tp_input_groups(const struct dl_shard *s, const struct dl_layer *l, int k)
{
    return input_split(s, l, k) ? dl_tp_groups_of(s, l->in[k]) : 1;
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
            if (r->kind->tp.tp_heads && r->split == DL_SPLIT_AUTO) {
                char scratch[256];
                G = r->attr && r->kind->attr_size <= sizeof scratch
                        ? r->kind->tp.tp_heads(r->attr, r->n_in, T, 0, scratch)
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
    if (!l->kind->tp.height_split)
        return "only stride-1 'same' convolutions are split by height; element-wise layers, add and batch norm "
               "follow a height-split input";
    const char *why = l->kind->tp.height_split(l->attr, l->in_shape[0], local_attr, halo);
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
        l->kind->tp.tp_outputs(l->attr, s->pos.t * U / T, (s->pos.t + 1) * U / T, local_attr);
    else if (mode && l->kind->tp.tp_split(l->attr, mode == 1, T, s->pos.t == 0, local_attr) != 0) {
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
    L->in_groups[0] = dl_tp_input_groups(s, l, 0);
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
    int T = s->dims.tp, G = l->kind->tp.tp_heads(l->attr, l->n_in, T, s->pos.t, local_attr);
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
        if (input_split(s, l, k) && dl_tp_input_groups(s, l, k) != G)
            fits = 0;
    }
    if (!fits) {
        memcpy(local_attr, l->attr, l->kind->attr_size);
        L->whole_because = "its inputs are not split by heads (they are gathered whole)";
        for (int k = 0; k < l->n_in; k++) {
            L->in[k] = input_split(s, l, k) ? DL_TP_IN_GATHER : DL_TP_IN_AS_IS;
            L->in_groups[k] = dl_tp_input_groups(s, l, k);
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
        if (!l->kind->tp.tp_outputs || l->split != DL_SPLIT_AUTO)
            return 0;
        for (int r = u + 1; r < g->n; r++)
            for (int k = 0; k < g->layers[r].n_in; k++)
                if (g->layers[r].in[k] == u &&
                    (!g->layers[r].kind->tp.split_classes || g->layers[r].split != DL_SPLIT_AUTO ||
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
    if (l->kind->tp.tp_vocab(l->attr, T, s->pos.t, local_attr) || (uneven && !bands_read_as_they_are(s, i))) {
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
    if (rows && !any && l->kind->tp.row_local && l->split == DL_SPLIT_AUTO) { /* bands in, bands out */
        L->split = DL_SPLIT_NONE;
        L->split_rows = 1;
        for (int k = 0; k < l->n_in; k++)
            L->rows_in[k] = input_rows(s, l, k) ? DL_TP_IN_AS_IS : DL_TP_IN_SLICE_ROWS;
        return DL_OK;
    }
    if (s->dims.sp && !rows && !any && l->kind->tp.row_local && l->split == DL_SPLIT_AUTO && on_positions(l, T)) {
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
            G = !G || G == dl_tp_input_groups(s, l, k) ? dl_tp_input_groups(s, l, k) : -1;
    if (any && l->kind->tp.split_classes && l->split == DL_SPLIT_AUTO && G == 1) { /* a loss over split class scores */
        if (l->in_shape[0].c / T >= 2) {
            L->split = DL_SPLIT_NONE;
            L->split_classes = 1;
            L->channel0 = s->layer[l->in[0]].channel0; /* the block of the classes it reads */
            L->in[0] = DL_TP_IN_AS_IS;
            return DL_OK;
        }
        L->whole_because = "its class scores are gathered: a tensor rank would hold fewer than 2 classes";
    }
    int group = l->kind->tp.channel_group ? l->kind->tp.channel_group(l->attr) : 0;
    int follow = any && l->split == DL_SPLIT_AUTO && G >= 1 &&
                 (l->kind->tp.channel_local || (group > 0 && l->in_shape[0].c % (G * T) == 0 &&
                                                l->in_shape[0].c / (G * T) % group == 0));
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
        L->in_groups[k] = input_split(s, l, k) ? dl_tp_input_groups(s, l, k) : follow ? G : 1;
    }
    return DL_OK;
}

/* The rank's view of layer i from its decision: local input shapes, then
 * the op's own shape inference, parameters and FLOPs. */
int dl_tp_split_layer(struct dl_shard *s, int i, void **local_attr, struct dl_error *err)
{
    const struct dl_layer *l = &s->g->layers[i];
    int T = s->dims.tp, vocab = T > 1 && l->kind->tp.tp_vocab && l->split == DL_SPLIT_AUTO,
        heads = T > 1 && l->kind->tp.tp_heads && l->split == DL_SPLIT_AUTO, linear = T > 1 && l->kind->tp.tp_split;
    if (vocab || heads || linear) { /* its part's attributes: owned from here, freed with the shard */
        if (!(*local_attr = calloc(1, l->kind->attr_size)))
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory planning the shard");
        s->local.layers[i].attr = *local_attr;
    }
    if (vocab)
        return decide_vocab(s, i, *local_attr, err);
    if (heads)
        return decide_heads(s, i, *local_attr, err);
    if (linear)
        return decide_linear(s, i, *local_attr, err);
    if (T > 1)
        return decide_follower(s, i, err);
    s->layer[i].split = DL_SPLIT_NONE;
    return DL_OK;
}
