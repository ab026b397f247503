/* grad_sync.c: bucketed, overlapped gradient allreduce (see grad_sync.h).
 * The communication thread takes buckets in the order they became ready,
 * which is the same on every rank, so every rank runs the same sequence of
 * collectives.  With the executor's vectors on a device without host
 * memory, the thread stages each bucket (copied out to a host buffer,
 * scaled, corrected and summed there, copied back), or, given a
 * communicator of device buffers, sums it in place over that one: the
 * main thread has the device scale each bucket as it is handed over and
 * records a device mark behind the scale, and the thread queues the
 * bucket's allreduce behind that mark on the communicator's own stream
 * (comm.h's wait_mark), so the host never waits for the device there. */
#include "parallel/grad_sync.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/flight.h"
#include "core/clock.h"
#include "core/thread_label.h"
#include "io/trace.h"
#include "parallel/buckets.h"

struct bucket {
    long lo, hi;                    /* range of dweights */
    struct dl_comm *comm;           /* summed over: the data group, or per-expert weights' replicas */
    struct dl_codec_state *codec;
    float *velocity;                /* momentum correction: hi - lo floats, or NULL */
};

struct dl_grad_sync {
    struct dl_comm *comm;
    struct dl_exec *exec;
    struct dl_grad_sync_opts opts;
    struct bucket *buckets;         /* buckets[0] holds the LAST weights */
    int n_buckets;
    double scale;
    int next_ready;                 /* buckets[0..next_ready) handed over */
    /* communication thread */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int queued;                     /* jobs[0..queued) may run: buckets, then the extra values */
    int done;                       /* jobs[0..done) have run */
    double extra[DL_COMM_SMALL_SUM_MAX]; /* the caller's extra values, summed in place */
    int n_extra;
    int failed;
    int quit;
    int stuck;                      /* a wait gave up: the thread may never return */
    struct dl_error thread_err;
    double comm_seconds;
    size_t bytes_sent, dense_bytes;
    /* --trace: the step whose jobs the communication thread records (0:
     * not recorded; set by begin, read by the thread under mu), and the
     * algorithm's name in the recorder's strings. */
    long trace_step;
    const char *trace_algorithm;
    /* On a device without host memory: host copies of the gradients (and,
     * for momentum correction, the weights), n_weights values each. */
    const struct dl_device *device;
    float *staged_grad, *staged_weights;
    dl_bf16 *wire;                  /* grad_dtype bf16: a bucket's values rounded (the largest bucket) */
    /* With a communicator of device buffers: [n_buckets] marks recorded on
     * the device behind each bucket's backward and scale, which its
     * allreduce waits for (none: initialised marks). */
    struct dl_device_mark *ready;
    int n_ready;
};

/* Momentum correction (grad_sync.h): replaces the bucket's (scaled) gradient
 * g by this rank's share of the SGD step (w: the bucket's weights). */
static void correct_momentum(struct dl_grad_sync *s, struct bucket *b, float *g, const float *w)
{
    float *u = b->velocity;
    const float mu = (float)s->opts.momentum, wd = (float)(s->opts.weight_decay * s->scale);
    for (long i = 0; i < b->hi - b->lo; i++) {
        float d = g[i] + wd * w[i];
        u[i] = mu * u[i] + d;
        g[i] = s->opts.nesterov ? d + mu * u[i] : u[i];
    }
}

static void scale_values(float *g, long n, double scale)
{
    float f = (float)scale;
    for (long i = 0; i < n; i++)
        g[i] *= f;
}

/* The bucket summed in host memory: the gradients in place (scaled when
 * handed over), or on a device their staged copy (scaled here). */
