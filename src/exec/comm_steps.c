/* comm_steps.c: the communication steps of a parallel run (doc/parallel.md):
 * tensor parallelism's slices, gathers and sums over the tensor group, and
 * a pipeline's receives and sends of the tensors that cross a stage edge.
 * Their tensors are plain (NCHW): a rank's channel block t of a tensor of C
 * channels holds channels [t*C/T, (t+1)*C/T) of every sample.  Every rank of
 * a tensor group has the same step list, so their collectives come in the
 * same order.  Pipeline sends never block: what they send is copied into
 * the executor's outbox (made at set-up, an entry per message step, each
 * holding the largest message), whose buffers are reused once their sends
 * have completed (dl_exec_sends_wait waits for the rest), so the arena is free
 * again at once and no rank ever waits for a peer to receive; receives
 * wait.  That is the execution model under which the schedules are proved
 * free of deadlock (parallel/schedule.h): waiting for a send to complete
 * before reusing its buffer in place would add dependencies the schedule
 * does not have (the interleaved schedule deadlocks on them).  The group
 * reductions of a class-split loss are here too. */
#include "exec/exec_impl.h"

#include "comm/tags.h"
#include "io/trace.h"

#include <stdlib.h>
#include <string.h>

/* Pipeline message tags (comm/tags.h): (chunk, stage edge, direction) on
 * the pipeline group's communicator. */
static int pipeline_tag(const struct dl_exec *e, const struct dl_exec_step *s, int grad)
{
    return dl_tag_pipeline(e->chunk, s->edge, e->shard->n_edges, grad);
}

/* Where a tensor-parallel step's buffers are: NULL, host memory (the
 * host's, or a device's host mirrors, staging.c); else that device's
 * memory, which only its copy_rows and accumulate touch (in place, over
 * the tensor group's communicator of device buffers).  Row r of rows of B
 * values each, from src + r * src_pitch to dst + r * dst_pitch (pitches
 * in values), or added there when acc: the same sums either way, so both
 * give the same bits.  On the device a copy is one call; a sum, one call
 * a row (in order: errors go to e). */
static void move_rows(struct dl_exec *e, const struct dl_device *dev, dl_real *dst, long dst_pitch,
                      const dl_real *src, long src_pitch, long B, int rows, int acc)
{
    int rc = DL_OK;
    if (!dev) {
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            dl_real *d = dst + (long)r * dst_pitch;
            const dl_real *v = src + (long)r * src_pitch;
            for (long i = 0; i < B; i++)
                d[i] = acc ? d[i] + v[i] : v[i];
        }
    } else if (!acc) {
        rc = dev->copy_rows(dst, sizeof *dst * (size_t)dst_pitch, src, sizeof *src * (size_t)src_pitch,
                            sizeof *dst * (size_t)B, (size_t)rows, &e->err);
    } else {
        for (int r = 0; r < rows && !rc; r++)
            rc = dev->accumulate(dst + (long)r * dst_pitch, src + (long)r * src_pitch, B, DL_F32, &e->err);
    }
    if (rc && !e->status)
        e->status = rc;
}

/* [T][N][B] (a collective's rank order, B values per sample and rank) to
 * [N][T][B] (the whole tensor's sample order), added when acc. */
static void ranks_to_samples(struct dl_exec *e, const struct dl_device *dev, const dl_real *byrank, dl_real *whole,
                             int N, long B, int T, int acc)
{
    for (int t = 0; t < T; t++)
        move_rows(e, dev, whole + t * B, T * B, byrank + (long)t * N * B, B, B, N, acc);
}

static void samples_to_ranks(struct dl_exec *e, const struct dl_device *dev, const dl_real *whole, dl_real *byrank,
                             int N, long B, int T)
{
    for (int t = 0; t < T; t++)
        move_rows(e, dev, byrank + (long)t * N * B, B, whole + t * B, T * B, B, N, 0);
}

/* Block t of whole ([N][T][B]) into block ([N][B]), added when acc. */
static void block_of(struct dl_exec *e, const struct dl_device *dev, const dl_real *whole, dl_real *block, int N,
                     long B, int T, int t, int acc)
{
    move_rows(e, dev, block, B, whole + t * B, T * B, B, N, acc);
}

