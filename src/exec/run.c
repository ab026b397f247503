/* run.c: forward and backward over the executor's steps (see exec.h).
 * Backward visits the steps in reverse.  When a tensor feeds several steps,
 * the first consumer to run backward writes its gradient in place and the
 * others write into a scratch buffer that is then added, which keeps the
 * kernels' "overwrite din" contract simple; a reorder's backward converts its
 * gradient back and adds it into the source's (a cast's: in f32, rounded
 * once to a bf16 source's dtype).  A layer with a micro-batch
 * plan runs each direction as its parts (micro.c); communication steps run
 * in comm_steps.c and tp_steps.c.  A split backward (zero bubble) runs the data directions
 * first and the weight directions in a later pass over the same steps.
 * While a --trace records, every step's run is an event (trace_steps.c). */
#include "exec/exec_impl.h"

#include <math.h>
#include <string.h>

#include "core/clock.h"
#include "core/rng.h"
#include "core/thread_label.h"
#include "io/trace.h"

static void fill_args(struct dl_exec *e, const struct dl_exec_step *s, struct dl_kernel_args *a, int training)
{
    const struct dl_exec_impl *m = e->impl;
    const struct dl_layer *l = &e->g->layers[s->layer];
    struct dl_op_call *c = &a->c;
    memset(a, 0, sizeof *a);
    c->attr = l->attr;
    c->batch = e->run.batch;
    c->n_in = l->n_in;
    for (int k = 0; k < l->n_in; k++) { /* the layer's shapes in the dtypes its kernel reads */
        c->in[k] = dl_exec_values(&m->tensors[s->in[k]]);
        c->din[k] = dl_tensor_of(NULL, c->in[k].shape); /* backward's (layer_backward) */
    }
    c->out = dl_exec_values(&m->tensors[s->out]);
    c->dout = dl_tensor_of(NULL, c->out.shape);
    c->param = e->param[s->layer]; /* never written through the call (a kernel that changes one copies them) */
    c->dparam = e->dparam[s->layer];
    c->saved = (dl_real *)s->saved;
    c->training = training;
    c->key = dl_rng_hash(dl_rng_hash(e->rng[s->layer].s[0], e->rng[s->layer].s[1]), e->run.step);
    c->sample0 = e->run.sample0;
    c->position0 = e->decode.position0;
    c->cache = e->decode.cache ? e->decode.cache[s->layer] : NULL;
    c->cache_len = e->decode.cache_len;
    c->doc_start = dl_exec_doc_starts(e);
    if (e->shard->layer[s->layer].split_out) /* its channels are block t of the whole tensor's */
        c->channel0 = (int)e->shard->layer[s->layer].channel0;
    c->labels = m->io.labels_in_use && e->run.labels ? m->io.labels_in_use : e->run.labels;
    c->label_norm = m->label_norm_in_use;
    c->loss_norm = e->run.loss_norm;
    c->sync_sum = e->hooks.sync_sum;
    c->sync_ctx = e->hooks.sync_ctx;
    if (m->experts.size > 1 && l->kind->expert_split)
        c->experts = &m->experts;
    if (e->shard->layer[s->layer].split_classes) { /* its class scores are block t; reduced over the group */
        c->channel0 = (int)e->shard->layer[s->layer].channel0;
        c->sync_sum = dl_exec_group_sum;
        c->sync_max = dl_exec_group_max;
        c->sync_ctx = e;
    }
    if (e->shard->layer[s->layer].split_rows || e->shard->layer[s->layer].split_batch) {
        /* on a band of rows or a share of the samples: statistics summed over the group too */
        c->sync_sum = dl_exec_group_stats_sum;
        c->sync_ctx = e;
    }
    a->workspace = m->mem.workspace;
    a->fault = &e->impl->fault;
}

/* A failure a kernel recorded while step s ran in direction dir becomes
 * the executor's status (the first error of the run). */
