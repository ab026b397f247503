/* param_spans.h: the runs of a rank's weight vector that its trainable
 * parameters occupy, each parameter tensor's own run (a tied parameter's in
 * its owner's place), as the weight-decay exceptions (no_decay.h) and the
 * layerwise optimizers' tensors (LARS, LAMB: optim/optim.h's
 * dl_optim_set_tensors) take them. */
#ifndef DL_TRAIN_PARAM_SPANS_H
#define DL_TRAIN_PARAM_SPANS_H

#include "exec/exec.h"
#include "optim/optim.h"

/* Whether parameter j of layer owner (the layer whose parameter it is: a
 * tied copy's owner) belongs to the runs wanted (kinds: the caller's). */
typedef int (*dl_param_pick)(const struct dl_layer *owner, int j, unsigned kinds);

/* The runs of the trainable parameters that the n executors e[] hold in the
 * weight vector starting at weights (one rank's stages share one), those
 * pick takes (NULL: all), in graph order: *spans (malloc'd; NULL when none)
 * and *n_spans; *count (may be NULL) gets their weights. */
int dl_param_spans(struct dl_exec *const *e, int n, const dl_real *weights, dl_param_pick pick, unsigned kinds,
                   struct dl_optim_span **spans, int *n_spans, long *count, struct dl_error *err);

/* Gives a layerwise optimizer o (LARS, LAMB) every parameter tensor's run;
 * nothing for the others.  *tensors (may be NULL) gets their count. */
int dl_param_spans_apply(struct dl_exec *const *e, int n, const dl_real *weights, struct dl_optim *o, int *tensors,
                         struct dl_error *err);

#endif