/* The host's one loop over the whole buffer, or the device's one call. */
static void add_into(struct dl_exec *e, const struct dl_device *dev, dl_real *dst, const dl_real *src, long n,
                     int acc)
{
    if (dst == src && !acc)
        return;
    if (dev) {
        int rc = acc ? dev->accumulate(dst, src, n, DL_F32, &e->err)
                     : dev->copy(dst, src, sizeof *dst * (size_t)n, DL_COPY_WITHIN, &e->err);
        if (rc && !e->status)
            e->status = rc;
        return;
    }
    if (!acc) {
        memcpy(dst, src, sizeof *dst * (size_t)n);
        return;
    }
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        dst[i] += src[i];
}

/* A collective's buffers on dev are final: the device's queued kernels
 * and copies have finished (a communicator of device buffers runs on a
 * stream of its own, which does not follow them; its collectives return
 * when they are done).  NULL: host memory, nothing to wait for. */
static int settled(const struct dl_device *dev, struct dl_error *err)
{
    return dev ? dev->sync(err) : DL_OK;
}

static int gather_all(struct dl_comm *c, const struct dl_device *dev, const void *send, void *recv, size_t bytes,
                      struct dl_error *err)
{
    int rc = settled(dev, err);
    return rc ? rc : c->ops->allgather(c, send, recv, bytes, err);
}

/* The sums of the communicators are single precision: the double build
 * (gradient checks) has no tensor parallelism. */
static int sum_all(struct dl_comm *c, const struct dl_device *dev, dl_real *buf, size_t n, struct dl_error *err)
{
#ifdef DL_REAL_DOUBLE
    (void)dev;
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "tensor parallelism runs in single precision only");
#else
    int rc = settled(dev, err);
    return rc ? rc : c->ops->allreduce(c, buf, DL_F32, n, err);
#endif
}

static int sum_scatter(struct dl_comm *c, const struct dl_device *dev, const dl_real *send, dl_real *recv,
                       size_t count, struct dl_error *err)
{
#ifdef DL_REAL_DOUBLE
    (void)dev;
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "tensor parallelism runs in single precision only");
#else
    int rc = settled(dev, err);
    return rc ? rc : c->ops->reduce_scatter(c, send, recv, DL_F32, count, err);
#endif
}

int dl_exec_comm_in_place(const struct dl_exec *e, const struct dl_exec_step *s)
{
    return e->impl->tensor_device_comm &&
           (s->kind == DL_STEP_ALLREDUCE || (s->kind == DL_STEP_TP && s->tp_in <= DL_TP_IN_GATHER));
}

/* Step s's tensor group: the communicator of device buffers, *dev its
 * device, when s runs in place; else the host's, *dev = NULL. */
static struct dl_comm *tensor_group(const struct dl_exec *e, const struct dl_exec_step *s,
                                    const struct dl_device **dev)
{
    const struct dl_exec_impl *m = e->impl;
    int in_place = dl_exec_comm_in_place(e, s);
    *dev = in_place ? m->device : NULL;
    return in_place ? m->tensor_device_comm : m->tensor_comm;
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
        size_t bytes = t ? sizeof(dl_real) * (size_t)e->max_batch * (size_t)t->count : 0;
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

size_t dl_exec_comm_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch)
{
    if (s->kind != DL_STEP_TP || s->tp_in == DL_TP_IN_AS_IS)
        return 0;
    if (s->tp_in == DL_TP_IN_SLICE_BATCH || s->tp_in == DL_TP_IN_GATHER_BATCH)
        return dl_exec_samples_workspace(e, s, batch);
    if (s->tp_in >= DL_TP_IN_SLICE_ROWS)
        return dl_exec_rows_workspace(e, s, batch);
    const struct dl_exec_impl *m = e->impl;
    long a = m->tensors[s->src].count, b = m->tensors[s->out].count;
    return sizeof(dl_real) * (size_t)batch * (size_t)(a + b); /* the whole tensor by rank, and a block */
}