static int reduce_in_host(struct dl_grad_sync *s, struct bucket *b, float *buf, const float *w,
                          struct dl_error *err)
{
    size_t n = (size_t)(b->hi - b->lo);
    struct dl_comm *c = b->comm;
    size_t dense = c->size > 1 ? (size_t)(2.0 * (c->size - 1) / c->size * 4.0 * (double)n) : 0;
    s->dense_bytes += dense;
    if (b->codec) {
        struct dl_codec_stats st = {0};
        if (b->velocity)
            correct_momentum(s, b, buf, w);
        int rc = dl_compressed_allreduce(c, b->codec, buf, n, &st, err);
        s->bytes_sent += st.bytes_sent;
        return rc;
    }
    if (s->opts.grad_dtype == DL_BF16) { /* rounded to bf16, summed in f32, rounded once, widened back */
        size_t sent = 0;
        int rc = dl_cast(buf, DL_F32, s->wire, DL_BF16, (long)n, err);
        if (rc == DL_OK)
            rc = dl_allreduce_bf16_wire(c, s->wire, n, &sent, err);
        if (rc == DL_OK)
            rc = dl_cast(s->wire, DL_BF16, buf, DL_F32, (long)n, err);
        s->bytes_sent += sent;
        return rc;
    }
    s->bytes_sent += dense;
    return dl_allreduce(c, s->opts.algorithm, buf, DL_F32, n, &s->opts.ar, err);
}

/* Bucket k (scaled by the device when handed over) summed in place over
 * the communicator of device buffers, once the device has reached the
 * bucket's mark: queued behind it on the communicator's own stream, or,
 * when the communicator cannot wait for a mark, after the device's sync. */
static int reduce_on_device(struct dl_grad_sync *s, int k, struct dl_error *err)
{
    struct dl_comm *c = s->opts.device_comm;
    const struct bucket *b = &s->buckets[k];
    long n = b->hi - b->lo;
    size_t dense = c->size > 1 ? (size_t)(2.0 * (c->size - 1) / c->size * 4.0 * (double)n) : 0;
    s->dense_bytes += dense;
    s->bytes_sent += dense;
    int rc = c->ops->wait_mark ? c->ops->wait_mark(c, &s->ready[k], err) : s->device->sync(err);
    return rc ? rc : c->ops->allreduce(c, s->exec->dweights + b->lo, DL_F32, (size_t)n, err);
}

static int reduce_bucket(struct dl_grad_sync *s, int k, struct dl_error *err)
{
    struct dl_exec *e = s->exec;
    struct bucket *b = &s->buckets[k];
    if (s->opts.device_comm)
        return reduce_on_device(s, k, err);
    if (!s->staged_grad)
        return reduce_in_host(s, b, e->dweights + b->lo, e->weights + b->lo, err);
    const struct dl_device *dev = s->device;
    float *g = s->staged_grad + b->lo, *w = s->staged_weights ? s->staged_weights + b->lo : NULL;
    size_t bytes = sizeof *g * (size_t)(b->hi - b->lo);
    int rc = dev->copy(g, e->dweights + b->lo, bytes, DL_COPY_TO_HOST, err);
    if (!rc && w)
        rc = dev->copy(w, e->weights + b->lo, bytes, DL_COPY_TO_HOST, err);
    if (!rc && s->scale != 1.0)
        scale_values(g, b->hi - b->lo, s->scale);
    if (!rc)
        rc = reduce_in_host(s, b, g, w, err);
    return rc ? rc : dev->copy(e->dweights + b->lo, g, bytes, DL_COPY_TO_DEVICE, err);
}

/* Bucket k handed over: its gradients scaled in place (in host memory; a
 * device's are scaled once staged), or with a communicator of device
 * buffers scaled by the device behind the backward that wrote them, and
 * the bucket's mark recorded behind that. */
static int scale_bucket(struct dl_grad_sync *s, int k, struct dl_error *err)
{
    const struct bucket *b = &s->buckets[k];
    if (s->opts.device_comm) {
        int rc = s->scale != 1.0 ? s->device->scale(s->exec->dweights + b->lo, b->hi - b->lo, (dl_real)s->scale, DL_F32, err)
                                 : DL_OK;
        return rc ? rc : s->device->mark_record(&s->ready[k], err);
    }
    if (s->scale != 1.0 && !s->staged_grad)
        scale_values(s->exec->dweights + b->lo, b->hi - b->lo, s->scale);
    return DL_OK;
}

