/* no_decay.h: the weights that weight decay leaves out (the network file's
 * train.optimizer.no_decay: biases, normalisation layers' and embeddings'
 * weights, as GPT-2's and BERT's recipes exclude them), found as runs of a
 * rank's weight vector and handed to its optimizer (optim/optim.h's
 * dl_optim_set_no_decay; train/param_spans.h finds the runs). */
#ifndef DL_TRAIN_NO_DECAY_H
#define DL_TRAIN_NO_DECAY_H

#include "exec/exec.h"
#include "optim/optim.h"

/* Whether parameter j of layer l is of a kind in kinds (DL_NO_DECAY_* bits). */
int dl_no_decay_applies(const struct dl_layer *l, int j, unsigned kinds);

/* Gives o the runs of kinds' weights among the parameters that the n
 * executors e[] hold in the weight vector starting at weights (one rank's
 * stages share one); kinds 0 gives none.  *count (may be NULL) gets the
 * number of weights left out. */
int dl_no_decay_apply(struct dl_exec *const *e, int n, const dl_real *weights, unsigned kinds, struct dl_optim *o,
                      long *count, struct dl_error *err);

#endif
