/* strategy.c: what every consistency strategy shares (see strategy.h): the
 * --consistency option, the choice of a rank's implementation, synchronised
 * batch norm where a strategy honours it, the step metrics' packing, and the
 * calls the training loop makes. */
#include "parallel/strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "core/parse.h"
#include "io/trace.h"
#include "parallel/ps_shards.h"
#include "parallel/sync_bn.h"

void dl_parallel_opts_defaults(struct dl_parallel_opts *o)
{
    memset(o, 0, sizeof *o);
    o->consistency = DL_CONS_SYNC;
    o->allreduce = "auto";
    o->bucket_bytes = 25u << 20;
    o->overlap = 1;
    o->ps_servers = 1;
    o->stall_warning_s = 60;
    o->stall_timeout_s = 600;
    o->slow_rank = -1;
    o->consensus_every = 1;
}

/* "easgd:" or "easgd-async:" (name) followed by TAU[,ALPHA]. */
static int parse_easgd(const char *name, const char *text, enum dl_consistency mode, struct dl_parallel_opts *o,
                       struct dl_error *err)
{
    char tau[32];
    const char *comma = strchr(text, ',');
    size_t len = comma ? (size_t)(comma - text) : strlen(text);
    if (len >= sizeof tau)
        len = sizeof tau - 1;
    memcpy(tau, text, len);
    tau[len] = 0;
    int steps;
    double alpha = 0;
    char what[64];
    snprintf(what, sizeof what, "--consistency %s:TAU[,ALPHA] TAU", name);
    int rc = dl_parse_int(what, tau, 1, 1000000, &steps, err);
    if (!rc && comma) {
        snprintf(what, sizeof what, "--consistency %s:TAU[,ALPHA] ALPHA", name);
        rc = dl_parse_double(what, comma + 1, 0, 1, &alpha, err);
        if (!rc && alpha <= 0)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: expected a number in (0, 1], found '%s'", what, comma + 1);
    }
    if (rc)
        return rc;
    o->consistency = mode;
    o->easgd_tau = steps;
    o->easgd_alpha = alpha;
    return DL_OK;
}

int dl_consistency_parse(const char *text, struct dl_parallel_opts *o, struct dl_error *err)
{
    if (strcmp(text, "sync") == 0) {
        o->consistency = DL_CONS_SYNC;
        return DL_OK;
    }
    if (strcmp(text, "async") == 0) {
        o->consistency = DL_CONS_ASYNC;
        o->staleness = -1;
        return DL_OK;
    }
    if (strncmp(text, "ssp:", 4) == 0) {
        int rc = dl_parse_int("--consistency ssp:S", text + 4, 0, 1000000, &o->staleness, err);
        if (!rc)
            o->consistency = DL_CONS_SSP;
        return rc;
    }
    if (strncmp(text, "local-sgd:", 10) == 0) {
        int rc = dl_parse_int("--consistency local-sgd:K", text + 10, 1, 1000000, &o->local_steps, err);
        if (!rc)
            o->consistency = DL_CONS_LOCAL_SGD;
        return rc;
    }
    if (strncmp(text, "gossip:", 7) == 0) {
        int rc = dl_topology_parse("--consistency gossip:TOPOLOGY", text + 7, &o->topology, err);
        if (!rc)
            o->consistency = DL_CONS_GOSSIP;
        return rc;
    }
    if (strncmp(text, "easgd:", 6) == 0)
        return parse_easgd("easgd", text + 6, DL_CONS_EASGD, o, err);
    if (strncmp(text, "easgd-async:", 12) == 0)
        return parse_easgd("easgd-async", text + 12, DL_CONS_EASGD_ASYNC, o, err);
    return dl_errorf(err, DL_ERR_SPEC, "--consistency: expected sync, ssp:S, async, local-sgd:K, gossip:TOPOLOGY, "
                     "easgd:TAU[,ALPHA] or easgd-async:TAU[,ALPHA], found '%s'", text);
}

int dl_easgd_workers(const struct dl_parallel_opts *o, int size)
{
    return o->consistency == DL_CONS_EASGD_ASYNC ? size - dl_ps_servers(o, size) : size;
}

double dl_easgd_alpha(const struct dl_parallel_opts *o, int workers)
{
    return o->easgd_alpha > 0 ? o->easgd_alpha : 0.9 / (workers > 0 ? workers : 1);
}

