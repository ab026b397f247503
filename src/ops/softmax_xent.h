/* softmax_xent.h: what the softmax cross-entropy's kernels share with its
 * reference op (ops/softmax_xent.c): the count a sample's summed loss is
 * divided by, so that the mean over the mini-batch is the mean over its
 * labelled positions (PyTorch's CrossEntropyLoss with ignore_index and
 * reduction 'mean', over every token of the mini-batch). */
#ifndef DL_OPS_SOFTMAX_XENT_H
#define DL_OPS_SOFTMAX_XENT_H

#include "ops/op.h"

/* The divisor of each sample's sum of position losses: c->label_norm when
 * set (the mini-batch's labelled positions per sample, counted by the
 * trainer over every rank's and chunk's samples), else this call's own
 * count of labels not equal to ignore_index over its samples; 0 when none
 * is labelled (the losses and gradients are then 0).  With every position
 * labelled it is the positions, T, exactly. */
double dl_softmax_xent_norm(const struct dl_op_call *c, int ignore_index);

#endif
