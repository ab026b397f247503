/* pipeline.c: one rank's training step as a schedule driver (see
 * pipeline.h).  Chunk c of a local batch of n samples holds samples
 * [c*n/M, (c+1)*n/M).  A chunk's forward on a stage takes a free slot of
 * that stage and keeps it until its backward (zb-h1: its backward-weights
 * pass) has run; each stage has as many slots as the rank's list ever keeps
 * chunks in flight on it, counted from the list itself, so a forward always
 * finds one free. */
#include "train/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "io/trace.h"

void dl_pipeline_free(struct dl_pipeline *pl)
{
    for (int i = pl->slots - 1; pl->slot && i >= 0; i--) /* slot 0, whose parameters the others use, last */
        dl_exec_free(&pl->slot[i]);
    free(pl->slot);
    free(pl->first_slot);
    free(pl->slot_chunk);
    free(pl->stats);
    dl_schedule_free(&pl->sched);
    memset(pl, 0, sizeof *pl);
}

/* first_slot[V + 1] from the most chunks rank p's list holds at once on
 * each of its stages. */
static int count_slots(const struct dl_schedule *s, int p, int V, int *first_slot, struct dl_error *err)
{
    int *most = dl_calloc((size_t)V, sizeof *most, err);
    if (!most)
        return DL_ERR_NOMEM;
    dl_schedule_stage_slots(s, p, most);
    first_slot[0] = 0;
    for (int v = 0; v < V; v++)
        first_slot[v + 1] = first_slot[v] + most[v];
    free(most);
    return DL_OK;
}

/* dl_pipeline_init's executors, made (from seed) or only planned
 * (plan_only: kernels and arena sizes, no memory). */
static int make_slots(struct dl_pipeline *pl, const struct dl_graph *g, const struct dl_exec_options *o,
                      int max_local, int chunks, enum dl_pipe_schedule kind, int V, uint64_t seed, int plan_only,
                      struct dl_error *err)
{
    memset(pl, 0, sizeof *pl);
    int P = o->shard ? o->shard->dims.pp : 1, p = o->shard ? o->shard->pos.p : 0;
    if (max_local < chunks)
        return dl_errorf(err, DL_ERR_SPEC, "--pipeline-chunks %d: a rank's part of the batch has only %d samples; "
                         "each chunk needs one (raise --batch or lower the chunks)", chunks, max_local);
    int rc = dl_schedule_make(kind, P, chunks, V, &pl->sched, err);
    if (rc) {
        dl_error_prefix(err, "pipeline of %d ranks", P);
        return rc;
    }
    if ((o->shard ? o->shard->V : 1) != V) {
        dl_pipeline_free(pl);
        return dl_errorf(err, DL_ERR_INTERNAL, "a schedule of %d stages per rank on a shard cut for %d", V,
                         o->shard ? o->shard->V : 1);
    }
    pl->g = g;
    pl->shard = o->shard;
    pl->chunks = chunks;
    pl->V = V;
    pl->max_local = max_local;
    pl->first_slot = dl_calloc((size_t)V + 1, sizeof *pl->first_slot, err);
    rc = pl->first_slot ? count_slots(&pl->sched, p, V, pl->first_slot, err) : DL_ERR_NOMEM;
    if (!rc) {
        pl->slots = pl->first_slot[V];
        pl->slot = dl_calloc((size_t)pl->slots, sizeof *pl->slot, err);
        pl->slot_chunk = dl_calloc((size_t)pl->slots, sizeof *pl->slot_chunk, err);
        rc = pl->slot && pl->slot_chunk ? DL_OK : DL_ERR_NOMEM;
    }
    int per_chunk = (max_local + chunks - 1) / chunks;
    for (int v = 0; v < V && !rc; v++)
        for (int i = pl->first_slot[v]; i < pl->first_slot[v + 1] && !rc; i++) {
            struct dl_exec_options so = *o;
            so.stage = v;
            so.split_backward = kind == DL_SCHED_ZB_H1;
            so.share_params = i ? &pl->slot[0] : NULL;
            rc = plan_only ? dl_exec_plan(&pl->slot[i], g, per_chunk, &so, err)
                           : dl_exec_init(&pl->slot[i], g, per_chunk, seed, &so, err);
        }
    if (rc)
        dl_pipeline_free(pl);
    return rc;
}

