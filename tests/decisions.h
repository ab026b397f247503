/* decisions.h: the discrete choices an executor made in its last forward:
 * for every ReLU and leaky ReLU whether each input was positive, for every
 * max pooling which element of each window won.  Two runs whose arithmetic
 * differs only by rounding (another kernel, another micro-batch split)
 * make the same choices unless some value lies within that rounding of a
 * kink; only then is the difference of their gradients a continuous
 * function of the rounding, which a rounding bound can judge.  The
 * executors must keep their outputs until forward ends (exec.h's
 * keep_outputs). */
#ifndef DL_TESTS_DECISIONS_H
#define DL_TESTS_DECISIONS_H

#include "exec/exec.h"

/* Number of choices of the last forward (same graph, same batch) in which
 * executors a and b differ. */
long forward_decisions_differ(const struct dl_exec *a, const struct dl_exec *b);

#endif