static void tp_forward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *dst = &m->tensors[s->out];
    const struct dl_device *dev;
    struct dl_comm *c = tensor_group(e, s, &dev);
    /* channel groups (packed q, k, v) are blocked as samples of their own */
    int G = s->tp_groups > 1 ? s->tp_groups : 1, N = e->batch * G, T = c->size;
    long src_count = src->count / G, dst_count = dst->count / G;
    if (s->tp_in == DL_TP_IN_SLICE_BATCH || s->tp_in == DL_TP_IN_GATHER_BATCH) {
        dl_exec_samples_forward(e, s);
    } else if (s->tp_in >= DL_TP_IN_SLICE_ROWS) {
        dl_exec_rows_forward(e, s);
    } else if (s->tp_in == DL_TP_IN_SLICE) {
        block_of(e, dev, src->data, dst->data, N, dst_count, T, c->rank, 0);
    } else if (s->tp_in == DL_TP_IN_GATHER) {
        dl_real *byrank = m->mem.workspace;
        failed(e, gather_all(c, dev, src->data, byrank, sizeof *byrank * (size_t)N * (size_t)src_count, &e->err));
        ranks_to_samples(e, dev, byrank, dst->data, N, src_count, T, 0);
    } /* as it is: the same memory (an alias) */
}

static void tp_backward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *dst = &m->tensors[s->out];
    const struct dl_device *dev;
    struct dl_comm *c = tensor_group(e, s, &dev);
    int G = s->tp_groups > 1 ? s->tp_groups : 1, N = e->batch * G, T = c->size, acc = m->written[s->src];
    long src_count = src->count / G, dst_count = dst->count / G;
    if (s->tp_in == DL_TP_IN_SLICE_BATCH || s->tp_in == DL_TP_IN_GATHER_BATCH) {
        dl_exec_samples_backward(e, s);
        return;
    }
    if (s->tp_in >= DL_TP_IN_SLICE_ROWS) {
        dl_exec_rows_backward(e, s);
        return;
    }
    if (!src->needs_grad)
        return;
    dl_real *byrank = m->mem.workspace;
    if (s->tp_in == DL_TP_IN_SLICE) { /* every rank's block of the gradient, whole again */
        failed(e, gather_all(c, dev, dst->grad, byrank, sizeof *byrank * (size_t)N * (size_t)dst_count, &e->err));
        ranks_to_samples(e, dev, byrank, src->grad, N, dst_count, T, acc);
    } else if (s->tp_in == DL_TP_IN_GATHER && s->tp_sum_grad) { /* partial whole gradients: summed, blocked */
        dl_real *block = byrank + (long)N * dst_count;
        samples_to_ranks(e, dev, dst->grad, byrank, N, src_count, T);
        failed(e, sum_scatter(c, dev, byrank, block, (size_t)N * (size_t)src_count, &e->err));
        add_into(e, dev, src->grad, block, (long)N * src_count, acc);
    } else if (s->tp_in == DL_TP_IN_GATHER) { /* the whole gradient on every rank: keep the block */
        block_of(e, dev, dst->grad, src->grad, N, src_count, T, c->rank, acc);
    } else { /* as it is, the consumer's partial input gradient: summed */
        failed(e, sum_all(c, dev, dst->grad, (size_t)e->batch * (size_t)dst->count, &e->err));
        add_into(e, dev, src->grad, dst->grad, (long)e->batch * src->count, acc);
    }
    m->written[s->src] = 1;
}

