/* local_sgd.c: local SGD / model averaging (Stich 2019; Lin et al. 2020):
 * every rank steps its own optimizer on its own gradient; every K steps (and
 * at the end) the weights and the batch-norm statistics are averaged over
 * the ranks with one allreduce each. */
#include "parallel/strategy.h"

#include <stdlib.h>

#include "comm/allreduce.h"

struct local_impl {
    int k;
    const char *algorithm;
    long since;        /* local steps since the last average */
    int global_batch;  /* of the step in progress */
};



static int average(struct dl_strategy *s, struct dl_error *err)
{
    struct local_impl *im = s->impl;
    float *bufs[2] = {s->exec->weights, s->exec->state};
    long counts[2] = {s->exec->n_weights, s->exec->n_state};
    float inv = 1.0f / (float)s->comm->size;
    for (int b = 0; b < 2; b++) {
        if (counts[b] == 0)
            continue;
        int rc = dl_allreduce(s->comm, im->algorithm, bufs[b], (size_t)counts[b], NULL, err);
        if (rc)
            return rc;
        for (long i = 0; i < counts[b]; i++)
            bufs[b][i] *= inv;
    }
    im->since = 0;
    return DL_OK;
}

static int local_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    struct local_impl *im = s->impl;
    im->global_batch = global_batch;
    return DL_OK;
}

static int local_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                        struct dl_step_stats *st, struct dl_error *err)
{
    struct local_impl *im = s->impl;
    double summed[DL_STEP_METRICS];
    dl_step_metrics_pack(m, summed);
    int rc = dl_comm_sum_small(s->comm, summed, DL_STEP_METRICS, err);
    if (rc)
        return rc;
    dl_step_metrics_unpack(summed, m);
    m->samples = im->global_batch;
    dl_strategy_optim_step(s, lr);
    if (++im->since >= im->k)
        return average(s, err);
    return DL_OK;
}

static int local_end(struct dl_strategy *s, struct dl_error *err)
{
    struct local_impl *im = s->impl;
    return im->since ? average(s, err) : DL_OK;
}

/* The weights and batch-norm statistics are the same on every rank only
 * right after an average. */
static int local_consistent(const struct dl_strategy *s)
{
    const struct local_impl *im = s->impl;
    return im->since == 0;
}

static void local_destroy(struct dl_strategy *s)
{
    free(s->impl);
}

static int local_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                        struct dl_error *err)
{
    struct local_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    im->k = po->local_steps > 0 ? po->local_steps : 1;
    im->algorithm = po->allreduce ? po->allreduce : "auto";
    s->impl = im;
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_local_sgd = {
    .name = "local-sgd", .layout = dl_layout_data_parallel, .create = local_create, .begin = local_begin,
    .finish = local_finish, .end = local_end, .consistent = local_consistent,
    .destroy = local_destroy};