int dl_parallel_opts_check(const struct dl_parallel_opts *o, int size, struct dl_error *err)
{
    if (o->grad_dtype != DL_F32 && o->consistency != DL_CONS_SYNC)
        return dl_errorf(err, DL_ERR_SPEC, "--grad-dtype %s: only with --consistency sync (the gradients the ranks "
                         "sum each step)", dl_dtype_name(o->grad_dtype));
    if (o->grad_dtype != DL_F32 && o->codec.ops)
        return dl_errorf(err, DL_ERR_SPEC, "--grad-dtype %s and --compress %s: choose one (both shrink the gradient "
                         "messages)", dl_dtype_name(o->grad_dtype), o->codec.ops->name);
    if (o->gossip_overlap && o->consistency != DL_CONS_GOSSIP)
        return dl_errorf(err, DL_ERR_SPEC, "--gossip-overlap: only with --consistency gossip:TOPOLOGY");
    if (o->consistency == DL_CONS_GOSSIP && (size < 2 || size > DL_MIXING_MAX_RANKS))
        return dl_errorf(err, DL_ERR_SPEC, "--consistency gossip:%s: expected 2 to %d ranks, found %d (one rank has "
                         "no neighbours: use sync or serial training)", dl_topology_names[o->topology],
                         DL_MIXING_MAX_RANKS, size);
    int easgd = o->consistency == DL_CONS_EASGD || o->consistency == DL_CONS_EASGD_ASYNC;
    const char *name = o->consistency == DL_CONS_EASGD_ASYNC ? "easgd-async" : "easgd";
    int workers = dl_easgd_workers(o, size);
    if (o->consistency == DL_CONS_EASGD_ASYNC && size < 2)
        return dl_errorf(err, DL_ERR_SPEC, "--consistency %s:%d: expected 2 ranks or more (a server and a worker), "
                         "found 1", name, o->easgd_tau);
    if (easgd && dl_easgd_alpha(o, workers) * workers > 1 + 1e-12)
        return dl_errorf(err, DL_ERR_SPEC, "--consistency %s:%d,%g: ALPHA x workers must be at most 1 for the center "
                         "to stay between the workers, found %g x %d = %g (the default ALPHA is 0.9 / workers)",
                         name, o->easgd_tau, o->easgd_alpha, o->easgd_alpha, workers, o->easgd_alpha * workers);
    return DL_OK;
}

const struct dl_strategy_ops *dl_strategy_model(const struct dl_parallel_opts *po)
{
    switch (po->consistency) {
    case DL_CONS_SYNC: return &dl_strategy_sync;
    case DL_CONS_LOCAL_SGD: return &dl_strategy_local_sgd;
    case DL_CONS_GOSSIP: return &dl_strategy_gossip;
    case DL_CONS_EASGD: return &dl_strategy_easgd;
    case DL_CONS_EASGD_ASYNC: return &dl_strategy_easgd_worker;
    case DL_CONS_SSP:
    case DL_CONS_ASYNC: break;
    }
    return &dl_strategy_ps_worker;
}

/* The implementation rank runs. */
static const struct dl_strategy_ops *pick(const struct dl_parallel_opts *po, int size, int rank)
{
    if (size == 1)
        return &dl_strategy_serial;
    const struct dl_strategy_ops *worker = dl_strategy_model(po);
    if (worker != &dl_strategy_ps_worker && worker != &dl_strategy_easgd_worker)
        return worker;
    struct dl_rank_layout ps = {0}; /* the tables with server ranks share their layout */
    dl_ps_layout(po, size, rank, &ps);
    if (ps.role != DL_ROLE_SERVER)
        return worker;
    return worker == &dl_strategy_easgd_worker ? &dl_strategy_easgd_server : &dl_strategy_ps_server;
}

void dl_strategy_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    const struct dl_strategy_ops *ops = pick(po, size, rank);
    memset(out, 0, sizeof *out);
    out->strategy = ops->name;
    ops->layout(po, size, rank, out);
}

void dl_layout_data_parallel(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    out->role = DL_ROLE_WORKER;
    out->data_ranks = size;
    out->data_rank = rank;
    out->eval = DL_EVAL_SPLIT;
    out->checkpoint_writer = 0;
    out->sync_bn = 1;
}

void dl_layout_decentralized(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    dl_layout_data_parallel(po, size, rank, out);
    out->checkpoint_writer = -1;
    out->replicas_differ = 1;
}