int dl_pipeline_init(struct dl_pipeline *pl, const struct dl_graph *g, const struct dl_exec_options *o,
                     int max_local, int chunks, enum dl_pipe_schedule kind, int V, uint64_t seed,
                     struct dl_error *err)
{
    int rc = make_slots(pl, g, o, max_local, chunks, kind, V, seed, 0, err);
    long n = rc ? 0 : dl_exec_stats_count(g, NULL);
    if (n && !(pl->stats = dl_calloc((size_t)n, sizeof *pl->stats, err))) {
        dl_pipeline_free(pl);
        return DL_ERR_NOMEM;
    }
    pl->stats_n = n;
    return rc;
}

void dl_pipeline_memory(const struct dl_pipeline *pl, struct dl_pipeline_memory *out)
{
    *out = (struct dl_pipeline_memory){.slots = pl->slots, .weights = pl->slot[0].n_weights,
                                       .state = pl->slot[0].n_state};
    for (int i = 0; i < pl->slots; i++)
        out->arena_bytes += pl->slot[i].stats.arena_bytes;
}

int dl_pipeline_plan_memory(const struct dl_graph *g, const struct dl_exec_options *o, int max_local, int chunks,
                            enum dl_pipe_schedule kind, int V, struct dl_pipeline_memory *out, struct dl_error *err)
{
    struct dl_pipeline pl;
    int rc = make_slots(&pl, g, o, max_local, chunks, kind, V, 0, 1, err);
    if (rc)
        return rc;
    dl_pipeline_memory(&pl, out);
    dl_pipeline_free(&pl);
    return DL_OK;
}