static void take_fault(struct dl_exec *e, const struct dl_exec_step *s, enum dl_dir dir)
{
    struct dl_exec_impl *m = e->impl;
    if (!m->fault.failed)
        return;
    if (e->status)
        memset(&m->fault, 0, sizeof m->fault);
    else
        e->status = dl_kernel_fault_error(&m->fault, &e->g->layers[s->layer], dir, &e->err);
}

/* A reorder, or a cast (a reorder between dtypes, in one layout). */
static void reorder_forward(struct dl_exec *e, const struct dl_exec_step *s)
{
    const struct dl_exec_tensor *src = &e->impl->tensors[s->src], *dst = &e->impl->tensors[s->out];
    if (src->shape.dtype != dst->shape.dtype) { /* a cast (same layout): the device's */
        int rc = e->impl->device->cast(dst->data, dst->shape.dtype, src->data, src->shape.dtype, src->count * e->run.batch,
                                       0, &e->err);
        if (rc && !e->status)
            e->status = rc;
        return;
    }
    dl_layout_reorder_dtype(src->data, src->layout, dst->data, dst->layout, e->run.batch, src->shape, 0, src->shape.dtype);
}

/* A training forward of layer i: its counters of forwards (op.h's
 * counts_forwards, host memory on every device) add 1. */
static void count_forward(struct dl_exec *e, int i)
{
    const struct dl_layer *l = &e->g->layers[i];
    for (int j = 0; j < l->n_params; j++)
        if (l->param[j].counts_forwards)
            ++*(int64_t *)(void *)e->param[i][j];
}

/* Step s forward; again: a second time, recomputing in backward
 * (recompute.c: nothing counted, its time the layer's backward time). */
/* The label of step s's messages (core/thread_label.h, for the flight
 * recorder): the layer it runs or serves. */
static void flight_label(const struct dl_exec *e, const struct dl_exec_step *s)
{
    int l = s->layer >= 0 ? s->layer : s->timed_layer;
    if (l >= 0 && l < e->g->n)
        dl_thread_label_set(e->g->layers[l].name);
}

/* The weights hook (exec.h) on layer's parameters: 0 when it failed (the
 * executor stopped with its error). */
static int weights_use(struct dl_exec *e, int layer, int use)
{
    if (!e->hooks.weights_hook || e->status)
        return !e->status;
    int rc = e->hooks.weights_hook(e->hooks.weights_ctx, layer, use, &e->err);
    if (rc)
        e->status = rc;
    return !rc;
}

static void forward_step(struct dl_exec *e, struct dl_exec_step *s, int training, int again)
{
    struct dl_exec_impl *m = e->impl;
    double *times = again ? e->stats.time_bwd : e->stats.time_fwd;
    double t0 = times || dl_trace_on(e->trace) ? dl_clock_now() : 0;
    flight_label(e, s);
    struct dl_exec_samples whole = dl_exec_samples_enter(e, s);
    if (s->kind == DL_STEP_REORDER) {
        dl_device_work_begin(m->device);
        reorder_forward(e, s);
        dl_device_work_end(m->device);
    } else if (s->kind != DL_STEP_LAYER) {
        dl_exec_comm_staged(e, s, 0);
    } else {
        void *inst = dl_exec_instance(e, s, e->run.batch);
        if (!inst) {
            dl_exec_samples_leave(e, whole);
            return;
        }
        struct dl_kernel_args a;
        fill_args(e, s, &a, training);
        if (!weights_use(e, s->layer, 1)) {
            dl_exec_samples_leave(e, whole);
            return;
        }
        dl_device_work_begin(m->device);
        if (!dl_exec_micro_run(e, s, &a, DL_DIR_FORWARD, 0))
            s->kernel->forward(inst, &a);
        dl_device_work_end(m->device);
        take_fault(e, s, DL_DIR_FORWARD);
        weights_use(e, s->layer, 0);
        if (training && !again)
            count_forward(e, s->layer);
        const struct dl_op_kind *kind = e->g->layers[s->layer].kind;
        if (training && !again && kind->added_loss && m->device->host_memory && !e->status)
            e->run.added_loss += kind->added_loss(&a.c); /* its saved state, on the host */
    }
    if (times)
        times[s->timed_layer] += dl_clock_now() - t0;
    if (dl_trace_on(e->trace))
        dl_exec_trace_step(e, s, 0, t0);
    dl_exec_samples_leave(e, whole);
}

