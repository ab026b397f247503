/* param_server.c: the parameter-server roles (see param_server.h): the
 * worker strategy (push gradient shards, pull weight shards) and the server
 * loop (apply gradients as they arrive, hold back fast workers past the
 * staleness bound). */
#include "parallel/param_server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/allreduce.h"

struct ps_header {
    double clock;    /* < 0: the worker is done */
    double loss_sum;
    double correct;
    double batch;
};

int dl_ps_servers(const struct dl_parallel_opts *po, int size)
{
    int k = po->ps_servers > 0 ? po->ps_servers : 1;
    if (k > size - 1)
        k = size - 1;
    return k < 1 ? 1 : k;
}

int dl_ps_is_server(const struct dl_parallel_opts *po, int rank)
{
    return rank < (po->ps_servers > 0 ? po->ps_servers : 1);
}

static void shard(long n, int servers, int s, long *lo, long *hi)
{
    *lo = (long)dl_block_lo((size_t)n, servers, s);
    *hi = (long)dl_block_lo((size_t)n, servers, s + 1);
}

/* The first worker sends its batch-norm statistics, every server its shard,
 * to rank 0. */
static int gather_final(struct dl_comm *c, struct dl_exec *e, int servers, struct dl_error *err)
{
    int rc = DL_OK;
    if (c->rank == 0) {
        for (int s = 1; s < servers && !rc; s++) {
            long lo, hi;
            shard(e->n_weights, servers, s, &lo, &hi);
            rc = c->ops->recv(c, e->weights + lo, sizeof(float) * (size_t)(hi - lo), s, DL_TAG_PS_FINAL, err);
        }
        if (!rc && e->n_state)
            rc = c->ops->recv(c, e->state, sizeof(float) * (size_t)e->n_state, servers, DL_TAG_PS_FINAL, err);
    } else if (c->rank < servers) {
        long lo, hi;
        shard(e->n_weights, servers, c->rank, &lo, &hi);
        rc = c->ops->send(c, e->weights + lo, sizeof(float) * (size_t)(hi - lo), 0, DL_TAG_PS_FINAL, err);
    } else if (c->rank == servers && e->n_state) {
        rc = c->ops->send(c, e->state, sizeof(float) * (size_t)e->n_state, 0, DL_TAG_PS_FINAL, err);
    }
    return rc;
}

/* ------------------------------------------------------------ worker */
struct worker_impl {
    int servers;
    unsigned char *msg;   /* header + largest gradient shard */
    int local_batch;
    double loss_sum;
    double correct;
};

static int worker_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    struct worker_impl *im = s->impl;
    im->local_batch = local_batch;
    return DL_OK;
}

static int worker_finish(struct dl_strategy *s, long step, double lr, double metrics[DL_STEP_METRICS],
                         struct dl_step_stats *st, struct dl_error *err)
{
    struct worker_impl *im = s->impl;
    struct dl_comm *c = s->comm;
    struct dl_exec *e = s->exec;
    struct ps_header h = {(double)step, dl_exec_loss_sum(e), (double)dl_exec_correct(e), (double)im->local_batch};
    for (int sv = 0; sv < im->servers; sv++) {
        long lo, hi;
        shard(e->n_weights, im->servers, sv, &lo, &hi);
        memcpy(im->msg, &h, sizeof h);
        memcpy(im->msg + sizeof h, e->dweights + lo, sizeof(float) * (size_t)(hi - lo));
        int rc = c->ops->send(c, im->msg, sizeof h + sizeof(float) * (size_t)(hi - lo), sv, DL_TAG_PS_GRADIENT, err);
        if (rc)
            return rc;
    }
    for (int sv = 0; sv < im->servers; sv++) {
        long lo, hi;
        shard(e->n_weights, im->servers, sv, &lo, &hi);
        int rc = c->ops->recv(c, e->weights + lo, sizeof(float) * (size_t)(hi - lo), sv, DL_TAG_PS_WEIGHTS, err);
        if (rc)
            return rc;
    }
    return DL_OK;
}

static int worker_end(struct dl_strategy *s, struct dl_error *err)
{
    struct worker_impl *im = s->impl;
    struct ps_header h = {-1, 0, 0, 0};
    for (int sv = 0; sv < im->servers; sv++) {
        int rc = s->comm->ops->send(s->comm, &h, sizeof h, sv, DL_TAG_PS_GRADIENT, err);
        if (rc)
            return rc;
    }
    return gather_final(s->comm, s->exec, im->servers, err);
}

static void worker_destroy(struct dl_strategy *s)
{
    struct worker_impl *im = s->impl;
    if (im)
        free(im->msg);
    free(im);
}

