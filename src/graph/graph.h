/* graph.h: the layer DAG of a network, in topological order, with every
 * shape inferred and every parameter described.  Built from layer
 * declarations (spec/netfile.c makes them from YAML) by dl_graph_build(),
 * which resolves input names, rejects cycles and infers shapes before any
 * tensor memory exists. */
#ifndef DL_GRAPH_H
#define DL_GRAPH_H

#include "core/error.h"
#include "ops/op.h"

#define DL_GRAPH_INPUT (-1) /* producer index meaning "the network input" */

/* How tensor parallelism splits a layer: the `split:` key of a layer
 * (doc/parallel.md).  auto: the default rule; none: the layer stays whole. */
enum dl_split { DL_SPLIT_AUTO, DL_SPLIT_NONE, DL_SPLIT_COLUMN, DL_SPLIT_ROW, DL_SPLIT_FILTERS, DL_SPLIT_CHANNELS,
                DL_SPLIT_HEIGHT, DL_SPLIT_BATCH };
extern const char *const dl_split_names[]; /* "auto", "none", "column", ..., NULL */

/* Where a declaration came from, for messages. */
struct dl_loc {
    const char *file; /* not owned */
    int line, col;
};

/* One `share:` entry: parameter `param` is layer `layer`'s of that name. */
struct dl_share_decl {
    char *param, *layer;
    struct dl_loc loc;
};

/* One layer as declared (names not yet resolved). */
struct dl_layer_decl {
    char *name;                        /* fully qualified, e.g. "layer1.0.conv1" */
    const struct dl_op_kind *kind;
    void *attr;                        /* kind->attr_size bytes, owned */
    int n_in;
    char *inputs[DL_MAX_INPUTS];       /* qualified producer names; "input" = network input */
    struct dl_loc loc;
    struct dl_loc input_loc[DL_MAX_INPUTS];
    int stage;                         /* `stage:` key: first pipeline stage of this layer, -1: not given */
    int block;                         /* the block instance (`block:` use, each repeat one) it was expanded
                                          from, the innermost; -1: a layer of the top-level list */
    enum dl_split split;               /* `split:` key */
    double init_std;                   /* `init_std:` key (0: the op's own initialisation) */
    /* `share: {PARAM: LAYER}`: parameters that are another layer's (weight
     * tying), any number, owned */
    int n_share;
    struct dl_share_decl *share;
};

struct dl_layer {
    char *name;
    const struct dl_op_kind *kind;
    void *attr;
    int n_in;
    int in[DL_MAX_INPUTS];             /* producer layer index or DL_GRAPH_INPUT */
    struct dl_shape in_shape[DL_MAX_INPUTS];
    struct dl_shape out_shape;
    int n_params;                      /* any number */
    struct dl_param_desc *param;       /* [n_params], owned (NULL when 0) */
    int n_consumers;                   /* layers reading this layer's output */
    double flops;                      /* forward FLOPs per sample */
    struct dl_loc loc;
    int stage;                         /* as declared (parallel/ places layers; graph/ never reads them) */
    int block;                         /* as declared: its block instance, -1 none (--recompute full's unit) */
    enum dl_split split;
    double init_std;                   /* as declared: weights drawn from N(0, init_std), biases 0 (0: the op's) */
};

struct dl_graph {
    struct dl_shape input;             /* per-sample input shape */
    int classes;
    int n;
    struct dl_layer *layers;           /* topological order */
    int loss;                          /* index of the loss layer */
    int logits;                        /* index of the layer feeding the loss */
    int input_consumers;
    /* Labels per sample: the positions of the loss's scores (1 for a
     * vector of class scores; T for a per-position loss over [T, classes]),
     * or a regression loss's targets, one per prediction (float_targets:
     * W = classes label words, each a float32's bits, core/target_bits.h). */
    int positions;
    int float_targets;                 /* the loss's op.h float_targets: no class ids, no accuracy */
    /* Token ids of the input (an i32 input, core/shape.h) are below this:
     * the least vocabulary of the layers reading them (op.h's id_limit);
     * 0 for an input that is not ids.  The data loader checks it. */
    int id_limit;
};

/* Takes ownership of the decls' names and attrs (the decl array itself stays
 * the caller's).  The last declaration must be the loss.  Errors are located
 * at the offending declaration. */
int dl_graph_build(struct dl_layer_decl *decls, int n, struct dl_shape input, int classes,
                   struct dl_graph *g, struct dl_error *err);
void dl_graph_free(struct dl_graph *g);

/* Index of the layer called name, or -1. */
int dl_graph_find(const struct dl_graph *g, const char *name);

/* Frees what n declarations own (dl_graph_build does it on its own). */
void dl_layer_decls_free(struct dl_layer_decl *d, int n);

/* Number of trainable parameter elements of layer l, of the graph (a shared
 * parameter counts once, in the layer that owns it). */
long dl_layer_param_count(const struct dl_layer *l);
/* Adds layer l's trainable elements to *trainable and its other f32 ones
 * (batch-norm statistics) to *state, each stored parameter once (a tied
 * one where it is stored: its owner, or a rank's copy, op.h's replica); a
 * layer's i64 counters (op.h) are in neither (a few bytes of host memory:
 * dl_layer_counters). */
void dl_layer_param_tally(const struct dl_layer *l, double *trainable, double *state);
/* Layer l's i64 counters (op.h's dtype), in values. */
long dl_layer_counters(const struct dl_layer *l);
long dl_graph_param_count(const struct dl_graph *g);
/* Those one position uses: the count less the unchosen experts' (op.h's
 * idle_params). */
long dl_graph_active_param_count(const struct dl_graph *g);

#endif