/* --recompute full, before the backward of run r's last step: the run's
 * steps that make a tensor it does not keep run forward again, in order,
 * into their second homes (recompute.c). */
static void recompute_run(struct dl_exec *e, int r)
{
    struct dl_exec_impl *m = e->impl;
    dl_exec_recompute_again(e, r);
    for (int i = 0; i < m->n_steps && !e->status; i++)
        if (m->steps[i].run == r && m->steps[i].again)
            forward_step(e, &m->steps[i], 1, 1);
}

/* The loss's divisor for a forward of e's batch (exec.h's label_norm). */
static double label_norm_of(const struct dl_exec *e)
{
    const struct dl_graph *g = e->g;
    int ignored;
    if (e->run.label_norm > 0 || !e->run.labels || e->run.batch <= 0 || !dl_exec_runs(e, g->loss) ||
        !g->layers[g->loss].kind->ignored_label || !g->layers[g->loss].kind->ignored_label(g->layers[g->loss].attr,
                                                                                           &ignored))
        return e->run.label_norm;
    long labelled = 0, n = (long)e->run.batch * (g->positions > 1 ? g->positions : 1);
    for (long i = 0; i < n; i++)
        labelled += e->run.labels[i] != ignored;
    return (double)labelled / e->run.batch;
}

void dl_exec_forward(struct dl_exec *e, const void *x, const int *labels, int batch, int training)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_exec_tensor *input = &m->tensors[0]; /* the graph input: g->input's shape and dtype */
    e->run.input = x;
    e->run.labels = labels;
    e->run.batch = batch;
    e->run.added_loss = 0;
    m->label_norm_in_use = label_norm_of(e);
    if (m->io.input_on_device && e->run.input_resident) { /* the batch is there already */
        x = e->run.input_resident;
        m->io.labels_in_use = e->run.labels_resident;
    } else if (m->io.input_on_device) { /* the input step: the batch (and labels) copied to the device */
        m->io.labels_in_use = m->io.labels_on_device;
        size_t bytes = dl_dtype_value_size(input->shape.dtype) * (size_t)batch * (size_t)input->count;
        int rc = m->device->copy(m->io.input_on_device, x, bytes, DL_COPY_TO_DEVICE, &e->err);
        if (!rc && labels)
            rc = m->device->copy(m->io.labels_on_device, labels, sizeof *labels * (size_t)batch * (size_t)e->g->positions,
                                 DL_COPY_TO_DEVICE,
                                 &e->err);
        if (rc) {
            e->status = rc;
            return;
        }
        x = m->io.input_on_device;
    }
    dl_exec_doc_mask_forward(e, e->run.input, batch); /* from the host's ids */
    input->data = (void *)(uintptr_t)x; /* read only: no step writes the graph input */
    if (dl_exec_samples_check(e, batch, &e->err)) {
        e->status = e->err.code;
        return;
    }
    dl_exec_recompute_first(e);
    for (int i = 0; i < m->n_steps && !e->status; i++)
        forward_step(e, &m->steps[i], training, 0);
}

/* Zeroes n values of dtype at p on the executor's device (its arena, its gradients). */
static void zero_on_device(struct dl_exec *e, void *p, long n, enum dl_dtype dtype)
{
    int rc = e->impl->device->fill(p, 0, dl_dtype_value_size(dtype) * (size_t)n, &e->err);
    if (rc && !e->status)
        e->status = rc;
}

void dl_exec_zero_grad(struct dl_exec *e)
{
    if (e->dweights) /* else the gradients are the caller's (grads_elsewhere) */
        zero_on_device(e, e->dweights, e->n_weights > 0 ? e->n_weights : 1, DL_F32);
}

