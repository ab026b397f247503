/* moe.h: what the mixture of experts' kernels share with its reference op
 * (ops/moe.c): the attributes, a call's view (sizes, parameters, the saved
 * state every kernel keeps first in its own: probs [M][E], the chosen
 * experts [M][k], whether each was kept [M][k], each sample's balancing and
 * z loss [N], which the executor reads through the op's added_loss), and
 * the routing's steps, so that a fast kernel chooses, weighs and drops as
 * the reference does and sends the router the same gradient. */
#ifndef DL_OPS_MOE_H
#define DL_OPS_MOE_H

#include "ops/op.h"

struct dl_moe_attr {
    int experts, top_k, units;
    int normalize;
    double aux_loss, z_loss, capacity_factor;
    /* Expert parallelism (op.h's expert_split; not in the file): this part
     * holds experts [expert0, expert0 + local_experts); 0: all of them. */
    int expert0, local_experts;
};

static inline int dl_moe_local_experts(const struct dl_moe_attr *a)
{
    return a->local_experts ? a->local_experts : a->experts;
}

/* A call: M = N T positions of C features; x[(n C + k) T + t] is feature
 * k of position m = n T + t. */
struct dl_moe_view {
    const struct dl_moe_attr *a;
    long N, T, C, E, K, F, M;
    long EL, e0;                           /* the experts held here: [e0, e0 + EL) (expert parallelism) */
    const dl_real *wg, *w1, *w3, *w2;      /* [E][C], [EL][F][C] twice, [EL][C][F] */
    dl_real *probs, *chosen, *kept, *loss; /* the saved state above */
};

struct dl_moe_view dl_moe_view(const struct dl_op_call *c);

/* The op's saved elements for a batch of N (the shared state above). */
long dl_moe_saved_count(const struct dl_moe_attr *a, long N, long T);

/* Position m's routing from its router logits[E]: the softmax into probs,
 * the top k (the lower index first among equals) into chosen, all kept;
 * returns logsumexp(logits). */
double dl_moe_route(const struct dl_moe_view *v, long m, const double *logits);

/* With a capacity factor: which of each sample's choices are kept (first
 * choices of every position before second ones, in position order). */
void dl_moe_capacity(const struct dl_moe_view *v);

/* Each sample's balancing and z loss into v->loss, from lse[M]. */
void dl_moe_sample_losses(const struct dl_moe_view *v, const double *lse);

/* Position m's gates of its k choices (dropped ones count) into g[K]. */
void dl_moe_gates(const struct dl_moe_view *v, long m, double *g);

/* The balancing loss's gradient by probs at each position of sample n,
 * aux_loss E F_e / T, into share[E]. */
void dl_moe_balance_gradient(const struct dl_moe_view *v, long n, double *share);

/* The router's logit gradient of position m into dlogits[E], from the
 * gates' gradients dg[K], its logsumexp, the sample's share (NULL: no
 * balancing loss) and the weight of a sample's loss. */
void dl_moe_router_backward(const struct dl_moe_view *v, long m, const double *dg, double lse, const double *share,
                            double norm, double *dlogits);

#endif
