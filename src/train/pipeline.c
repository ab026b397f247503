/* pipeline.c: one rank's training step as a schedule driver (see
 * pipeline.h).  Chunk c of a local batch of n samples holds samples
 * [c*n/M, (c+1)*n/M); it runs in slot c mod K, which is free again when
 * chunk c needs it because both schedules retire chunks in order with at
 * most K in flight (gpipe: K = M; 1f1b: K = min(P - p, M) on stage p). */
#include "train/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "io/trace.h"

void dl_pipeline_free(struct dl_pipeline *pl)
{
    for (int i = pl->slots - 1; pl->slot && i >= 0; i--) /* slot 0, whose parameters the others use, last */
        dl_exec_free(&pl->slot[i]);
    free(pl->slot);
    dl_schedule_free(&pl->sched);
    memset(pl, 0, sizeof *pl);
}

int dl_pipeline_init(struct dl_pipeline *pl, const struct dl_graph *g, const struct dl_exec_options *o,
                     int max_local, int chunks, enum dl_pipe_schedule kind, uint64_t seed, struct dl_error *err)
{
    memset(pl, 0, sizeof *pl);
    int P = o->shard ? o->shard->dims.pp : 1, p = o->shard ? o->shard->pos.p : 0;
    if (kind != DL_SCHED_GPIPE && kind != DL_SCHED_1F1B)
        return dl_errorf(err, DL_ERR_SPEC, "--pipeline-schedule %s: not available yet (gpipe and 1f1b are)",
                         dl_schedule_kind_name(kind));
    if (max_local < chunks)
        return dl_errorf(err, DL_ERR_SPEC, "--pipeline-chunks %d: a rank's part of the batch has only %d samples; "
                         "each chunk needs one (raise --batch or lower the chunks)", chunks, max_local);
    int rc = dl_schedule_make(kind, P, chunks, 1, &pl->sched, err);
    if (rc) {
        dl_error_prefix(err, "pipeline of %d stages", P);
        return rc;
    }
    pl->g = g;
    pl->shard = o->shard;
    pl->chunks = chunks;
    pl->max_local = max_local;
    pl->slots = dl_schedule_bound(&pl->sched, p);
    pl->slot = dl_calloc((size_t)pl->slots, sizeof *pl->slot, err);
    if (!pl->slot) {
        dl_pipeline_free(pl);
        return DL_ERR_NOMEM;
    }
    int per_chunk = (max_local + chunks - 1) / chunks;
    for (int i = 0; i < pl->slots && !rc; i++) {
        struct dl_exec_options so = *o;
        so.share_params = i ? &pl->slot[0] : NULL;
        rc = dl_exec_init(&pl->slot[i], g, per_chunk, seed, &so, err);
    }
    if (rc)
        dl_pipeline_free(pl);
    return rc;
}

/* --trace: one schedule action's pass over a chunk, enclosing its steps. */
static void trace_pass(struct dl_exec *e, const struct dl_sched_action *a, double t0)
{
    int forward = a->op == DL_SCHED_FORWARD;
    struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = forward ? "forward" : "backward",
                                .chunk = a->chunk, .peer = -1, .index = -1, .kind = DL_TRACE_PASS,
                                .dir = forward ? DL_TRACE_FORWARD : DL_TRACE_BACKWARD};
    dl_trace_add(e->trace, DL_TRACE_COMPUTE, &ev);
}

static int failed(const struct dl_exec *e, struct dl_error *err)
{
    if (!e->status)
        return DL_OK;
    *err = e->err;
    return e->status;
}

int dl_pipeline_step(struct dl_pipeline *pl, const float *x, const int *y, int n, long sample0, uint64_t step,
                     const struct dl_pipeline_hook *hook, double *loss_sum, double *correct, struct dl_error *err)
{
    int p = pl->shard ? pl->shard->pos.p : 0, M = pl->chunks;
    long per_sample = dl_shape_count(pl->g->input);
    *loss_sum = 0;
    *correct = 0;
    for (int i = 0; i < pl->sched.n[p]; i++) {
        const struct dl_sched_action *a = &pl->sched.a[p][i];
        struct dl_exec *e = &pl->slot[a->chunk % pl->slots];
        int lo = (int)((long)a->chunk * n / M), hi = (int)((long)(a->chunk + 1) * n / M);
        double t0 = dl_trace_now(e->trace);
        if (a->op == DL_SCHED_FORWARD) {
            e->chunk = a->chunk;
            e->step = step;
            e->sample0 = sample0 + lo;
            e->loss_norm = 1.0 / n; /* the chunks' gradients add up to the local batch's mean */
            dl_exec_forward(e, x + lo * per_sample, y + lo, hi - lo, 1);
            *loss_sum += dl_exec_loss_sum(e);
            *correct += dl_exec_correct(e);
            if (hook && hook->after_forward && !e->status)
                hook->after_forward(hook->ctx, e);
        } else if (a->op == DL_SCHED_BACKWARD) {
            dl_exec_backward(e);
        } /* sends and receives are the executors' own steps */
        if ((a->op == DL_SCHED_FORWARD || a->op == DL_SCHED_BACKWARD) && dl_trace_on(e->trace))
            trace_pass(e, a, t0);
        int rc = failed(e, err);
        if (rc) {
            char what[96];
            dl_error_prefix(err, "%s", dl_sched_action_text(a, what, sizeof what));
            return rc;
        }
    }
    return DL_OK;
}

int dl_pipeline_evaluate(struct dl_pipeline *pl, const float *x, const int *y, long n, double *loss_sum,
                         long *correct, struct dl_error *err)
{
    struct dl_exec *e = &pl->slot[0];
    long per_sample = dl_shape_count(pl->g->input);
    *loss_sum = 0;
    *correct = 0;
    for (long start = 0, chunk = 0; start < n; start += e->max_batch, chunk++) {
        int b = (int)(n - start < e->max_batch ? n - start : e->max_batch);
        e->chunk = (int)chunk;
        dl_exec_forward(e, x + start * per_sample, y + start, b, 0);
        int rc = failed(e, err);
        if (rc)
            return rc;
        *loss_sum += dl_exec_loss_sum(e);
        *correct += dl_exec_correct(e);
    }
    return DL_OK;
}