static void reorder_backward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *dst = &m->tensors[s->out];
    if (!src->needs_grad)
        return;
    if (src->shape.dtype != dst->shape.dtype) { /* the cast's gradient, cast back on the device */
        long n = src->count * e->run.batch;
        int rc = m->device->cast(src->grad, src->shape.dtype, dst->grad, dst->shape.dtype, n, m->written[s->src],
                                 &e->err);
        if (rc && !e->status)
            e->status = rc;
    } else {
        dl_layout_reorder_dtype(dst->grad, dst->layout, src->grad, src->layout, e->run.batch, src->shape,
                                m->written[s->src], src->shape.dtype);
    }
    m->written[s->src] = 1;
}

/* Which directions of a layer's backward a pass runs. */
enum pass { PASS_BOTH, PASS_INPUT, PASS_WEIGHTS };

static void layer_backward(struct dl_exec *e, const struct dl_exec_step *s, void *inst, enum pass pass)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_layer *l = &e->g->layers[s->layer];
    struct dl_kernel_args a;
    fill_args(e, s, &a, 1);
    struct dl_exec_tensor *out = &m->tensors[s->out];
    if (!m->written[s->out]) /* nothing consumed it: zero gradient */
        zero_on_device(e, out->grad, out->count * e->run.batch, out->shape.dtype);
    a.c.dout = dl_exec_grads(out);
    int any = 0;
    for (int k = 0; k < l->n_in && pass != PASS_WEIGHTS; k++) { /* the weights pass writes no input gradient */
        struct dl_exec_tensor *t = &m->tensors[s->in[k]];
        if (!t->needs_grad)
            continue;
        a.c.din[k] = dl_exec_grads(t);
        if (s->via_scratch[k]) /* written beside, then added (a tensor with several consumers) */
            a.c.din[k].data = s->scratch[k];
        any = 1;
    }
    /* a layer on a band of rows: the weight gradients of the pass that
     * computes them summed over the group */
    int on_band = (pass != PASS_INPUT || !dl_exec_defers_weights(e, s)) && dl_exec_rows_grad_begin(e, s, &a);
    int d0 = pass == PASS_WEIGHTS ? DL_DIR_BACKWARD_WEIGHTS : DL_DIR_BACKWARD_DATA;
    int d1 = pass == PASS_INPUT ? DL_DIR_BACKWARD_DATA : DL_DIR_BACKWARD_WEIGHTS;
    for (int d = d0; d <= d1; d++) {
        dl_device_work_begin(m->device);
        if (!dl_exec_micro_run(e, s, &a, (enum dl_dir)d, any))
            dl_kernel_run(s->kernel, inst, &a, (enum dl_dir)d, l->n_params > 0, any);
        dl_device_work_end(m->device);
        take_fault(e, s, (enum dl_dir)d);
    }
    if (on_band) /* its weight gradients from its band: summed over the group */
        dl_exec_rows_grad_end(e, s);
    for (int k = 0; k < l->n_in; k++) {
        struct dl_exec_tensor *t = &m->tensors[s->in[k]];
        if (!a.c.din[k].data)
            continue;
        if (s->via_scratch[k]) {
            long n = t->count * e->run.batch;
            int rc = m->device->accumulate(t->grad, s->scratch[k], n, t->shape.dtype, &e->err);
            if (rc && !e->status)
                e->status = rc;
        }
        m->written[s->in[k]] = 1;
    }
}

/* Backward over the steps in reverse: input and weight gradients (pass
 * BOTH), or the input gradients only, with the weight gradients of layers
 * whose kernels compute them inside backward data (INPUT). */