/* --trace, on the communication thread: job k (a bucket, or the step's
 * metrics after the last one) ran from t0 to t1. */
static void trace_job(struct dl_grad_sync *s, int k, long step, double t0, double t1)
{
    struct dl_trace *tr = s->exec->trace;
    int bucket = k < s->n_buckets;
    struct dl_trace_event ev = {.t0 = t0, .t1 = t1, .name = bucket ? "allreduce bucket" : "allreduce step metrics",
                                .detail = s->trace_algorithm, .chunk = -1, .peer = -1, .index = bucket ? k : -1,
                                .kind = DL_TRACE_ALLREDUCE};
    if (bucket)
        ev.bytes = (long)dl_dtype_size(DL_F32) * (s->buckets[k].hi - s->buckets[k].lo);
    else
        ev.bytes = (long)sizeof(double) * s->n_extra;
    dl_trace_lane_step(tr, DL_TRACE_COMM, step);
    dl_trace_add(tr, DL_TRACE_COMM, &ev);
}

static void *comm_main(void *arg)
{
    struct dl_grad_sync *s = arg;
    dl_flight_lane(1); /* the flight recorder numbers this thread's collectives apart */
    if (s->device->bind_thread)
        s->device->bind_thread();
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && s->done == s->queued)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit)
            break;
        int k = s->done;
        long trace_step = s->trace_step;
        pthread_mutex_unlock(&s->mu);
        double t0 = dl_clock_now();
        struct dl_error e = {0};
        int rc = DL_OK;
        char label[32] = "step sums";
        if (k < s->n_buckets)
            snprintf(label, sizeof label, "bucket %d", k);
        dl_thread_label_set(label); /* what the flight recorder says the calls were for */
        if (!s->failed)
            rc = k < s->n_buckets ? reduce_bucket(s, k, &e)
                                  : dl_comm_sum_small(s->comm, s->extra, s->n_extra, &e);
        double dt = dl_clock_now() - t0;
        if (trace_step)
            trace_job(s, k, trace_step, t0, t0 + dt);
        pthread_mutex_lock(&s->mu);
        s->comm_seconds += k < s->n_buckets ? dt : 0;
        if (rc && !s->failed) {
            s->failed = rc;
            s->thread_err = e;
        }
        s->done = k + 1;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void hand_over(struct dl_grad_sync *s, long boundary)
{
    int first = s->next_ready, rc = DL_OK;
    struct dl_error e = {0};
    while (s->next_ready < s->n_buckets && s->buckets[s->next_ready].lo >= boundary && !rc)
        rc = scale_bucket(s, s->next_ready++, &e);
    if (s->next_ready == first)
        return;
    pthread_mutex_lock(&s->mu);
    if (rc && !s->failed) { /* the thread skips the jobs; end() reports it */
        s->failed = rc;
        s->thread_err = e;
    }
    s->queued = s->next_ready;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_grad_ready(void *ctx, int layer)
{
    struct dl_grad_sync *s = ctx;
    if (s->opts.overlap)
        hand_over(s, s->exec->flat.weight_begin[layer]);
}

int dl_grad_sync_create(struct dl_comm *c, struct dl_exec *e, const struct dl_grad_sync_opts *o,
                        struct dl_grad_sync **out, struct dl_error *err)
{
    struct dl_grad_sync *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->comm = c;
    s->exec = e;
    s->opts = *o;
    if (!s->opts.algorithm)
        s->opts.algorithm = "auto";
    s->device = dl_exec_device(e);
    if (o->device_comm && (s->device->host_memory || o->codec.ops || !o->device_comm->ops->device_buffers ||
                           o->device_comm->size != c->size)) {
        dl_grad_sync_free(s);
        return dl_errorf(err, DL_ERR_INTERNAL, "a communicator of device buffers sums uncompressed buckets on a "
                         "device without host memory, over the same ranks");
    }
    if (!s->device->host_memory && !o->device_comm) {
        size_t n = (size_t)(e->n_weights > 0 ? e->n_weights : 1);
        s->staged_grad = dl_calloc(n, sizeof *s->staged_grad, err);
        if (s->staged_grad && o->codec.ops && o->momentum > 0)
            s->staged_weights = dl_calloc(n, sizeof *s->staged_weights, err);
        if (!s->staged_grad || (o->codec.ops && o->momentum > 0 && !s->staged_weights)) {
            dl_grad_sync_free(s);
            return DL_ERR_NOMEM;
        }
    }
    if (!dl_allreduce_find(s->opts.algorithm)) {
        dl_grad_sync_free(s);
        return dl_errorf(err, DL_ERR_SPEC, "--allreduce: unknown algorithm '%s'", o->algorithm);
    }
    if (o->expert_replicas && (o->codec.ops || o->device_comm)) {
        dl_grad_sync_free(s);
        return dl_errorf(err, DL_ERR_INTERNAL, "per-expert buckets: without a codec, over host memory");
    }
    if (o->grad_dtype == DL_BF16 && (o->codec.ops || o->device_comm)) {
        dl_grad_sync_free(s);
        return dl_errorf(err, DL_ERR_INTERNAL, "bf16 gradient buckets: without a codec, over host memory");
    }
    if (o->grad_dtype == DL_BF16 && !(s->wire = dl_calloc((size_t)(e->n_weights > 0 ? e->n_weights : 1),
                                                           sizeof *s->wire, err))) {
        dl_grad_sync_free(s);
        return DL_ERR_NOMEM;
    }
    long per = (long)((o->bucket_bytes ? o->bucket_bytes : DL_GRAD_SYNC_BUCKET_BYTES) / dl_dtype_size(DL_F32));
    struct dl_bucket_range *ranges = NULL;
    int rc = dl_buckets_cut(e, per, 0, &ranges, &s->n_buckets, err);
    if (!rc && !(s->buckets = dl_calloc((size_t)s->n_buckets + 1, sizeof *s->buckets, err))) {
        s->n_buckets = 0;
        rc = DL_ERR_NOMEM;
    }
    for (int k = 0; !rc && k < s->n_buckets; k++)
        s->buckets[k] = (struct bucket){ranges[k].lo, ranges[k].hi, ranges[k].per_expert && o->expert_replicas
                                                                        ? o->expert_replicas : c, NULL, NULL};
    free(ranges);
    if (rc) {
        dl_grad_sync_free(s);
        return rc;
    }
    if (o->device_comm) {
        s->ready = dl_calloc((size_t)s->n_buckets + 1, sizeof *s->ready, err);
        rc = s->ready ? DL_OK : DL_ERR_NOMEM;
        for (; !rc && s->n_ready < s->n_buckets; s->n_ready++)
            rc = s->device->mark_init(&s->ready[s->n_ready], err);
        if (rc) {
            dl_grad_sync_free(s);
            return rc;
        }
    }
    if (o->codec.ops)
        for (int k = 0; k < s->n_buckets; k++) {
            uint64_t seed = o->seed * 1000003u + (uint64_t)c->rank * 7919u + (uint64_t)k;
            size_t n = (size_t)(s->buckets[k].hi - s->buckets[k].lo);
            rc = dl_codec_state_create(&o->codec, n, seed, &s->buckets[k].codec, err);
            if (!rc && o->momentum > 0) {
                s->buckets[k].velocity = dl_calloc(n, sizeof *s->buckets[k].velocity, err);
                rc = s->buckets[k].velocity ? DL_OK : DL_ERR_NOMEM;
            }
            if (rc) {
                dl_grad_sync_free(s);
                return rc;
            }
        }
    if (e->trace) {
        char name[96];
        snprintf(name, sizeof name, "%s%s", o->codec.ops ? "compressed, " : "", s->opts.algorithm);
        s->trace_algorithm = dl_trace_intern(e->trace, name, err);
        if (!s->trace_algorithm) {
            dl_grad_sync_free(s);
            return DL_ERR_NOMEM;
        }
    }
    if (pthread_create(&s->thread, NULL, comm_main, s) != 0) {
        dl_grad_sync_free(s);
        return dl_errorf(err, DL_ERR_INTERNAL, "cannot start the communication thread");
    }
    s->thread_started = 1;
    *out = s;
    return DL_OK;
}

void dl_grad_sync_free(struct dl_grad_sync *s)
{
    if (!s)
        return;
    if (s->stuck) {
        /* The thread is blocked in a collective that will never finish: it
         * cannot be joined, and it still uses s.  The caller is about to
         * abort the job, so s is left to the process's end. */
        pthread_detach(s->thread);
        return;
    }
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    for (int k = 0; k < s->n_buckets; k++) {
        dl_codec_state_free(s->buckets[k].codec);
        free(s->buckets[k].velocity);
    }
    for (int k = 0; k < s->n_ready; k++)
        s->device->mark_release(&s->ready[k]);
    free(s->ready);
    free(s->buckets);
    free(s->staged_grad);
    free(s->staged_weights);
    free(s->wire);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void dl_grad_sync_begin(struct dl_grad_sync *s, double scale)
{
    s->scale = scale;
    s->next_ready = 0;
    pthread_mutex_lock(&s->mu);
    s->queued = s->done = 0;
    s->trace_step = dl_trace_on(s->exec->trace) ? dl_trace_step(s->exec->trace) : 0;
    s->comm_seconds = 0;
    s->bytes_sent = s->dense_bytes = 0;
    pthread_mutex_unlock(&s->mu);
    s->exec->hooks.grad_hook = on_grad_ready;
    s->exec->hooks.grad_hook_ctx = s;
}

int dl_grad_sync_end(struct dl_grad_sync *s, double *extra, int n_extra, dl_grad_sync_poll_fn poll,
                     void *poll_ctx, struct dl_grad_sync_stats *stats, struct dl_error *err)
{
    if (n_extra > DL_COMM_SMALL_SUM_MAX)
        return dl_errorf(err, DL_ERR_INTERNAL, "dl_grad_sync_end: %d extra values, at most %d", n_extra,
                         DL_COMM_SMALL_SUM_MAX);
    hand_over(s, 0); /* layers without weights may not have triggered the last buckets */
    double t0 = dl_clock_now();
    int rc = DL_OK, jobs = s->n_buckets;
    pthread_mutex_lock(&s->mu);
    if (n_extra > 0) {
        s->n_extra = n_extra;
        memcpy(s->extra, extra, sizeof *extra * (size_t)n_extra);
        s->queued = ++jobs;
        pthread_cond_broadcast(&s->cv);
    }
    while (s->done < jobs) {
        dl_clock_timedwait(&s->cv, &s->mu, 0.2);
        if (s->done < jobs && poll) {
            pthread_mutex_unlock(&s->mu);
            rc = poll(poll_ctx, dl_clock_now() - t0, err);
            pthread_mutex_lock(&s->mu);
            if (rc) {
                s->stuck = 1;
                break;
            }
        }
    }
    if (!rc && s->failed) {
        rc = s->failed;
        if (err)
            *err = s->thread_err;
    }
    if (!rc && n_extra > 0)
        memcpy(extra, s->extra, sizeof *extra * (size_t)n_extra);
    pthread_mutex_unlock(&s->mu);
    s->exec->hooks.grad_hook = NULL;
    if (dl_trace_on(s->exec->trace)) {
        struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = "wait allreduces", .chunk = -1,
                                    .peer = -1, .index = -1, .kind = DL_TRACE_GRAD_WAIT};
        dl_trace_add(s->exec->trace, DL_TRACE_COMPUTE, &ev);
    }
    if (stats) {
        stats->comm_seconds = s->comm_seconds;
        stats->exposed_seconds = dl_clock_now() - t0;
        stats->bytes_sent = s->bytes_sent;
        stats->dense_bytes = s->dense_bytes;
        stats->buckets = s->n_buckets;
    }
    return rc;
}