/* --trace: one schedule action's pass over a chunk, enclosing its steps. */
static void trace_pass(struct dl_exec *e, const struct dl_sched_action *a, double t0)
{
    static const char *const names[] = {[DL_SCHED_FORWARD] = "forward", [DL_SCHED_BACKWARD] = "backward",
                                        [DL_SCHED_BACKWARD_INPUT] = "backward-input",
                                        [DL_SCHED_BACKWARD_WEIGHT] = "backward-weight"};
    int forward = a->op == DL_SCHED_FORWARD;
    struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = names[a->op],
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

/* The slot of action a's stage that holds its chunk, or (take) a free one
 * for it; -1 when there is none. */
static int slot_for(struct dl_pipeline *pl, const struct dl_sched_action *a, int take)
{
    int v = a->stage / pl->sched.P;
    for (int i = pl->first_slot[v]; i < pl->first_slot[v + 1]; i++)
        if (pl->slot_chunk[i] == (take ? -1 : a->chunk)) {
            if (take)
                pl->slot_chunk[i] = a->chunk;
            return i;
        }
    return -1;
}

/* Waits for the messages every slot sent (received by now, or soon: the
 * other ranks' lists only receive what was sent before). */
static int sends_wait(struct dl_pipeline *pl, struct dl_error *err)
{
    for (int i = 0; i < pl->slots; i++) {
        dl_exec_sends_wait(&pl->slot[i]);
        int rc = failed(&pl->slot[i], err);
        if (rc)
            return rc;
    }
    return DL_OK;
}

/* Slot 0's gradient hook on every other slot (hook) or on none. */
static void share_grad_hook(struct dl_pipeline *pl, int hook)
{
    for (int i = 1; i < pl->slots; i++) {
        pl->slot[i].hooks.grad_hook = hook ? pl->slot[0].hooks.grad_hook : NULL;
        pl->slot[i].hooks.grad_hook_ctx = hook ? pl->slot[0].hooks.grad_hook_ctx : NULL;
    }
}

/* Sample n of x, a batch of the network's input (values of its dtype);
 * NULL for NULL. */
static const void *input_sample(const struct dl_pipeline *pl, const void *x, long n)
{
    size_t bytes = dl_dtype_value_size(pl->g->input.dtype) * (size_t)dl_shape_count(pl->g->input);
    return x ? (const unsigned char *)x + (size_t)n * bytes : NULL;
}

/* Runs action a on its slot. */
static int run_action(struct dl_pipeline *pl, const struct dl_sched_action *a, const void *x, const int *y, int n,
                      long sample0, uint64_t step, const struct dl_pipeline_hook *hook, double *loss_sum,
                      double *correct, struct dl_error *err)
{
    int M = pl->chunks, i = slot_for(pl, a, a->op == DL_SCHED_FORWARD);
    if (i < 0)
        return dl_errorf(err, DL_ERR_INTERNAL, "no slot %s", a->op == DL_SCHED_FORWARD ? "free" : "holds the chunk");
    struct dl_exec *e = &pl->slot[i];
    int lo = (int)((long)a->chunk * n / M), hi = (int)((long)(a->chunk + 1) * n / M);
    double t0 = dl_trace_now(e->trace);
    switch (a->op) {
    case DL_SCHED_FORWARD:
        e->run.chunk = a->chunk;
        e->run.step = step;
        e->run.sample0 = sample0 + lo;
        e->run.loss_norm = 1.0 / n; /* the chunks' gradients add up to the local batch's mean */
        e->run.label_norm = pl->label_norm;
        e->run.input_resident = input_sample(pl, pl->x_resident, lo);
        e->run.labels_resident = pl->y_resident ? pl->y_resident + (long)lo * pl->g->positions : NULL;
        dl_exec_forward(e, input_sample(pl, x, lo), y + (long)lo * pl->g->positions, hi - lo, 1);
        *loss_sum += dl_exec_loss_sum(e);
        *correct += dl_exec_correct(e);
        pl->added_loss_sum += e->run.added_loss;
        if (pl->stats)
            dl_exec_add_layer_stats(e, pl->stats);
        if (hook && hook->after_forward && !e->status)
            hook->after_forward(hook->ctx, e);
        break;
    case DL_SCHED_BACKWARD: dl_exec_backward(e); break;
    case DL_SCHED_BACKWARD_INPUT: dl_exec_backward_input(e); break;
    case DL_SCHED_BACKWARD_WEIGHT: dl_exec_backward_weights(e); break;
    default: break;
    }
    if (dl_trace_on(e->trace))
        trace_pass(e, a, t0);
    if (dl_sched_op_retires(a->op))
        pl->slot_chunk[i] = -1;
    return failed(e, err);
}

int dl_pipeline_step(struct dl_pipeline *pl, const void *x, const int *y, int n, long sample0, uint64_t step,
                     const struct dl_pipeline_hook *hook, double *loss_sum, double *correct, struct dl_error *err)
{
    int p = pl->shard ? pl->shard->pos.p : 0, rc = DL_OK;
    *loss_sum = 0;
    *correct = 0;
    pl->added_loss_sum = 0;
    for (long i = 0; i < pl->stats_n; i++)
        pl->stats[i] = 0;
    for (int i = 0; i < pl->slots; i++)
        pl->slot_chunk[i] = -1;
    share_grad_hook(pl, 1);
    for (int i = 0; i < pl->sched.n[p] && !rc; i++) {
        const struct dl_sched_action *a = &pl->sched.a[p][i];
        if (a->op >= DL_SCHED_SEND_ACT) /* sends and receives are the executors' own steps */
            continue;
        rc = run_action(pl, a, x, y, n, sample0, step, hook, loss_sum, correct, err);
        if (rc) {
            char what[96];
            dl_error_prefix(err, "%s", dl_sched_action_text(a, what, sizeof what));
        }
    }
    share_grad_hook(pl, 0);
    return rc ? rc : sends_wait(pl, err);
}

int dl_pipeline_evaluate(struct dl_pipeline *pl, const void *x, const int *y, long n, double *loss_sum,
                         long correct[2], struct dl_error *err)
{
    int max_batch = pl->slot[0].max_batch;
    *loss_sum = 0;
    correct[0] = correct[1] = 0;
    for (long start = 0, chunk = 0; start < n; start += max_batch, chunk++) {
        int b = (int)(n - start < max_batch ? n - start : max_batch);
        for (int v = 0; v < pl->V; v++) { /* each stage's input comes from the stage before it */
            struct dl_exec *e = &pl->slot[pl->first_slot[v]];
            e->run.chunk = (int)chunk;
            e->run.label_norm = pl->label_norm;
            e->run.input_resident = NULL; /* the test split is copied in */
            e->run.labels_resident = NULL;
            dl_exec_forward(e, input_sample(pl, x, start), y + start * pl->g->positions, b, 0);
            int rc = failed(e, err);
            if (rc)
                return rc;
            *loss_sum += dl_exec_loss_sum(e);
            e->run.count_top5 = 1;
            correct[0] += dl_exec_correct(e);
            correct[1] += e->run.top5;
            e->run.count_top5 = 0;
        }
    }
    return sends_wait(pl, err);
}