static void backward(struct dl_exec *e, enum pass pass)
{
    const struct dl_graph *g = e->g;
    struct dl_exec_impl *m = e->impl;
    if (e->status)
        return;
    if (pass == PASS_INPUT && !m->split_backward) {
        e->status = dl_errorf(&e->err, DL_ERR_INTERNAL, "a backward in two passes needs an executor planned for it "
                              "(split_backward)");
        return;
    }
    memset(m->written, 0, sizeof *m->written * (size_t)m->n_tensors);
    if (dl_exec_runs(e, g->loss)) { /* d(mean loss)/d(per-sample loss) = 1/N */
        struct dl_exec_tensor *loss = &m->tensors[m->out_tensor[g->loss]];
        /* on a device: written in the host's readback buffer, copied over */
        dl_real *seed = m->io.readback ? m->io.readback : loss->grad;
        for (int n = 0; n < e->run.batch; n++)
            seed[n] = (dl_real)(e->run.loss_norm > 0 ? e->run.loss_norm : 1.0 / e->run.batch);
        if (m->io.readback && (e->status = m->device->copy(loss->grad, seed, sizeof *seed * (size_t)e->run.batch,
                                                         DL_COPY_TO_DEVICE, &e->err)) != 0)
            return;
        m->written[m->out_tensor[g->loss]] = 1;
    }
    for (int i = m->n_steps - 1; i >= 0 && !e->status; i--) {
        struct dl_exec_step *s = &m->steps[i];
        for (int r = 0; r < m->recompute.n_runs && !e->status; r++) /* the runs made again before this backward */
            if (m->recompute.run_last[r] == i)
                recompute_run(e, r);
        if (e->status)
            break;
        double t0 = e->stats.time_bwd || dl_trace_on(e->trace) ? dl_clock_now() : 0;
        flight_label(e, s);
        struct dl_exec_samples whole = dl_exec_samples_enter(e, s);
        if (s->kind == DL_STEP_REORDER) {
            dl_device_work_begin(m->device);
            reorder_backward(e, s);
            dl_device_work_end(m->device);
        } else if (s->kind != DL_STEP_LAYER) {
            dl_exec_comm_staged(e, s, 1);
        } else {
            void *inst = dl_exec_instance(e, s, e->run.batch);
            if (!inst) {
                dl_exec_samples_leave(e, whole);
                return;
            }
            if (m->tensors[s->out].needs_grad && weights_use(e, s->layer, 2)) { /* else nothing upstream learns */
                layer_backward(e, s, inst, pass);
                weights_use(e, s->layer, 0);
            }
            if (e->hooks.grad_hook && pass == PASS_BOTH)
                e->hooks.grad_hook(e->hooks.grad_hook_ctx, s->layer);
        }
        if (e->stats.time_bwd)
            e->stats.time_bwd[s->timed_layer] += dl_clock_now() - t0;
        if (dl_trace_on(e->trace))
            dl_exec_trace_step(e, s, 1, t0);
        dl_exec_samples_leave(e, whole);
    }
    m->weights_pending = pass == PASS_INPUT;
}

void dl_exec_backward(struct dl_exec *e)
{
    backward(e, PASS_BOTH);
}

void dl_exec_backward_input(struct dl_exec *e)
{
    backward(e, PASS_INPUT);
}

void dl_exec_backward_weights(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    if (e->status)
        return;
    if (!m->weights_pending) {
        e->status = dl_errorf(&e->err, DL_ERR_INTERNAL, "backward weights without backward input before it");
        return;
    }
    m->weights_pending = 0;
    for (int i = m->n_steps - 1; i >= 0 && !e->status; i--) {
        struct dl_exec_step *s = &m->steps[i];
        if (s->kind != DL_STEP_LAYER)
            continue;
        double t0 = e->stats.time_wgt || dl_trace_on(e->trace) ? dl_clock_now() : 0;
        if (dl_exec_defers_weights(e, s) && m->tensors[s->out].needs_grad) {
            struct dl_exec_samples whole = dl_exec_samples_enter(e, s);
            void *inst = dl_exec_instance(e, s, e->run.batch);
            if (inst && weights_use(e, s->layer, 2)) {
                layer_backward(e, s, inst, PASS_WEIGHTS);
                weights_use(e, s->layer, 0);
            }
            dl_exec_samples_leave(e, whole);
            if (!inst)
                return;
            if (dl_trace_on(e->trace))
                dl_exec_trace_step(e, s, 1, t0);
        }
        if (e->hooks.grad_hook) /* every layer's weight gradients are final now */
            e->hooks.grad_hook(e->hooks.grad_hook_ctx, s->layer);
        if (e->stats.time_wgt)
            e->stats.time_wgt[s->timed_layer] += dl_clock_now() - t0;
    }
}

