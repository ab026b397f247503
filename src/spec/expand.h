/* expand.h: the layers of a network file as declarations (spec/ only):
 * `layers:` expanded in order, each block instance of `blocks:` with its
 * repeat count and composed names ("layer1.0.conv1") and its arguments
 * substituted, every layer mapping turned into a declaration through its
 * op's attribute table (spec/attrs.h); then `loss:`. */
#ifndef DL_SPEC_EXPAND_H
#define DL_SPEC_EXPAND_H

#include "graph/graph.h"
#include "spec/yaml.h"

/* The expansion's state: the declarations so far, and the nodes made while
 * expanding (substituted clones) that they point into, which live until the
 * declarations are built into a graph. */
struct dl_expander {
    const struct dl_ynode *blocks; /* the `blocks:` mapping, or NULL */
    struct dl_layer_decl *decls;
    int n, cap;
    struct dl_error *err;
    struct dl_ynode **owned;        /* substituted clones, freed at the end */
    int n_owned, cap_owned;
    int block, blocks_made;         /* the block instance being expanded (-1: none), and how many so far */
};

/* Expands list (a sequence of layers and block instances) under prefix,
 * the first layer reading scope_input; depth: blocks inside blocks so far.
 * *last: the name of the last layer declared (the next one's input).
 * DL_ERR_SPEC located at the node; DL_ERR_NOMEM. */
int dl_expand_list(struct dl_expander *x, const struct dl_ynode *list, const char *prefix,
                   const char *scope_input, int depth, char **last);

/* `loss: TYPE` or `loss: {type: TYPE, ...}` as the last declaration,
 * reading prev unless it says. */
int dl_expand_loss(struct dl_expander *x, const struct dl_ynode *ln, const char *prev);

#endif
