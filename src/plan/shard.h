/* shard.h: what one rank of the grid runs (doc/parallel.md): its pipeline
 * stages (one, or V virtual stages p, p+P, ... for the interleaved
 * schedule), the tensors that cross a stage cut, and for tensor parallelism each layer's split, how every tensor
 * is spread over the tensor group, the rank's view of each layer (the
 * attributes, shapes and parameters of its part, in a struct dl_graph with
 * the whole network's layer indices, so kernels, tuner and memory planner
 * work on it unchanged) and where each local parameter sits in the whole
 * tensor.  Tensors are whole on every tensor rank, split into T equal
 * channel (feature) blocks, rank t holding block t, or split into T bands
 * of rows (height), rank t holding rows [t*H/T, (t+1)*H/T) (dl_shard_band;
 * uneven when T does not divide H), or whole but for this rank's share of
 * the samples, rank t holding samples [t*N/T, (t+1)*N/T) of the batch
 * (dl_shard_band of N; `split: batch`). */
#ifndef DL_PLAN_SHARD_H
#define DL_PLAN_SHARD_H

#include "plan/rank_grid.h"
#include "plan/stages.h"

/* How an input reaches a layer from its producer, and (backward) how the
 * layer's input gradient goes back:
 *   AS_IS   the producer's tensor as it is; its gradient as computed,
 *           except that a layer split by its outputs computes a partial sum
 *           of it, which is allreduced;
 *   SLICE   a whole tensor cut to this rank's channel block (free); the
 *           blocks' gradients are allgathered into the whole gradient;
 *   GATHER  a split tensor allgathered whole; of the whole gradient the
 *           rank keeps its block (summed over the ranks first with a
 *           reduce-scatter when the layer is split by its outputs). */
enum dl_tp_in { DL_TP_IN_AS_IS, DL_TP_IN_SLICE, DL_TP_IN_GATHER,
                /* rows (a layer's rows_in[k]; applied before in[k]): */
                DL_TP_IN_SLICE_ROWS,  /* a whole tensor cut to this rank's band (free); the bands'
                                         gradients are allgathered whole */
                DL_TP_IN_GATHER_ROWS, /* the bands allgathered whole; of the whole gradient the rank
                                         keeps its band */
                /* (the executor's step only) a band with `halo` rows of the neighbours' bands above
                   and below it, zeros past the edges; the halos' gradients go back and are added */
                DL_TP_IN_HALO,
                /* samples (a layer's batch_in[k]): */
                DL_TP_IN_GATHER_BATCH, /* the shares allgathered into the whole batch (before everything
                                          else); of the whole gradient the rank keeps its share */
                DL_TP_IN_SLICE_BATCH   /* a whole batch cut to this rank's share (after everything else,
                                          free); the shares' gradients are allgathered whole */
};

/* Where local parameter j of a layer sits in the whole tensor: along
 * dimension dim (of the PyTorch layout), whose extent is `groups` equal
 * groups (1, or 3 for a weight producing packed q, k, v), it holds
 * [offset, offset + count) of every group, the groups one after the other
 * (a strided slice: a packed QKV weight split by heads); dim -1: the whole
 * tensor. */
struct dl_param_slice {
    int dim;
    long offset, count;
    int groups;
};
/* (offset is t E / T of a group's extent E over T ranks: equal blocks, or
 * the bands of a split the ranks do not divide) */