int dl_strategy_create(struct dl_comm *c, struct dl_exec *e, struct dl_optim *o,
                       const struct dl_parallel_opts *po, uint64_t seed,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx,
                       struct dl_strategy **out, struct dl_error *err)
{
    const struct dl_strategy_ops *ops = pick(po, c->size, c->rank);
    const struct dl_device *dev = dl_exec_device(e);
    if (!dev->host_memory && ops != &dl_strategy_serial && ops != &dl_strategy_sync)
        return dl_errorf(err, DL_ERR_SPEC, "--consistency: %s on --device %s: it averages, mixes or sends "
                         "the weights in host loops; only sync (or one rank) trains on a device without host memory "
                         "so far", ops->name, dev->name);
    struct dl_strategy *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    s->ops = ops;
    s->grad_values = -1;
    s->comm = c;
    s->exec = e;
    s->optim = o;
    s->warn = warn;
    s->warn_ctx = warn_ctx;
    s->consensus_every = po->consensus_every;
    s->grad_norm = NAN;
    dl_strategy_layout(po, c->size, c->rank, &s->layout);
    int rc = DL_OK;
    if (po->sync_bn && c->size > 1 && s->layout.sync_bn) {
        rc = dl_sync_bn_create(c, &s->sync_bn, err);
        if (!rc) {
            e->hooks.sync_sum = dl_sync_bn_sum;
            e->hooks.sync_ctx = s->sync_bn;
        }
    }
    if (!rc)
        rc = s->ops->create(s, po, seed, err);
    if (rc) {
        s->impl = NULL; /* create cleaned up after itself */
        dl_strategy_free(s);
        return rc;
    }
    *out = s;
    return DL_OK;
}

void dl_strategy_free(struct dl_strategy *s)
{
    if (!s)
        return;
    if (s->impl && s->ops->destroy)
        s->ops->destroy(s);
    free(s->mean);
    if (s->sync_bn) {
        s->exec->hooks.sync_sum = NULL;
        s->exec->hooks.sync_ctx = NULL;
        dl_sync_bn_free(s->sync_bn);
    }
    free(s);
}

/* The whole model's gradient norm, and the gradient scaled to clip_norm
 * when above it (by clip_norm / (norm + 1e-6), as PyTorch's
 * clip_grad_norm_). */
int dl_strategy_clip_factor(struct dl_strategy *s, double sq, double *f, struct dl_error *err)
{
    int rc = s->model_sum ? s->model_sum(s->model_ctx, &sq, err) : DL_OK;
    if (rc)
        return rc;
    s->grad_norm = sqrt(sq);
    *f = s->clip_norm / (s->grad_norm + 1e-6);
    return DL_OK;
}

int dl_strategy_judge(struct dl_strategy *s, double sq, const struct dl_step_metrics *m, double *f,
                      struct dl_error *err)
{
    *f = 1;
    s->skipped = 0;
    if (s->clip_norm <= 0 && !s->guard)
        return DL_OK;
    double clip = 1;
    int rc = dl_strategy_clip_factor(s, sq, &clip, err);
    if (!rc && s->guard)
        rc = s->guard(s->guard_ctx, m, s->grad_norm, &s->skipped, err);
    if (!rc && s->clip_norm > 0 && clip < 1)
        *f = clip;
    return rc;
}

int dl_strategy_optim_step(struct dl_strategy *s, double lr, const struct dl_step_metrics *m,
                           struct dl_error *err)
{
    double t0 = dl_trace_now(s->exec->trace), sq = 0, f = 1;
    int rc = s->before_update ? s->before_update(s->update_ctx, err) : DL_OK;
    if (!rc && (s->clip_norm > 0 || s->guard))
        rc = dl_exec_grad_sq(s->exec, &sq, err);
    if (!rc)
        rc = dl_strategy_judge(s, sq, m, &f, err);
    if (!rc && !s->skipped && f < 1)
        rc = dl_exec_grad_scale(s->exec, f, err);
    if (rc || s->skipped)
        return rc;
    dl_optim_step(s->optim, lr, s->exec->weights, s->exec->dweights);
    if (dl_trace_on(s->exec->trace))
        dl_trace_span(s->exec->trace, DL_TRACE_OPTIMIZER, "optimizer", t0);
    return DL_OK;
}

int dl_strategy_sum_metrics(struct dl_strategy *s, struct dl_step_metrics *m, int global_batch, struct dl_error *err)
{
    double summed[DL_STEP_METRICS];
    dl_step_metrics_pack(m, summed);
    int rc = dl_comm_sum_small(s->comm, summed, DL_STEP_METRICS, err);
    if (rc)
        return rc;
    dl_step_metrics_unpack(summed, m);
    m->samples = global_batch;
    return DL_OK;
}

