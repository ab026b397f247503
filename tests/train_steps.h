/* train_steps.h: the few plain SGD steps on seeded random data that the
 * executor tests (test_kernels_net, test_tune_net) compare between kernel
 * choices and plans. */
#ifndef DL_TESTS_TRAIN_STEPS_H
#define DL_TESTS_TRAIN_STEPS_H

#include "exec/exec.h"

/* Runs `steps` SGD steps (lr 0.05, data and labels from seed 9; the last
 * step on batch - 3 samples) on e, whose batch is `batch`, and writes each
 * step's mean loss to loss[] and a copy of the final weights to *weights
 * (malloc'ed, *n of them).  Fails the test when a step fails. */
void train_steps(struct dl_exec *e, int classes, int batch, int steps, double *loss, float **weights, long *n);

#endif