struct dl_shard_layer {
    enum dl_split split;        /* as resolved: none, column/filters (by output), row/channels (by input) */
    int by_output, by_input;
    int by_vocab;               /* a lookup table split by its rows (op.h's tp_vocab): partial sums */
    int split_out;              /* its output is split into channel blocks over the tensor group */
    int groups;                 /* with split_out: its channels are `groups` equal groups, each split into
                                   blocks, rank t holding block t of every group (3: packed q, k, v split
                                   by heads); 0 or 1: plain blocks */
    int by_heads;               /* split by heads (attention: op.h's tp_heads), its inputs' blocks whole heads */
    int uneven;                 /* split into blocks [t C / T, (t+1) C / T) that T does not make equal (a
                                   vocabulary the ranks do not divide): read only as it is (a loss's
                                   classes), never gathered */
    long channel0;              /* with split_out or split_classes: the whole tensor's index of this rank's
                                   first channel (class) */
    int partial;                /* its output is a partial sum, allreduced right after it (input splits) */
    enum dl_tp_in in[DL_MAX_INPUTS];
    int in_groups[DL_MAX_INPUTS]; /* the groups of the channel blocks input k is sliced into or gathered
                                     from (as `groups`; 0 or 1: plain blocks) */
    struct dl_param_slice *slice; /* [its local params], owned (an input split's bias lives on tensor rank 0
                                     only: the others have one param less) */
    int split_rows;             /* its output is split into bands of rows over the tensor group (a
                                   height split, or a row-local layer following one) */
    int halo;                   /* split by height: rows of the neighbours' bands it reads on each side */
    enum dl_tp_in rows_in[DL_MAX_INPUTS]; /* AS_IS, SLICE_ROWS or GATHER_ROWS (before in[k]) */
    int split_batch;            /* it runs on this rank's share of the samples (dl_shard_band of the
                                   batch): `split: batch`, or a sample-local layer following one */
    enum dl_tp_in batch_in[DL_MAX_INPUTS]; /* AS_IS, GATHER_BATCH (first) or SLICE_BATCH (last) */
    int split_classes;          /* a loss reading class scores split into blocks as they are (op.h's
                                   split_classes: reduced over the tensor group, never gathered) */
    const char *whole_because;  /* a layer that could be split but stays whole: why (printed once) */
    int stage;                  /* the pipeline (virtual) stage that runs it */
};

/* A tensor that crosses a stage cut: layer `layer`'s output, read by stage
 * `to` (one edge per reading stage; the same for every rank).  Its index
 * numbers the pipeline messages (comm/tags.h). */
struct dl_stage_edge {
    int layer, to;
};

struct dl_shard {
    const struct dl_graph *g;   /* the whole network (not owned) */
    struct dl_grid_dims dims;
    struct dl_grid_pos pos;
    struct dl_stages stages;    /* pipeline cuts: dims.pp x V stages, stage s on pipeline rank s % pp */
    int V;                      /* stages this rank holds: pos.p + v * pp for v in [0, V) */
    int n_edges;                /* tensors crossing stage cuts */
    struct dl_stage_edge *edge; /* [n_edges], by producing layer, then reading stage */
    struct dl_graph local;      /* this rank's view of every layer (same indices as g) */
    struct dl_shard_layer *layer; /* [g->n] */
};

/* The view of grid rank `rank` (position from dims) with V stages per
 * pipeline rank (1, or the interleaved schedule's V).  cost: per-layer
 * costs for the stage cuts (NULL: estimated).  Errors (DL_ERR_SPEC) for a
 * split the layer or its input cannot have (e.g. `split: row` on a
 * convolution, filters not divisible by the tensor ranks), naming the
 * layer, the split and the rule; stage errors as dl_stages_cut. */
int dl_shard_make(const struct dl_graph *g, const struct dl_grid_dims *dims, int V, int rank, const double *cost,
                  struct dl_shard *out, struct dl_error *err);
void dl_shard_free(struct dl_shard *s);

/* Where element i of the whole parameter p (row-major in its PyTorch
 * layout) sits in the slice sl a rank holds, or -1 when it holds another
 * part. */
long dl_param_slice_index(const struct dl_param_desc *p, const struct dl_param_slice *sl, long i);

/* The band of rank t of T of a tensor of H rows: rows [*lo, *lo + *n). */
static inline void dl_shard_band(int H, int T, int t, int *lo, int *n)
{
    *lo = (int)((long)t * H / T);
    *n = (int)((long)(t + 1) * H / T) - *lo;
}

/* A few words on layer i's split on this rank and how its inputs reach it
 * ("outputs", "inputs, partial sums", "follows channel blocks", "classes
 * (no gather)", "whole", each input gathered or sliced), for dltrain check;
 * returns buf. */
const char *dl_shard_describe(const struct dl_shard *s, int i, char *buf, size_t size);

/* 1 when layer i runs on this rank (in any of its stages). */
static inline int dl_shard_runs(const struct dl_shard *s, int i)
{
    return dl_stages_rank(&s->stages, s->layer[i].stage) == s->pos.p;
}

/* The number of this rank's v-th stage (v in [0, V)), and its layers
 * [first[stage], first[stage + 1]) in s->stages. */
static inline int dl_shard_stage(const struct dl_shard *s, int v)
{
    return s->pos.p + v * s->dims.pp;
}

/* The index of the edge from layer to stage `to`, -1 when there is none. */
int dl_shard_edge(const struct dl_shard *s, int layer, int to);

/* The one-process view (dims 1 x 1 x 1) that dl_exec uses when it is given
 * none; returns like dl_shard_make. */
int dl_shard_whole(const struct dl_graph *g, struct dl_shard *out, struct dl_error *err);

#endif