long dl_exec_stats_count(const struct dl_graph *g, long *offset)
{
    long n = 0;
    for (int i = 0; i < g->n; i++) {
        if (offset)
            offset[i] = n;
        if (g->layers[i].kind->stats)
            n += g->layers[i].kind->stats_count(g->layers[i].attr);
    }
    return n;
}

void dl_exec_add_layer_stats(struct dl_exec *e, double *acc)
{
    struct dl_exec_impl *m = e->impl;
    if (!m->device->host_memory || e->status)
        return;
    for (int i = 0; i < m->n_steps; i++) {
        const struct dl_exec_step *s = &m->steps[i];
        const struct dl_layer *l = s->kind == DL_STEP_LAYER ? &e->g->layers[s->layer] : NULL;
        if (!l || !l->kind->stats)
            continue;
        long at = 0;
        for (int j = 0; j < s->layer; j++)
            at += e->g->layers[j].kind->stats ? e->g->layers[j].kind->stats_count(e->g->layers[j].attr) : 0;
        struct dl_kernel_args a;
        fill_args(e, s, &a, 1);
        l->kind->stats(&a.c, acc + at);
    }
}

double dl_exec_loss_sum(const struct dl_exec *e)
{
    const struct dl_exec_impl *m = e->impl;
    const dl_real *loss = dl_tensor_const_f32(&e->act[e->g->loss]);
    struct dl_error err = {0};
    if (loss && m->io.readback) { /* on a device: the losses copied out */
        if (m->device->copy(m->io.readback, loss, sizeof *loss * (size_t)e->run.batch, DL_COPY_TO_HOST, &err))
            return NAN;
        loss = m->io.readback;
    }
    double s = 0;
    for (int n = 0; loss && n < e->run.batch; n++)
        s += loss[n];
    return s;
}

/* The loss reads the logits as plain (C,1,1) vectors (or blocked ones with
 * the same memory): whole, or with its classes split, this rank's block,
 * whose best (value, class) per sample is agreed over the tensor group. */
const struct dl_exec_tensor *dl_exec_scores(const struct dl_exec *e)
{
    const struct dl_exec_impl *m = e->impl;
    return &m->tensors[m->steps[m->tensors[m->out_tensor[e->g->loss]].step].in[0]];
}

int dl_exec_scores_at(struct dl_exec *e, int n, int t, dl_real *out, struct dl_error *err)
{
    const struct dl_exec_impl *m = e->impl;
    if (!dl_exec_runs(e, e->g->loss) || e->shard->layer[e->g->loss].split_classes)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "the class scores are not whole on this rank (a pipeline stage "
                         "without the loss, or classes split over the tensor group)");
    const struct dl_exec_tensor *z = dl_exec_scores(e);
    struct dl_tensor scores = dl_exec_values(z);
    int P = e->g->positions > 1 ? e->g->positions : 1;
    long C = P > 1 ? z->shape.c : z->count;
    if (n < 0 || n >= e->run.batch || t < 0 || t >= P)
        return dl_errorf(err, DL_ERR_INTERNAL, "scores of sample %d, position %d: the batch has %d of %d", n, t,
                         e->run.batch, P);
    const dl_real *sample = dl_tensor_const_f32(&scores) + (long)n * z->count;
    const dl_real *col = sample + t; /* class k at col[k * P] */
    if (m->io.readback) {
        int rc = m->device->copy(m->io.readback, sample, sizeof *col * (size_t)z->count, DL_COPY_TO_HOST, err);
        if (rc)
            return rc;
        col = m->io.readback + t;
    }
    for (long k = 0; k < C; k++)
        out[k] = col[k * P];
    return DL_OK;
}

