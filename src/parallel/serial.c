/* serial.c: the one-process strategy: the optimizer step on the local
 * gradient. */
#include "parallel/strategy.h"

static void serial_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    out->role = DL_ROLE_WORKER;
    out->data_ranks = 1;
    out->data_rank = 0;
    out->eval = DL_EVAL_SPLIT;
    out->checkpoint_writer = 0;
}

static int serial_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                         struct dl_error *err)
{
    return DL_OK;
}

static int serial_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    return DL_OK;
}

static int serial_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                         struct dl_step_stats *st, struct dl_error *err)
{
    return dl_strategy_optim_step(s, lr, m, err);
}

const struct dl_strategy_ops dl_strategy_serial = {
    .supports_zero = 1, .supports_grid = 1, .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_step_guard = 1,
    .supports_tied_across_ranks = 1,
    .name = "serial", .layout = serial_layout, .create = serial_create, .begin = serial_begin,
    .finish = serial_finish};
