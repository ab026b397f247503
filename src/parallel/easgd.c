/* easgd.c: elastic averaging SGD, synchronous form (Zhang, Choromanska and
 * LeCun 2015, algorithm 1).  Every rank steps its own optimizer on its own
 * gradient; every TAU steps the workers and a center variable c (held, the
 * same, by every rank) pull toward each other:
 *     d_i = x_i - c,   x_i <- x_i - alpha d_i,   c <- c + alpha sum_i d_i,
 * the sum by one allreduce.  x is the weights followed by the batch-norm
 * statistics; c starts at the common initial x.  Unlike local SGD the
 * workers are not reset to the average: alpha (default 0.9 / p, beta =
 * p alpha = 0.9 as in the paper) sets how hard they are pulled, and the
 * room left to them explores.  The end of training averages the workers
 * once over all ranks, as local SGD does. */
#include "parallel/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "core/clock.h"

struct easgd_impl {
    int tau;
    double alpha;
    const char *algorithm;
    float *center;      /* c: weights, then statistics */
    float *pull;        /* d_i, then sum_i d_i */
    long since;         /* local steps since the last elastic round */
    int global_batch;   /* of the step in progress */
};

/* The elastic round: d = x - c summed over the ranks, x -= alpha d, c += alpha sum. */
static int elastic_round(struct dl_strategy *s, struct dl_step_stats *st, struct dl_error *err)
{
    struct easgd_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    long nw = e->n_weights, n = nw + e->n_state;
    float alpha = (float)im->alpha;
    for (long i = 0; i < n; i++)
        im->pull[i] = (i < nw ? e->weights[i] : e->state[i - nw]) - im->center[i];
    for (long i = 0; i < n; i++) {
        float *x = i < nw ? &e->weights[i] : &e->state[i - nw];
        *x -= alpha * im->pull[i];
    }
    double t0 = dl_clock_now();
    int rc = dl_allreduce(s->comm, im->algorithm, im->pull, DL_F32, (size_t)n, NULL, err);
    if (rc)
        return rc;
    st->comm_seconds = st->exposed_seconds = dl_clock_now() - t0;
    for (long i = 0; i < n; i++)
        im->center[i] += alpha * im->pull[i];
    st->bytes_sent = st->dense_bytes = dl_allreduce_ring_bytes(s->comm->size, (size_t)n);
    im->since = 0;
    return DL_OK;
}

static int easgd_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    struct easgd_impl *im = s->impl;
    im->global_batch = global_batch;
    return DL_OK;
}

static int easgd_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                        struct dl_step_stats *st, struct dl_error *err)
{
    struct easgd_impl *im = s->impl;
    int rc = dl_strategy_sum_metrics(s, m, im->global_batch, err);
    if (rc)
        return rc;
    if ((rc = dl_strategy_optim_step(s, lr, m, err)) != 0)
        return rc;
    return ++im->since >= im->tau ? elastic_round(s, st, err) : DL_OK;
}

static int easgd_end(struct dl_strategy *s, struct dl_error *err)
{
    struct easgd_impl *im = s->impl;
    return dl_strategy_average_model(s, im->algorithm, err);
}

static void easgd_describe(const struct dl_strategy *s, char *buf, size_t size)
{
    const struct easgd_impl *im = s->impl;
    snprintf(buf, size, "easgd: elastic round every %d step%s, alpha %g (beta = p alpha = %g), averaged at the end",
             im->tau, im->tau > 1 ? "s" : "", im->alpha, im->alpha * s->comm->size);
}

static void easgd_destroy(struct dl_strategy *s)
{
    struct easgd_impl *im = s->impl;
    if (!im)
        return;
    free(im->center);
    free(im->pull);
    free(im);
    s->impl = NULL;
}

static int easgd_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                        struct dl_error *err)
{
    struct easgd_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    s->impl = im;
    struct dl_exec *e = s->exec;
    im->tau = po->easgd_tau > 0 ? po->easgd_tau : 1;
    im->alpha = dl_easgd_alpha(po, dl_easgd_workers(po, s->comm->size));
    im->algorithm = po->allreduce ? po->allreduce : "auto";
    size_t n = (size_t)(e->n_weights + e->n_state);
    im->center = dl_calloc(n ? n : 1, sizeof *im->center, err);
    im->pull = im->center ? dl_calloc(n ? n : 1, sizeof *im->pull, err) : NULL;
    if (!im->pull) {
        easgd_destroy(s);
        return DL_ERR_NOMEM;
    }
    memcpy(im->center, e->weights, sizeof *im->center * (size_t)e->n_weights);
    memcpy(im->center + e->n_weights, e->state, sizeof *im->center * (size_t)e->n_state);
    return DL_OK;
}

const struct dl_strategy_ops dl_strategy_easgd = {
    .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_tied_across_ranks = 1,
    .name = "easgd", .layout = dl_layout_decentralized, .create = easgd_create, .begin = easgd_begin,
    .finish = easgd_finish, .end = easgd_end, .describe = easgd_describe, .destroy = easgd_destroy};