void dl_exec_comm_forward(struct dl_exec *e, struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_comm *p = m->pipeline_comm;
    size_t bytes;
    switch (s->kind) {
    case DL_STEP_TP:
        tp_forward(e, s);
        break;
    case DL_STEP_ALLREDUCE: {
        const struct dl_device *dev;
        struct dl_comm *c = tensor_group(e, s, &dev);
        failed(e, sum_all(c, dev, m->tensors[s->out].data, (size_t)e->batch * (size_t)m->tensors[s->out].count,
                          &e->err));
        break;
    }
    case DL_STEP_RECV:
        bytes = sizeof(dl_real) * (size_t)e->batch * (size_t)m->tensors[s->out].count;
        failed(e, p->ops->recv(p, m->tensors[s->out].data, bytes, s->peer, pipeline_tag(e, s, 0), &e->err));
        break;
    case DL_STEP_SEND:
        bytes = sizeof(dl_real) * (size_t)e->batch * (size_t)m->tensors[s->src].count;
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
        tp_backward(e, s);
    } else if (s->kind == DL_STEP_RECV && m->tensors[s->out].needs_grad) { /* the gradient goes back */
        struct dl_exec_tensor *t = &m->tensors[s->out];
        size_t bytes = sizeof(dl_real) * (size_t)e->batch * (size_t)t->count;
        if (!m->written[s->out]) /* nothing here read it */
            memset(t->grad, 0, bytes);
        send_copy(e, t->grad, bytes, s->peer, pipeline_tag(e, s, 1));
    } else if (s->kind == DL_STEP_SEND && m->tensors[s->src].needs_grad) { /* what a later stage computed for it */
        struct dl_exec_tensor *t = &m->tensors[s->src];
        long n = (long)e->batch * t->count;
        dl_real *into = s->via_scratch[0] ? s->scratch[0] : t->grad;
        failed(e, p->ops->recv(p, into, sizeof *into * (size_t)n, s->peer, pipeline_tag(e, s, 1), &e->err));
        if (s->via_scratch[0])
            add_into(e, NULL, t->grad, into, n, 1);
        m->written[s->src] = 1;
    }
}

void dl_exec_comm_status(struct dl_exec *e, int rc)
{
    failed(e, rc);
}

void dl_exec_group_sum_reals(struct dl_exec *e, dl_real *buf, size_t n)
{
    failed(e, sum_all(e->impl->tensor_comm, NULL, buf, n, &e->err));
}

int dl_exec_group_values(const struct dl_exec *e)
{
    int most = 0;
    for (int i = e->first; i < e->end; i++) {
        long rows = (long)e->max_batch * (e->g->positions > 1 ? e->g->positions : 1);
        rows = rows < DL_SPLIT_CLASSES_ROWS ? rows : DL_SPLIT_CLASSES_ROWS;
        int n = e->shard->layer[i].split_classes ? 3 * (int)rows + 1 /* the loss's sums (correct's pairs: 2 a row) */
                : e->shard->layer[i].split_rows || e->shard->layer[i].split_batch ? 2 * e->g->layers[i].in_shape[0].c + 1 /* batch statistics */
                                                 : 0;
        most = n > most ? n : most;
    }
    return most;
}

/* Every rank's v[0..n) into m->group, [rank][n]; 0 when that failed. */
static int group_gather(struct dl_exec *e, const double *v, int n)
{
    struct dl_exec_impl *m = e->impl;
    if (e->status)
        return 0;
    if (n > m->group_cap) {
        e->status = dl_errorf(&e->err, DL_ERR_INTERNAL, "%d values to reduce over the tensor group, room for %d", n,
                              m->group_cap);
        return 0;
    }
    failed(e, m->tensor_comm->ops->allgather(m->tensor_comm, v, m->group, sizeof *v * (size_t)n, &e->err));
    return !e->status;
}

void dl_exec_group_sum(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    const double *all = e->impl->group;
    if (!group_gather(e, v, n))
        return;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int t = 0; t < e->impl->tensor_comm->size; t++)
            sum += all[(long)t * n + i];
        v[i] = sum;
    }
}

void dl_exec_group_max(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    const double *all = e->impl->group;
    if (!group_gather(e, v, n))
        return;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < e->impl->tensor_comm->size; t++)
            v[i] = all[(long)t * n + i] > v[i] ? all[(long)t * n + i] : v[i];
}

void dl_exec_group_stats_sum(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    dl_exec_group_sum(ctx, v, n);
    if (e->sync_sum && !e->status)
        e->sync_sum(e->sync_ctx, v, n);
}

void dl_exec_group_best(struct dl_exec *e, double *pairs, int n)
{
    const double *all = e->impl->group;
    if (!group_gather(e, pairs, 2 * n))
        return;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < e->impl->tensor_comm->size; t++) {
            const double *p = all + (long)t * 2 * n + 2 * i;
            if (t == 0 || p[0] > pairs[2 * i]) {
                pairs[2 * i] = p[0];
                pairs[2 * i + 1] = p[1];
            }
        }
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
