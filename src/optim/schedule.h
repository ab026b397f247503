/* schedule.h: learning rate as a function of the step (constant, step decay,
 * cosine annealing, warm-up-stable-decay), with optional linear warm-up. */
#ifndef DL_SCHEDULE_H
#define DL_SCHEDULE_H

#include "spec/netspec.h"

/* lr for 0-based step `step` of a run of total_steps steps with
 * steps_per_epoch steps per epoch and base rate base_lr. */
double dl_schedule_lr(const struct dl_sched_spec *s, double base_lr, long step, long steps_per_epoch,
                      long total_steps);

#endif