int dl_exec_counts_top5(const struct dl_exec *e)
{
    const struct dl_graph *g = e->g;
    return g->classes > 5 && !g->float_targets && !(e->shard && e->shard->layer[g->loss].split_classes);
}

/* Whether the label's score is among the five best of the C scores at
 * col[j * P]: fewer than five score higher (ties count for the label). */
static int in_top5(const dl_real *col, long C, int P, int label)
{
    int above = 0;
    for (long j = 0; j < C && above < 5; j++)
        above += col[j * P] > col[(long)label * P];
    return above < 5;
}

int dl_exec_correct(struct dl_exec *e)
{
    const struct dl_exec_impl *m = e->impl;
    e->run.top5 = 0;
    if (!dl_exec_runs(e, e->g->loss) || e->status || e->g->float_targets) /* regression targets: no classes */
        return 0;
    const struct dl_exec_tensor *z = dl_exec_scores(e);
    int split = e->shard->layer[e->g->loss].split_classes, N = e->run.batch;
    int P = e->g->positions > 1 ? e->g->positions : 1; /* a sequence [T, C] is stored [C][T] */
    long C = P > 1 ? z->shape.c : dl_shape_count(z->shape), rows = (long)N * P;
    struct dl_tensor values = dl_exec_values(z);
    const dl_real *scores = dl_tensor_const_f32(&values);
    if (m->io.readback) { /* on a device: the scores copied out */
        int rc = m->device->copy(m->io.readback, scores, sizeof *scores * (size_t)N * (size_t)z->count, DL_COPY_TO_HOST,
                                 &e->err);
        if (rc) {
            e->status = rc;
            return 0;
        }
        scores = m->io.readback;
    }
    /* a label the loss ignores is never correct (negative ones never are) */
    int correct = 0, ignored = -1, top5 = e->run.count_top5 && dl_exec_counts_top5(e);
    const struct dl_layer *loss = &e->g->layers[e->g->loss];
    if (loss->kind->ignored_label)
        loss->kind->ignored_label(loss->attr, &ignored);
    /* the best class of each row (sample, position) with a label; with the
     * classes split, (score, class) pairs reduced over the group, as many
     * rows a call as the loss's sums (op.h's DL_SPLIT_CLASSES_ROWS) */
    for (long r0 = 0; r0 < rows && !e->status; r0 += DL_SPLIT_CLASSES_ROWS) {
        int R = (int)(rows - r0 < DL_SPLIT_CLASSES_ROWS ? rows - r0 : DL_SPLIT_CLASSES_ROWS);
        double best[split ? 2 * R : 1];
        for (int r = 0; r < R; r++) {
            long n = (r0 + r) / P, t = (r0 + r) % P, k = 0;
            const dl_real *col = scores + n * z->count + t; /* class j at col[j * P] */
            for (long j = 1; j < C; j++)
                if (col[j * P] > col[k * P])
                    k = j;
            if (split) {
                best[2 * r] = col[k * P];
                best[2 * r + 1] = (double)(e->shard->layer[e->g->loss].channel0 + k);
            } else {
                int y = e->run.labels[r0 + r], labelled = y >= 0 && y != ignored;
                correct += labelled && k == y;
                if (top5 && labelled)
                    e->run.top5 += in_top5(col, C, P, y);
            }
        }
        if (!split)
            continue;
        dl_exec_group_best(e, best, R);
        for (int r = 0; r < R && !e->status; r++)
            correct += e->run.labels[r0 + r] >= 0 && e->run.labels[r0 + r] != ignored && best[2 * r + 1] == e->run.labels[r0 + r];
    }
    return correct;
}