int dl_strategy_average_model(struct dl_strategy *s, const char *algorithm, struct dl_error *err)
{
    float *bufs[2] = {s->exec->weights, s->exec->state};
    long counts[2] = {s->exec->n_weights, s->exec->n_state};
    float inv = 1.0f / (float)s->comm->size;
    for (int b = 0; b < 2; b++) {
        if (counts[b] == 0)
            continue;
        int rc = dl_allreduce(s->comm, algorithm, bufs[b], DL_F32, (size_t)counts[b], NULL, err);
        if (rc)
            return rc;
        for (long i = 0; i < counts[b]; i++)
            bufs[b][i] *= inv;
    }
    return DL_OK;
}

int dl_strategy_consensus(struct dl_strategy *s, long step, double *out, struct dl_error *err)
{
    *out = NAN;
    if (s->layout.eval != DL_EVAL_SPLIT || s->consensus_every <= 0 || step % s->consensus_every != 0)
        return DL_OK;
    if (!s->layout.replicas_differ) {
        *out = 0;
        return DL_OK;
    }
    const float *w = s->exec->weights;
    long n = s->exec->n_weights;
    if (!s->mean && !(s->mean = dl_calloc((size_t)(n > 0 ? n : 1), sizeof *s->mean, err)))
        return DL_ERR_NOMEM;
    memcpy(s->mean, w, sizeof *w * (size_t)n);
    int rc = dl_allreduce(s->comm, "auto", s->mean, DL_F32, (size_t)n, NULL, err);
    if (rc)
        return rc;
    double apart = 0, size = 0, p = s->comm->size;
    for (long i = 0; i < n; i++) {
        double mean = s->mean[i] / p;
        apart += (w[i] - mean) * (w[i] - mean);
        size += mean * mean;
    }
    rc = dl_comm_sum_small(s->comm, &apart, 1, err);
    if (!rc)
        *out = size > 0 ? sqrt(apart / p / size) : 0;
    return rc;
}

void dl_step_metrics_pack(const struct dl_step_metrics *m, double v[DL_STEP_METRICS])
{
    v[DL_STEP_LOSS_SUM] = m->loss_sum;
    v[DL_STEP_CORRECT] = m->correct;
    v[DL_STEP_STOP] = m->stop_requested ? 1 : 0;
    v[DL_STEP_CHECKPOINT] = m->checkpoint_due ? 1 : 0;
    v[DL_STEP_ADDED_LOSS] = m->added_loss_sum;
}

void dl_step_metrics_unpack(const double v[DL_STEP_METRICS], struct dl_step_metrics *m)
{
    m->loss_sum = v[DL_STEP_LOSS_SUM];
    m->correct = v[DL_STEP_CORRECT];
    m->stop_requested = v[DL_STEP_STOP] > 0;
    m->checkpoint_due = v[DL_STEP_CHECKPOINT] > 0;
    m->added_loss_sum = v[DL_STEP_ADDED_LOSS];
}

static int wrong_role(const struct dl_strategy *s, const char *call, struct dl_error *err)
{
    return dl_errorf(err, DL_ERR_INTERNAL, "%s: a %s rank of the %s strategy has no %s", call,
                     s->layout.role == DL_ROLE_SERVER ? "server" : "worker", s->ops->name, call);
}

int dl_strategy_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    return s->ops->begin ? s->ops->begin(s, local_batch, global_batch, err) : wrong_role(s, "begin", err);
}

int dl_strategy_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                       struct dl_step_stats *st, struct dl_error *err)
{
    /* A failed batch-norm sum (the op interface cannot report it) stops the
     * step before this rank enters the gradient exchange. */
    int rc = dl_sync_bn_status(s->sync_bn, err);
    if (rc)
        return rc;
    return s->ops->finish ? s->ops->finish(s, step, lr, m, st, err) : wrong_role(s, "finish", err);
}

int dl_strategy_serve(struct dl_strategy *s, const struct dl_serve_hooks *h, struct dl_serve_result *res,
                      struct dl_error *err)
{
    memset(res, 0, sizeof *res);
    return s->ops->serve ? s->ops->serve(s, h, res, err) : wrong_role(s, "serve", err);
}

int dl_strategy_consistent(const struct dl_strategy *s)
{
    return s->ops->consistent ? s->ops->consistent(s) : 1;
}

int dl_strategy_end(struct dl_strategy *s, struct dl_error *err)
{
    return s->ops->end ? s->ops->end(s, err) : DL_OK;
}

void dl_strategy_describe(const struct dl_strategy *s, char *buf, size_t size)
{
    if (s->ops->describe)
        s->ops->describe(s, buf, size);
    else
        snprintf(buf, size, "%s", s->ops->name);
}
