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

/* Data parallel, but the ranks' weights differ between averages. */
static void local_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    dl_layout_data_parallel(po, size, rank, out);
    out->replicas_differ = 1;
}

static int average(struct dl_strategy *s, struct dl_error *err)
{
    struct local_impl *im = s->impl;
    im->since = 0;
    return dl_strategy_average_model(s, im->algorithm, err);
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
    int rc = dl_strategy_sum_metrics(s, m, im->global_batch, err);
    if (rc)
        return rc;
    if ((rc = dl_strategy_optim_step(s, lr, m, err)) != 0)
        return rc;
    if (++im->since < im->k)
        return DL_OK;
    st->bytes_sent = st->dense_bytes =
        dl_allreduce_ring_bytes(s->comm->size, (size_t)(s->exec->n_weights + s->exec->n_state));
    return average(s, err);
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
    .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_tied_across_ranks = 1,
    .optimizer_state_per_rank = 1,
    .name = "local-sgd", .layout = local_layout, .create = local_create, .begin = local_begin,
    .finish = local_finish, .end = local_end, .consistent = local_consistent, .destroy = local_destroy};
