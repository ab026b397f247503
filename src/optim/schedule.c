/* schedule.c: learning-rate schedules.
 *   step:   lr * gamma^floor(epoch / step_epochs)
 *   cosine: min + (lr - min) * (1 + cos(pi * p)) / 2, p = progress after warm-up in [0, 1]
 *           (0 during the warm-up, even of a run that ends before it does)
 *   wsd:    warm-up, stable, decay (Hu et al. 2024, MiniCPM; Hagele et al. 2024): lr until
 *           the last decay_fraction of the steps, then linearly down to min, p the progress
 *           through those steps: lr - (lr - min) * p
 *   warm-up (any kind): multiplied by (step + 1) / warmup_steps during the first
 *   warmup_epochs epochs.
 * The base rate: train.optimizer.lr, or with train.lr_scaling the rate for
 * train.reference_batch scaled to train.batch: x batch / reference (linear:
 * Goyal et al. 2017) or x sqrt(batch / reference) (sqrt: Krizhevsky 2014). */
#include "optim/schedule.h"

#include <math.h>

double dl_schedule_lr(const struct dl_sched_spec *s, double base_lr, long step, long steps_per_epoch,
                      long total_steps)
{
    if (steps_per_epoch < 1)
        steps_per_epoch = 1;
    double epoch = (double)step / (double)steps_per_epoch;
    long warmup = (long)ceil(s->warmup_epochs * (double)steps_per_epoch);
    double lr = base_lr;
    switch (s->kind) {
    case DL_SCHED_CONSTANT:
        break;
    case DL_SCHED_STEP:
        lr = base_lr * pow(s->gamma, floor(epoch / s->step_epochs));
        break;
    case DL_SCHED_COSINE: {
        /* warming up: from the top (a run shorter than its warm-up still ramps the rate up) */
        long span = total_steps - warmup;
        double p = step < warmup ? 0 : span > 0 ? (double)(step - warmup) / (double)span : 1.0;
        if (p < 0)
            p = 0;
        if (p > 1)
            p = 1;
        lr = s->min_lr + (base_lr - s->min_lr) * 0.5 * (1 + cos(3.14159265358979323846 * p));
        break;
    }
    case DL_SCHED_WSD: {
        long decay = (long)ceil(s->decay_fraction * (double)total_steps), start = total_steps - decay;
        if (start < warmup) /* a run too short for both: the decay after the warm-up */
            start = warmup, decay = total_steps - warmup;
        if (step >= start && decay > 0)
            lr = base_lr - (base_lr - s->min_lr) * (double)(step - start) / (double)decay;
        break;
    }
    }
    if (warmup > 0 && step < warmup)
        lr *= (double)(step + 1) / (double)warmup;
    return lr;
}

double dl_schedule_base_lr(const struct dl_train_spec *t)
{
    if (t->lr_scaling == DL_LR_SCALING_NONE || t->reference_batch <= 0)
        return t->optim.lr;
    double f = (double)t->batch / (double)t->reference_batch;
    return t->optim.lr * (t->lr_scaling == DL_LR_SCALING_SQRT ? sqrt(f) : f);
}
