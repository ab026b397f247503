/* comm_steps.c: the communication steps of a parallel run (doc/parallel.md),
 * run by kind: tensor parallelism's (TP, ALLREDUCE) in tp_steps.c, and here
 * a pipeline's receives and sends of the tensors that cross a stage edge.
 * Pipeline sends never block: what they send is copied into
 * the executor's outbox (made at set-up, an entry per message step, each
 * holding the largest message), whose buffers are reused once their sends
 * have completed (dl_exec_sends_wait waits for the rest), so the arena is free
 * again at once and no rank ever waits for a peer to receive; receives
 * wait.  That is the execution model under which the schedules are proved
 * free of deadlock (parallel/schedule.h): waiting for a send to complete
 * before reusing its buffer in place would add dependencies the schedule
 * does not have (the interleaved schedule deadlocks on them). */
#include "exec/exec_impl.h"

#include "comm/tags.h"
#include "io/trace.h"

#include <stdlib.h>
#include <string.h>

/* Pipeline message tags (comm/tags.h): (chunk, stage edge, direction) on
 * the pipeline group's communicator. */
static int pipeline_tag(const struct dl_exec *e, const struct dl_exec_step *s, int grad)
{
    return dl_tag_pipeline(e->run.chunk, s->edge, e->shard->n_edges, grad);
}

static void failed(struct dl_exec *e, int rc)
{
    if (rc && !e->status)
        e->status = rc;
}

/* The tensor whose message step s sends: a SEND step's source (forward),
 * a RECV step's received tensor when its gradient goes back (backward);
 * NULL for a step that sends nothing. */
static const struct dl_exec_tensor *sent_tensor(const struct dl_exec_impl *m, const struct dl_exec_step *s)
{
    if (s->kind == DL_STEP_SEND)
        return &m->tensors[s->src];
    if (s->kind == DL_STEP_RECV && m->tensors[s->out].needs_grad)
        return &m->tensors[s->out];
    return NULL;
}

int dl_exec_outbox_init(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    int n = 0;
    size_t most = 0;
    for (int s = 0; s < m->n_steps; s++) {
        const struct dl_exec_tensor *t = sent_tensor(m, &m->steps[s]);
        size_t bytes = t ? dl_exec_bytes(t, e->max_batch) : 0;
        n += t != NULL;
        most = bytes > most ? bytes : most;
    }
    if (!n)
        return DL_OK;
    if (!(m->outbox = dl_calloc((size_t)n, sizeof *m->outbox, err)))
        return DL_ERR_NOMEM;
    m->n_outbox = n;
    for (int i = 0; i < n; i++) {
        if (!(m->outbox[i].buf = dl_calloc(most, 1, err)))
            return DL_ERR_NOMEM;
        m->outbox[i].cap = most;
    }
    return DL_OK;
}

/* An outbox entry whose send has completed (tested on the way), or a new
 * one when all are in flight (more messages than the executor has message
 * steps: several chunks' sends not yet received); NULL when out of
 * memory. */
static struct dl_exec_outgoing *free_outgoing(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_comm *p = m->pipeline_comm;
    for (int i = 0; i < m->n_outbox; i++) {
        struct dl_exec_outgoing *o = &m->outbox[i];
        int done = !o->req.active;
        if (!done)
            failed(e, p->ops->test(p, &o->req, &done, &e->err));
        if (done)
            return o;
    }
    struct dl_exec_outgoing *grown = realloc(m->outbox, sizeof *grown * (size_t)(m->n_outbox + 1));
    if (!grown)
        return NULL;
    m->outbox = grown;
    memset(&grown[m->n_outbox], 0, sizeof *grown);
    return &grown[m->n_outbox++];
}

/* Sends a copy of bytes of data to pipeline rank peer without waiting for
 * it to be received. */
