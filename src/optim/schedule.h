/* schedule.h: learning rate as a function of the step (constant, step decay,
 * cosine annealing, warm-up-stable-decay), with optional linear warm-up,
 * from a base rate scaled to the batch (train.lr_scaling). */
#ifndef DL_SCHEDULE_H
#define DL_SCHEDULE_H

#include "spec/netspec.h"

/* lr for 0-based step `step` of a run of total_steps steps with
 * steps_per_epoch steps per epoch and base rate base_lr. */
double dl_schedule_lr(const struct dl_sched_spec *s, double base_lr, long step, long steps_per_epoch,
                      long total_steps);

/* The base rate of a run of t: train.optimizer.lr, times train.batch /
 * train.reference_batch (lr_scaling linear) or its square root (sqrt). */
double dl_schedule_base_lr(const struct dl_train_spec *t);

#endif
