/* rank_grid.h: the data x tensor x pipeline grid of ranks (doc/parallel.md):
 * its sizes, a rank's coordinates, --grid parsing and how each strategy
 * resolves on a world size.  The world of W = D*T*P ranks is laid out as
 * Megatron-LM does: tensor ranks innermost (neighbours, so they share a
 * node), then data, then pipeline: rank = t + T*(d + D*p).  The group
 * communicators are parallel/grid.h's.
 *
 * Expert parallelism lives within the data dimension (as Megatron-LM and
 * torchtitan place it): --grid dp=R,ep=E means D = R x E data-parallel
 * ranks, each E consecutive ones (d / E alike) an expert group holding
 * the experts in E blocks (block d % E), the dense layers data-parallel
 * over all D. */
#ifndef DL_PLAN_RANK_GRID_H
#define DL_PLAN_RANK_GRID_H

#include <stddef.h>

#include "core/error.h"
#include "spec/netspec.h"

struct dl_grid_dims {
    int dp, tp, pp;  /* 0 in a request: not given (decided by dl_grid_resolve) */
    int sp;          /* 1: sequence parallelism within the tensor group (plan/shard.c) */
    int ep;          /* expert ranks within dp (dividing it; 0 or 1: none).  In a request dp is the
                        replicas (--grid's dp=), resolved to replicas x ep */
};

/* The expert ranks of g (1 when none). */
static inline int dl_grid_ep(const struct dl_grid_dims *g)
{
    return g->ep > 1 ? g->ep : 1;
}

struct dl_grid_pos {
    int t, d, p;
};

/* Parses --grid's "dp=D,ep=E,tp=T,pp=P" (any of them, any order, each
 * once) into *out (factors not given stay 0). */
int dl_grid_parse(const char *text, struct dl_grid_dims *out, struct dl_error *err);

/* The grid of `world` ranks for strategy kind and the requested factors
 * (the network file's parallel: section or --grid; 0 = not given): a factor
 * left out is 1 and dp takes what is left of the world; data is dp = W,
 * model tp = W, pipeline pp = W; auto is data unless factors are given;
 * none needs one rank.  Errors (DL_ERR_SPEC) name the value and the rule. */
int dl_grid_resolve(enum dl_parallel_kind kind, struct dl_grid_dims want, int world, struct dl_grid_dims *out,
                    struct dl_error *err);

struct dl_grid_pos dl_grid_position(const struct dl_grid_dims *g, int rank);
int dl_grid_rank(const struct dl_grid_dims *g, struct dl_grid_pos pos);

/* "dp=2,tp=2,pp=1" ("dp=1,ep=2,tp=2,pp=1" with expert ranks: dp the replicas) */
const char *dl_grid_str(const struct dl_grid_dims *g, char *buf, size_t size);

#endif
