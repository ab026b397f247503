/* exec.h: the executor.  Owns every buffer of one model replica (activations,
 * their gradients, forward->backward scratch, weights, weight gradients and
 * non-trainable state such as batch-norm running statistics) and runs the
 * graph forward and backward over a batch.
 *
 * Weights, their gradients and the state are each ONE contiguous array in
 * graph order, so that the optimizer and the gradient allreduce see flat
 * vectors; per-layer parameter pointers point into them. */
#ifndef DL_EXEC_H
#define DL_EXEC_H

#include <stdint.h>

#include "graph/graph.h"

struct dl_exec {
    const struct dl_graph *g;
    int max_batch;
    dl_real **act;                         /* [layer] max_batch x out_shape */
    dl_real **grad;                        /* [layer] gradient of the loss w.r.t. act */
    dl_real **saved;                       /* [layer] op scratch kept from forward to backward */
    dl_real *(*param)[DL_MAX_PARAMS];      /* [layer][j] into weights or state */
    dl_real *(*dparam)[DL_MAX_PARAMS];     /* [layer][j] into dweights (NULL for state) */
    struct dl_rng *rng;                    /* [layer] for dropout */
    dl_real *weights, *dweights;           /* trainable parameters, flat */
    long n_weights;
    dl_real *state;                        /* non-trainable parameters, flat */
    long n_state;
    dl_real *scratch[DL_MAX_INPUTS];       /* gradient of a fan-out input, before it is added */
    int n_scratch;
    const dl_real *input;                  /* the batch being run */
    const int *labels;
    int batch;                             /* size of the batch being run */
    int *grad_ready;                       /* [layer] backward bookkeeping */
    long *weight_begin;                    /* [layer] first index of its weights in dweights */
    /* Called right after layer i's backward, when its weight gradients (the
     * dweights range [weight_begin[i], weight_begin[i+1])) are final for the
     * step: data parallelism starts the allreduce of full buckets here. */
    void (*grad_hook)(void *ctx, int layer);
    void *grad_hook_ctx;
};

/* Allocates everything for batches of up to max_batch samples and initialises
 * the parameters from seed (deterministically, in graph order). */
int dl_exec_init(struct dl_exec *e, const struct dl_graph *g, int max_batch, uint64_t seed,
                 struct dl_error *err);
void dl_exec_free(struct dl_exec *e);

/* Forward over batch samples of x (batch x input shape) with labels.
 * training selects batch statistics and dropout. */
void dl_exec_forward(struct dl_exec *e, const dl_real *x, const int *labels, int batch, int training);

/* Backward of the mean loss of the last forward.  Weight gradients are
 * ACCUMULATED into dweights: call dl_exec_zero_grad() first for a new step. */
void dl_exec_backward(struct dl_exec *e);
void dl_exec_zero_grad(struct dl_exec *e);

/* Sum of the per-sample losses of the last forward (in double). */
double dl_exec_loss_sum(const struct dl_exec *e);
/* Number of samples of the last forward whose arg-max logit equals the label. */
int dl_exec_correct(const struct dl_exec *e);

#endif