static void send_copy(struct dl_exec *e, const void *data, size_t bytes, int peer, int tag)
{
    struct dl_comm *p = e->impl->pipeline_comm;
    struct dl_exec_outgoing *o = free_outgoing(e);
    if (o && o->cap < bytes) {
        free(o->buf);
        o->cap = 0;
        if ((o->buf = malloc(bytes ? bytes : 1)) != NULL)
            o->cap = bytes;
    }
    if (!o || !o->buf) {
        failed(e, dl_errorf(&e->err, DL_ERR_NOMEM, "out of memory (a pipeline message of %zu bytes)", bytes));
        return;
    }
    memcpy(o->buf, data, bytes);
    failed(e, p->ops->isend(p, o->buf, bytes, peer, tag, &o->req, &e->err));
}

void dl_exec_comm_forward(struct dl_exec *e, struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_comm *p = m->pipeline_comm;
    size_t bytes;
    switch (s->kind) {
    case DL_STEP_TP:
    case DL_STEP_ALLREDUCE:
        dl_exec_tp_forward(e, s);
        break;
    case DL_STEP_RECV:
        bytes = dl_exec_bytes(&m->tensors[s->out], e->run.batch);
        failed(e, p->ops->recv(p, m->tensors[s->out].data, bytes, s->peer, pipeline_tag(e, s, 0), &e->err));
        break;
    case DL_STEP_SEND:
        bytes = dl_exec_bytes(&m->tensors[s->src], e->run.batch);
        send_copy(e, m->tensors[s->src].data, bytes, s->peer, pipeline_tag(e, s, 0));
        break;
    default:
        break;
    }
}

void dl_exec_comm_backward(struct dl_exec *e, struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_comm *p = m->pipeline_comm;
    if (s->kind == DL_STEP_TP) {
        dl_exec_tp_backward(e, s);
    } else if (s->kind == DL_STEP_RECV && m->tensors[s->out].needs_grad) { /* the gradient goes back */
        struct dl_exec_tensor *t = &m->tensors[s->out];
        size_t bytes = dl_exec_bytes(t, e->run.batch);
        if (!m->written[s->out]) /* nothing here read it */
            memset(t->grad, 0, bytes);
        send_copy(e, t->grad, bytes, s->peer, pipeline_tag(e, s, 1));
    } else if (s->kind == DL_STEP_SEND && m->tensors[s->src].needs_grad) { /* what a later stage computed for it */
        struct dl_exec_tensor *t = &m->tensors[s->src];
        long n = (long)e->run.batch * t->count;
        dl_real *into = s->via_scratch[0] ? s->scratch[0] : t->grad;
        failed(e, p->ops->recv(p, into, sizeof *into * (size_t)n, s->peer, pipeline_tag(e, s, 1), &e->err));
        if (s->via_scratch[0])
            dl_exec_add_into(e, NULL, t->grad, into, n, 1);
        m->written[s->src] = 1;
    }
}

void dl_exec_comm_status(struct dl_exec *e, int rc)
{
    failed(e, rc);
}

int dl_exec_sends_wait(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    double t0 = dl_trace_now(e->trace);
    int waited = 0;
    for (int i = 0; i < m->n_outbox; i++)
        if (m->outbox[i].req.active) {
            failed(e, m->pipeline_comm->ops->wait(m->pipeline_comm, &m->outbox[i].req, &e->err));
            waited = 1;
        }
    if (waited && dl_trace_on(e->trace)) {
        struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = "wait sends", .chunk = -1, .peer = -1,
                                    .index = -1, .kind = DL_TRACE_SEND};
        dl_trace_add(e->trace, DL_TRACE_COMPUTE, &ev);
    }
    return e->status;
}

void dl_exec_comm_free(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    for (int i = 0; i < m->n_outbox; i++)
        if (!m->outbox[i].req.active) /* in flight after a failure: the backend may still read it */
            free(m->outbox[i].buf);
    free(m->outbox);
    m->outbox = NULL;
    m->n_outbox = 0;
}