static const struct dl_strategy_ops worker_ops = {"parameter-server worker", worker_begin, worker_finish, worker_end,
                                                  worker_destroy};

int dl_strategy_ps_worker(struct dl_strategy *s, const struct dl_parallel_opts *po, struct dl_error *err)
{
    struct worker_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    im->servers = dl_ps_servers(po, s->comm->size);
    long lo, hi;
    shard(s->exec->n_weights, im->servers, 0, &lo, &hi); /* shard 0 is the largest */
    im->msg = dl_calloc(sizeof(struct ps_header) + sizeof(float) * (size_t)(hi - lo), 1, err);
    if (!im->msg) {
        free(im);
        return DL_ERR_NOMEM;
    }
    s->impl = im;
    s->ops = &worker_ops;
    return DL_OK;
}

/* ------------------------------------------------------------ server */
struct slot {
    unsigned char *msg;
    struct dl_comm_req req;
    long clock;
    int finished;
    int waiting;      /* an answer is owed */
};

static long slowest(const struct slot *w, int n)
{
    long m = -1;
    for (int i = 0; i < n; i++)
        if (!w[i].finished && (m < 0 || w[i].clock < m))
            m = w[i].clock;
    return m;
}

int dl_ps_serve(const struct dl_ps_server_args *a, struct dl_ps_result *res, struct dl_error *err)
{
    struct dl_comm *c = a->comm;
    struct dl_exec *e = a->exec;
    int workers = c->size - a->servers;
    long lo, hi;
    shard(e->n_weights, a->servers, c->rank, &lo, &hi);
    size_t bytes = sizeof(struct ps_header) + sizeof(float) * (size_t)(hi - lo);
    struct dl_optim opt = {0};
    struct slot *w = dl_calloc((size_t)workers, sizeof *w, err);
    float *grad = dl_calloc((size_t)(hi - lo > 0 ? hi - lo : 1), sizeof *grad, err);
    int rc = w && grad ? dl_optim_init(&opt, a->optim, hi - lo, err) : DL_ERR_NOMEM;
    for (int i = 0; !rc && i < workers; i++) {
        w[i].msg = dl_calloc(bytes, 1, err);
        rc = w[i].msg ? c->ops->irecv(c, w[i].msg, bytes, a->servers + i, DL_TAG_PS_GRADIENT, &w[i].req, err) : DL_ERR_NOMEM;
    }
    memset(res, 0, sizeof *res);
    int active = workers;
    while (!rc && active > 0) {
        int progress = 0;
        for (int i = 0; i < workers && !rc; i++) {
            if (w[i].finished || w[i].waiting)
                continue;
            int done = 0;
            rc = c->ops->test(c, &w[i].req, &done, err);
            if (rc || !done)
                continue;
            progress = 1;
            struct ps_header h;
            memcpy(&h, w[i].msg, sizeof h);
            if (h.clock < 0) {
                w[i].finished = 1;
                active--;
                continue;
            }
            memcpy(grad, w[i].msg + sizeof h, sizeof(float) * (size_t)(hi - lo));
            double lr = a->lr_at(a->lr_ctx, res->updates);
            dl_optim_step(&opt, lr, e->weights + lo, grad);
            res->updates++;
            w[i].clock = (long)h.clock;
            w[i].waiting = 1;
            if (a->on_update) {
                struct dl_ps_update u = {i, w[i].clock, res->updates, h.batch > 0 ? h.loss_sum / h.batch : 0,
                                         h.batch > 0 ? h.correct / h.batch : 0, (int)h.batch, 0};
                long slow = slowest(w, workers);
                u.staleness = slow >= 0 ? (int)(w[i].clock - slow) : 0;
                a->on_update(a->update_ctx, &u);
            }
        }
        /* Answer every waiting worker that is within the bound. */
        long slow = slowest(w, workers);
        for (int i = 0; i < workers && !rc; i++) {
            if (!w[i].waiting)
                continue;
            long gap = w[i].clock - slow;
            if (a->staleness >= 0 && gap > a->staleness)
                continue;
            if (gap > res->max_staleness)
                res->max_staleness = (int)gap;
            rc = c->ops->send(c, e->weights + lo, sizeof(float) * (size_t)(hi - lo), a->servers + i, DL_TAG_PS_WEIGHTS, err);
            w[i].waiting = 0;
            if (!rc)
                rc = c->ops->irecv(c, w[i].msg, bytes, a->servers + i, DL_TAG_PS_GRADIENT, &w[i].req, err);
            progress = 1;
        }
        if (!progress) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (!rc)
        rc = gather_final(c, e, a->servers, err);
    for (int i = 0; w && i < workers; i++)
        free(w[i].msg);
    free(w);
    free(grad);
    dl_optim_free(&opt);
    return rc;
}
