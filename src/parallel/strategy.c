/* strategy.c: what every consistency strategy shares (see strategy.h): the
 * --consistency option, the choice of a rank's implementation, synchronised
 * batch norm where a strategy honours it, the step metrics' packing, and the
 * calls the training loop makes. */
#include "parallel/strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "io/trace.h"
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
    return dl_errorf(err, DL_ERR_SPEC, "--consistency: expected sync, ssp:S, async or local-sgd:K, found '%s'", text);
}

/* The implementation rank runs. */
static const struct dl_strategy_ops *pick(const struct dl_parallel_opts *po, int size, int rank)
{
    if (size == 1)
        return &dl_strategy_serial;
    switch (po->consistency) {
    case DL_CONS_SYNC: return &dl_strategy_sync;
    case DL_CONS_LOCAL_SGD: return &dl_strategy_local_sgd;
    case DL_CONS_SSP:
    case DL_CONS_ASYNC: break;
    }
    struct dl_rank_layout ps = {0}; /* both parameter-server tables share their layout */
    dl_strategy_ps_worker.layout(po, size, rank, &ps);
    return ps.role == DL_ROLE_SERVER ? &dl_strategy_ps_server : &dl_strategy_ps_worker;
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

int dl_strategy_create(struct dl_comm *c, struct dl_exec *e, struct dl_optim *o,
                       const struct dl_parallel_opts *po, uint64_t seed,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx,
                       struct dl_strategy **out, struct dl_error *err)
{
    struct dl_strategy *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    s->ops = pick(po, c->size, c->rank);
    s->comm = c;
    s->exec = e;
    s->optim = o;
    s->warn = warn;
    s->warn_ctx = warn_ctx;
    dl_strategy_layout(po, c->size, c->rank, &s->layout);
    int rc = DL_OK;
    if (po->sync_bn && c->size > 1 && s->layout.sync_bn) {
        rc = dl_sync_bn_create(c, &s->sync_bn, err);
        if (!rc) {
            e->sync_sum = dl_sync_bn_sum;
            e->sync_ctx = s->sync_bn;
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
    if (s->sync_bn) {
        s->exec->sync_sum = NULL;
        s->exec->sync_ctx = NULL;
        dl_sync_bn_free(s->sync_bn);
    }
    free(s);
}

void dl_strategy_optim_step(struct dl_strategy *s, double lr)
{
    double t0 = dl_trace_now(s->exec->trace);
    dl_optim_step(s->optim, lr, s->exec->weights, s->exec->dweights);
    if (dl_trace_on(s->exec->trace))
        dl_trace_span(s->exec->trace, DL_TRACE_OPTIMIZER, "optimizer", t0);
}

void dl_step_metrics_pack(const struct dl_step_metrics *m, double v[DL_STEP_METRICS])
{
    v[DL_STEP_LOSS_SUM] = m->loss_sum;
    v[DL_STEP_CORRECT] = m->correct;
    v[DL_STEP_STOP] = m->stop_requested ? 1 : 0;
    v[DL_STEP_CHECKPOINT] = m->checkpoint_due ? 1 : 0;
}

void dl_step_metrics_unpack(const double v[DL_STEP_METRICS], struct dl_step_metrics *m)
{
    m->loss_sum = v[DL_STEP_LOSS_SUM];
    m->correct = v[DL_STEP_CORRECT];
    m->stop_requested = v[DL_STEP_STOP] > 0;
    m->checkpoint_due = v[DL_STEP_CHECKPOINT] > 0;
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
