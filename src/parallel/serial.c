/* serial.c: the one-process strategy: the optimizer step on the local
 * gradient. */
#include "parallel/strategy.h"

static int serial_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    return DL_OK;
}

static int serial_finish(struct dl_strategy *s, long step, double lr, double metrics[DL_STEP_METRICS],
                         struct dl_step_stats *st, struct dl_error *err)
{
    dl_optim_step(s->optim, lr, s->exec->weights, s->exec->dweights);
    return DL_OK;
}

static int serial_end(struct dl_strategy *s, struct dl_error *err)
{
    return DL_OK;
}

static const struct dl_strategy_ops serial_ops = {"serial", serial_begin, serial_finish, serial_end, NULL};

int dl_strategy_serial(struct dl_strategy *s, struct dl_error *err)
{
    s->ops = &serial_ops;
    return DL_OK;
}
