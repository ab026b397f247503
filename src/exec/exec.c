/* exec.c: the executor's set-up and tear-down (see exec.h): kernel choice and
 * memory plan (steps.c, place.c), one arena for activations, gradients, kernel state
 * and workspace, the flat parameter vectors and their deterministic
 * initialisation in graph order: every parameter of the whole network is
 * drawn from the seed in order, and a rank of a parallel run keeps the
 * slices its shard holds, so every grid starts from one process's weights. */
#include "exec/exec_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tags.h"
#include "core/pages.h"

/* The planner's offsets keep their alignment only on a base at least as aligned. */
_Static_assert(DL_DEVICE_ALIGN % DL_PLAN_ALIGN == 0, "device blocks must be aligned as the arena's offsets");

/* n zeroed values (at least one) in the memory of device dev. */
static dl_real *alloc_real(const struct dl_device *dev, long n, struct dl_error *err)
{
    size_t bytes = sizeof(dl_real) * (size_t)(n > 0 ? n : 1);
    dl_real *p = dev->alloc(bytes, err);
    if (p && dev->fill(p, 0, bytes, err)) {
        dev->free(p);
        return NULL;
    }
    return p;
}

static dl_real draw(const struct dl_param_desc *p, struct dl_rng *rng)
{
    double fan = p->fan_in > 0 ? (double)p->fan_in : 1.0;
    switch (p->init) {
    case DL_INIT_ZERO: return 0;
    case DL_INIT_ONE: return 1;
    case DL_INIT_UNIFORM_FAN_IN: return (dl_real)((2.0 * dl_rng_uniform(rng) - 1.0) / sqrt(fan));
    case DL_INIT_HE_NORMAL: return (dl_real)(dl_rng_normal(rng) * sqrt(2.0 / fan));
    case DL_INIT_NORMAL: return (dl_real)(dl_rng_normal(rng) * (p->std > 0 ? p->std : 1.0));
    }
    return 0;
}

/* Draws every value of the whole parameter p in order and keeps in w (NULL:
 * none) those of slice sl, in their order. */
static void init_param(const struct dl_param_desc *p, const struct dl_param_slice *sl, dl_real *w, struct dl_rng *rng)
{
    for (long i = 0; i < p->count; i++) {
        dl_real v = draw(p, rng);
        long at = w ? dl_param_slice_index(p, sl, i) : -1;
        if (at >= 0)
            w[at] = v;
    }
}

void dl_exec_free(struct dl_exec *e)
{
    if (!e->g && !e->impl)
        return;
    int shared = e->impl && e->impl->shares_params;
    /* where weights, gradients and state live (none allocated when set-up stopped before the device) */
    const struct dl_device *dev = e->impl && e->impl->device ? e->impl->device : &dl_device_host;
    if (e->impl) {
        dl_exec_comm_free(e);
        free(e->impl->io.staging);
        free(e->impl->doc_start);
        if (e->impl->steps)
            dl_exec_free_steps(e);
        if (e->impl->own_shard.g)
            dl_shard_free(&e->impl->own_shard);
    }
    free(e->impl);
    free(e->act);
    free(e->kernel);
    free(e->fused);
    free(e->rng);
    if (!shared) {
        free(e->param);
        free(e->dparam);
        dev->free(e->weights);
        dev->free(e->dweights);
        dev->free(e->state);
        free(e->counters);
        free(e->flat.weight_begin);
        free(e->flat.weight_index);
        free(e->flat.param_first);
    }
    free(e->stats.time_fwd);
    free(e->stats.time_bwd);
    free(e->stats.time_wgt);
    for (int i = 0; e->decode.cache && !e->decode.cache_shared && i < e->g->n; i++)
        free(e->decode.cache[i]);
    free(e->decode.cache);
    memset(e, 0, sizeof *e);
}

static int copy_mbplan(struct dl_mbplan *dst, const struct dl_mbplan *src, const struct dl_graph *g,
                       struct dl_error *err)
{
    if (!src || !src->batch)
        return DL_OK;
    if (src->n_layers != g->n)
        return dl_errorf(err, DL_ERR_SPEC, "micro-batch plan for %d layers, the network has %d", src->n_layers, g->n);
    int rc = dl_mbplan_alloc(dst, g->n, src->batch, err);
    if (!rc) {
        memcpy(dst->layer, src->layer, sizeof *dst->layer * (size_t)g->n);
        dst->workspace_bytes = src->workspace_bytes;
    }
    return rc;
}

/* op.h's dl_expert_group's all-to-all over the expert group's communicator. */
static int experts_alltoallv(void *ctx, const void *send, const size_t *send_bytes, const size_t *send_at, void *recv,
                             const size_t *recv_bytes, const size_t *recv_at, struct dl_error *err)
{
    struct dl_comm *c = ctx;
    return c->ops->alltoallv(c, send, send_bytes, send_at, recv, recv_bytes, recv_at, err);
}

/* The shard e runs (the options', or the whole network's) and the
 * communicators it needs when it runs (runs = 0: it is only planned, which
 * never communicates). */
static int take_shard(struct dl_exec *e, const struct dl_graph *g, const struct dl_exec_options *o, int runs,
                      struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    if (o->shard) {
        if (o->shard->g != g)
            return dl_errorf(err, DL_ERR_INTERNAL, "the shard was planned for another graph");
        e->shard = o->shard;
    } else {
        int rc = dl_shard_whole(g, &m->own_shard, err);
        if (rc)
            return rc;
        e->shard = &m->own_shard;
    }
    const struct dl_shard *sh = e->shard;
    const struct dl_grid_dims *d = &sh->dims;
    if (o->stage < 0 || o->stage >= sh->V)
        return dl_errorf(err, DL_ERR_INTERNAL, "stage %d of a rank that holds %d", o->stage, sh->V);
    e->stage = dl_shard_stage(sh, o->stage);
    e->first = sh->stages.first[e->stage];
    e->end = sh->stages.first[e->stage + 1];
    if (runs && d->tp > 1 && (!o->tensor_comm || o->tensor_comm->size != d->tp))
        return dl_errorf(err, DL_ERR_INTERNAL, "a shard of %d tensor ranks needs their communicator", d->tp);
    if (runs && (d->pp > 1 || sh->n_edges) && (!o->pipeline_comm || o->pipeline_comm->size != d->pp))
        return dl_errorf(err, DL_ERR_INTERNAL, "a shard of %d pipeline stages needs their communicator", sh->stages.S);
    if (2L * sh->n_edges > DL_TAG_PIPELINE_END)
        return dl_errorf(err, DL_ERR_SPEC, "%d tensors cross the pipeline's stage cuts; the message tags (comm/tags.h) "
                         "number at most %d: use fewer stages", sh->n_edges, DL_TAG_PIPELINE_END / 2);
    const struct dl_comm *tdc = o->tensor_device_comm;
    if (tdc && (!o->tensor_comm || tdc->size != o->tensor_comm->size || tdc->rank != o->tensor_comm->rank ||
                !tdc->ops->device_buffers || !o->device || o->device->host_memory))
        return dl_errorf(err, DL_ERR_INTERNAL, "the tensor group's communicator of device buffers ('%s', %d ranks) "
                         "needs an executor on a device without host memory and the group's communicator of the "
                         "same ranks", tdc->ops->name, tdc->size);
    int ep = dl_grid_ep(d);
    if (runs && ep > 1 && (!o->experts_comm || o->experts_comm->size != ep))
        return dl_errorf(err, DL_ERR_INTERNAL, "a shard of %d expert ranks needs their communicator", ep);
    if (ep > 1 && o->experts_comm)
        m->experts = (struct dl_expert_group){ep, o->experts_comm->rank, experts_alltoallv, o->experts_comm};
    m->tensor_comm = o->tensor_comm;
    m->pipeline_comm = o->pipeline_comm;
    m->tensor_device_comm = o->tensor_device_comm;
    e->g = &e->shard->local;
    return DL_OK;
}

/* Kernel choices o's (or none) on dev: only kernels of the device whose
 * memory the executor works in (the host's for the emulated device) run
 * its layers; a --kernel choice of another device's is refused. */
static int kernels_on(const struct dl_exec_options *o, const struct dl_device *dev, struct dl_kernel_choices *out,
                      struct dl_error *err)
{
    if (o->kernels && o->kernels->device != DL_DEVICE_CPU && o->kernels->device != dev->kernels)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "kernel choices for %s cannot run on %s",
                         dl_device_names[o->kernels->device], dev->name);
    if (o->kernels)
        *out = *o->kernels;
    else
        memset(out, 0, sizeof *out);
    out->device = dev->kernels;
    return DL_OK;
}

/* What a device without host memory cannot run: layout reorders unless
 * its kernels are the host's (the emulated device; casts between dtypes
 * are the device's own, device.h's cast); DL_ERR_SPEC naming it.
 * Communication steps -- slices, gathers, halo exchanges and shares of
 * layers split by rows or samples among them -- run on host mirrors
 * (staging.c), and such a layer's weight gradients are summed in a host
 * copy (tp_rows.c). */
static int device_runs_steps(const struct dl_exec *e, struct dl_error *err)
{
    const struct dl_exec_impl *m = e->impl;
    const struct dl_device *dev = m->device;
    if (dev->host_memory)
        return DL_OK;
    for (int s = 0; s < m->n_steps; s++) {
        const struct dl_exec_step *st = &m->steps[s];
        /* a cast between dtypes is the device's (its cast); a layout reorder a host loop */
        if (st->kind == DL_STEP_REORDER && dev->kernels != DL_DEVICE_CPU &&
            m->tensors[st->src].layout != m->tensors[st->out].layout)
            return dl_errorf(err, DL_ERR_SPEC, "--device %s: a reorder step between memory layouts is a host loop; "
                             "its kernels must agree on layouts", dev->name);
    }
    return DL_OK;
}

/* n_weights and n_state: the parameters of every layer the shard runs, in
 * every stage of the rank (executors of its other stages share them). */
static void count_params(struct dl_exec *e)
{
    double trainable = 0, state = 0;
    e->n_counters = 0;
    for (int i = 0; i < e->g->n; i++)
        if (dl_shard_runs(e->shard, i)) {
            dl_layer_param_tally(&e->g->layers[i], &trainable, &state);
            e->n_counters += dl_layer_counters(&e->g->layers[i]);
        }
    e->n_weights = (long)trainable;
    e->n_state = (long)state;
}

static int index_weights(struct dl_exec *e, struct dl_error *err);

static int plan_with(struct dl_exec *e, const struct dl_graph *g, int max_batch, const struct dl_exec_options *o,
                     const struct dl_mbplan *mbplan, int runs, struct dl_error *err)
{
    memset(e, 0, sizeof *e);
    const struct dl_device *dev = o->device ? o->device : &dl_device_host;
    struct dl_kernel_choices kernels;
    int rc = kernels_on(o, dev, &kernels, err);
    if (rc)
        return rc;
    e->impl = dl_calloc(1, sizeof *e->impl, err);
    if (!e->impl)
        return DL_ERR_NOMEM;
    rc = take_shard(e, g, o, runs, err);
    if (rc) {
        dl_exec_free(e);
        return rc;
    }
    g = e->g;
    count_params(e);
    if (!o->share_params && (rc = index_weights(e, err)) != DL_OK) {
        dl_exec_free(e);
        return rc;
    }
    e->max_batch = max_batch;
    e->impl->device = dev;
    e->impl->split_backward = o->split_backward;
    e->impl->recompute.mode = o->recompute;
    e->impl->keep_outputs = o->keep_outputs;
    size_t n = (size_t)g->n;
    e->act = dl_calloc(n, sizeof *e->act, err);
    e->kernel = dl_calloc(n, sizeof *e->kernel, err);
    e->fused = dl_calloc(n, sizeof *e->fused, err);
    rc = !e->act || !e->kernel || !e->fused ? DL_ERR_NOMEM : DL_OK;
    if (!rc)
        rc = copy_mbplan(&e->impl->mbplan, mbplan, g, err);
    if (!rc)
        rc = dl_exec_build_steps(e, &kernels, err);
    if (!rc)
        rc = device_runs_steps(e, err);
    if (!rc)
        rc = dl_exec_place(e, err);
    if (rc) {
        dl_exec_free(e);
        return err->code ? err->code : rc;
    }
    return DL_OK;
}

int dl_exec_plan(struct dl_exec *e, const struct dl_graph *g, int max_batch, const struct dl_exec_options *o,
                 struct dl_error *err)
{
    const struct dl_exec_options none = {0};
    return plan_with(e, g, max_batch, o ? o : &none, o ? o->plan : NULL, 0, err);
}

/* Points every tensor, state block, scratch and the workspace into the arena. */
static int alloc_arena(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    m->mem.arena = m->device->alloc(e->stats.arena_bytes, err);
    if (!m->mem.arena) {
        dl_error_prefix(err, "arena of %zu bytes", e->stats.arena_bytes);
        return DL_ERR_NOMEM;
    }
    unsigned char *base = m->mem.arena;
    int rc = m->device->fill(base, 0, e->stats.arena_bytes, err);
    if (rc)
        return rc;
#define AT(b) ((b) >= 0 ? (void *)(base + m->mem.bufs[b].offset) : NULL)
    for (int t = 0; t < m->n_tensors; t++) { /* an alias's tensor comes before it */
        struct dl_exec_tensor *x = &m->tensors[t];
        x->data = x->alias >= 0 ? m->tensors[x->alias].data : AT(x->buf_data);
        x->grad = AT(x->buf_grad);
        x->data_first = x->data; /* --recompute full: its two homes (recompute.c) */
        x->data_again = x->alias >= 0 ? m->tensors[x->alias].data_again : AT(x->buf_again);
    }
    for (int s = 0; s < m->n_steps; s++) {
        struct dl_exec_step *st = &m->steps[s];
        st->saved = AT(st->buf_saved);
        st->saved_first = st->saved;
        st->saved_again = AT(st->buf_saved_again);
        for (int j = 0; j < DL_MAX_INPUTS; j++)
            st->scratch[j] = AT(st->buf_scratch[j]);
    }
    m->mem.workspace = AT(m->mem.buf_workspace);
#undef AT
    for (int i = 0; i < e->g->n; i++) { /* outputs not held after forward (made again, or gone) are NULL */
        const struct dl_exec_tensor *x = m->out_tensor[i] >= 0 ? &m->tensors[m->out_tensor[i]] : NULL;
        while (x && x->alias >= 0)
            x = &m->tensors[x->alias];
        e->act[i].data = x && x->run < 0 && x->held ? m->tensors[m->out_tensor[i]].data : NULL;
    }
    return DL_OK;
}

/* On a device without host memory: where each forward copies the batch
 * and labels to, and the host buffer losses and scores are copied out to. */
static int alloc_transfers(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    if (m->device->host_memory)
        return DL_OK;
    size_t B = (size_t)e->max_batch;
    const struct dl_exec_tensor *input = &m->tensors[0]; /* the graph input, of g->input's dtype */
    m->io.input_on_device = m->device->alloc(dl_dtype_value_size(input->shape.dtype) * B * (size_t)input->count, err);
    m->io.labels_on_device = m->device->alloc(sizeof(int) * B * (size_t)e->g->positions, err);
    long out = dl_exec_runs(e, e->g->loss) ? dl_exec_scores(e)->count : 1;
    m->io.readback = dl_calloc(B * (size_t)(out > 1 ? out : 1), sizeof(dl_real), err);
    return m->io.input_on_device && m->io.labels_on_device && m->io.readback ? DL_OK : DL_ERR_NOMEM;
}

/* a and b run the same shard: the options gave both the same one, or
 * neither got one and both run the whole network of one graph. */
static int same_shard(const struct dl_exec *a, const struct dl_exec *b)
{
    return a->shard == b->shard || (a->impl->own_shard.g && b->impl->own_shard.g && a->shard->g == b->shard->g);
}

/* weight_begin[], param_first[] and weight_index[]: where each layer's
 * weights sit in the flat vector, the whole network's order (a tied
 * parameter: its owner's place; a copy of one whose owner runs on another
 * rank, op.h's replica: a place of its own). */
static int index_weights(struct dl_exec *e, struct dl_error *err)
{
    const struct dl_graph *g = e->g, *whole = e->shard->g;
    e->flat.weight_begin = dl_calloc((size_t)g->n + 1, sizeof *e->flat.weight_begin, err);
    e->flat.param_first = dl_calloc((size_t)g->n + 1, sizeof *e->flat.param_first, err);
    for (int i = 0; e->flat.param_first && i < g->n; i++)
        e->flat.param_first[i + 1] = e->flat.param_first[i] + whole->layers[i].n_params;
    e->flat.weight_index = e->flat.param_first ? dl_calloc((size_t)e->flat.param_first[g->n] + 1, sizeof *e->flat.weight_index, err)
                                     : NULL;
    if (!e->flat.weight_begin || !e->flat.param_first || !e->flat.weight_index)
        return DL_ERR_NOMEM;
    long wo = 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        int runs = dl_shard_runs(e->shard, i);
        e->flat.weight_begin[i] = wo;
        for (int j = 0; j < whole->layers[i].n_params; j++) {
            const struct dl_param_desc *p = runs && j < l->n_params ? &l->param[j] : NULL;
            long *at = &e->flat.weight_index[e->flat.param_first[i] + j];
            *at = -1;
            if (whole->layers[i].param[j].shares && !(p && p->replica)) { /* the earlier layer's tensor */
                if (p)
                    *at = e->flat.weight_index[e->flat.param_first[p->share_layer] + p->share_param];
            } else if (p && (p->replica || (p->trainable && p->dtype != DL_I64))) {
                *at = wo;
                wo += p->count;
            }
        }
    }
    e->flat.weight_begin[g->n] = wo;
    return DL_OK;
}

/* Points param[][] and dparam[][] into the device's vectors and draws every
 * value of the whole network in order into the host's weights and state,
 * keeping this shard's. */
/* kept (exec.h's kept_lo, kept_n; NULL: all): after each layer's draw its
 * weights outside [kept[0], kept[0] + kept[1]) are handed back. */
static int draw_params(struct dl_exec *e, dl_real *weights, dl_real *state, const long *kept, struct dl_error *err)
{
    const struct dl_graph *g = e->g, *whole = e->shard->g;
    struct dl_rng init;
    dl_rng_seed(&init, e->seed);
    long *first = dl_calloc((size_t)g->n + 1, sizeof *first, err); /* layer i's began[first[i] + j] */
    for (int i = 0; first && i < g->n; i++)
        first[i + 1] = first[i] + whole->layers[i].n_params;
    struct dl_rng *began = first ? dl_calloc((size_t)first[g->n] + 1, sizeof *began, err) : NULL; /* where each
                                                                                                     draw began */
    if (!began) {
        free(first);
        return DL_ERR_NOMEM;
    }
    long so = 0, co = 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        int runs = dl_shard_runs(e->shard, i);
        for (int j = 0; j < whole->layers[i].n_params; j++) {
            const struct dl_param_desc *p = runs && j < l->n_params ? &l->param[j] : NULL;
            long wo = e->flat.weight_index[first[i] + j]; /* index_weights' */
            dl_real *host = NULL;
            began[first[i] + j] = init;
            if (whole->layers[i].param[j].shares && !(p && p->replica)) { /* tied: the earlier layer's tensor */
                if (p) {
                    e->param[i][j] = e->param[p->share_layer][p->share_param];
                    e->dparam[i][j] = e->dparam[p->share_layer][p->share_param];
                }
                continue;
            }
            if (p && p->replica) { /* the owner's values, drawn again */
                struct dl_rng again = began[first[p->share_layer] + p->share_param];
                e->param[i][j] = e->weights + wo;
                e->dparam[i][j] = e->dweights ? e->dweights + wo : NULL;
                init_param(&whole->layers[p->share_layer].param[p->share_param], &e->shard->layer[i].slice[j],
                           weights + wo, &again);
                continue;
            }
            if (p && p->dtype == DL_I64) { /* a counter, from 0 (nothing drawn) */
                e->param[i][j] = (dl_real *)(void *)(e->counters + co);
                co += p->count;
                continue;
            }
            if (p && p->trainable) {
                e->param[i][j] = e->weights + wo;
                e->dparam[i][j] = e->dweights ? e->dweights + wo : NULL;
                host = weights + wo;
            } else if (p) {
                e->param[i][j] = e->state + so;
                host = state + so;
                so += p->count;
            }
            init_param(&whole->layers[i].param[j], p ? &e->shard->layer[i].slice[j] : NULL, host, &init);
            if (kept && host && p && p->trainable) {
                size_t v = sizeof *weights;
                dl_pages_release(weights, v * (size_t)wo, v * (size_t)(wo + p->count), v * (size_t)kept[0],
                                 v * (size_t)(kept[0] + kept[1]));
            }
        }
    }
    free(began);
    free(first);
    return DL_OK;
}

void dl_exec_grads_at(struct dl_exec *e, long lo, long hi, dl_real *buf)
{
    for (int i = 0; i < e->shard->g->n; i++)
        for (int j = 0; j < e->shard->g->layers[i].n_params; j++) {
            long at = e->flat.weight_index[e->flat.param_first[i] + j];
            if (at >= lo && at < hi && e->dparam[i])
                e->dparam[i][j] = buf + (at - lo);
        }
}

dl_real ***dl_exec_param_table(const struct dl_graph *g, struct dl_error *err)
{
    size_t slots = 0;
    for (int i = 0; i < g->n; i++)
        slots += (size_t)g->layers[i].n_params;
    dl_real ***t = dl_calloc(1, sizeof *t * (size_t)g->n + sizeof **t * slots, err);
    dl_real **at = t ? (dl_real **)(t + g->n) : NULL;
    for (int i = 0; t && i < g->n; i++, at += g->layers[i - 1].n_params)
        t[i] = at;
    return t;
}

/* Parameters of the layers e runs (their slices), drawn in the whole
 * network's order; a copy of a tied parameter whose owner runs on another
 * rank (op.h's replica) drawn as the owner is, from the generator's state
 * where the owner's draw began. */
static int init_params(struct dl_exec *e, uint64_t seed, struct dl_exec *share, const struct dl_exec_options *o,
                       struct dl_error *err)
{
    long multiple = o->weights_multiple;
    int grads_elsewhere = o->grads_elsewhere;
    const struct dl_graph *g = e->g;
    size_t n = (size_t)g->n;
    e->seed = seed;
    e->rng = dl_calloc(n, sizeof *e->rng, err);
    if (!e->rng)
        return DL_ERR_NOMEM;
    for (int i = 0; i < g->n; i++)
        dl_rng_seed(&e->rng[i], seed ^ (0x5bd1e995ULL * (uint64_t)(i + 1)));
    if (share) {
        if (!same_shard(share, e))
            return dl_errorf(err, DL_ERR_INTERNAL, "executors sharing parameters must run the same shard");
        e->impl->shares_params = 1;
        e->param = share->param, e->dparam = share->dparam, e->flat.weight_begin = share->flat.weight_begin;
        e->flat.weight_index = share->flat.weight_index, e->flat.param_first = share->flat.param_first;
        e->weights = share->weights, e->dweights = share->dweights, e->state = share->state;
        e->n_weights = share->n_weights, e->n_state = share->n_state;
        e->counters = share->counters, e->n_counters = share->n_counters;
        return DL_OK;
    }
    e->param = dl_exec_param_table(e->shard->g, err);
    e->dparam = dl_exec_param_table(e->shard->g, err);
    if (!e->param || !e->dparam) /* weight_begin and the index: made by the plan (index_weights) */
        return DL_ERR_NOMEM;
    /* on the executor's device, drawn on the host (in staging copies the
     * size of each, copied over) */
    const struct dl_device *dev = e->impl->device;
    long padded = multiple > 1 ? (e->n_weights + multiple - 1) / multiple * multiple : e->n_weights;
    e->weights = alloc_real(dev, padded, err);
    e->dweights = grads_elsewhere ? NULL : alloc_real(dev, padded, err);
    e->state = alloc_real(dev, e->n_state, err);
    e->counters = dl_calloc((size_t)(e->n_counters > 0 ? e->n_counters : 1), sizeof *e->counters, err);
    /* drawn in place on the host's own memory (ZeRO stage 3 hands a layer's
     * pages back as it goes), else in a copy given to the device */
    int in_place = dev->host_memory && dev->copy == dl_device_host.copy;
    dl_real *weights = in_place ? e->weights : dl_calloc((size_t)(e->n_weights > 0 ? e->n_weights : 1), sizeof *weights, err);
    dl_real *state = dl_calloc((size_t)(e->n_state > 0 ? e->n_state : 1), sizeof *state, err);
    int rc = !e->weights || (!e->dweights && !grads_elsewhere) || !e->state || !e->counters || !weights || !state ? DL_ERR_NOMEM : DL_OK;
    long kept[2] = {padded / (multiple > 1 ? multiple : 1) * o->kept_block, padded / (multiple > 1 ? multiple : 1)};
    if (!rc)
        rc = draw_params(e, weights, state, in_place && o->kept_blocks > 1 && o->kept_blocks == multiple ? kept : NULL,
                         err);
    if (!rc && !in_place)
        rc = dev->copy(e->weights, weights, sizeof *weights * (size_t)e->n_weights, DL_COPY_TO_DEVICE, err);
    if (!rc)
        rc = dev->copy(e->state, state, sizeof *state * (size_t)e->n_state, DL_COPY_TO_DEVICE, err);
    if (!in_place)
        free(weights);
    free(state);
    return rc;
}


static int init_planned(struct dl_exec *e, const struct dl_graph *g, int max_batch, uint64_t seed,
                        const struct dl_exec_options *o, const struct dl_mbplan *mbplan, struct dl_error *err)
{
    int rc = plan_with(e, g, max_batch, o, mbplan, 1, err);
    if (rc)
        return rc;
    rc = alloc_arena(e, err);
    if (!rc)
        rc = alloc_transfers(e, err);
    if (!rc)
        rc = dl_exec_outbox_init(e, err);
    if (!rc)
        rc = init_params(e, seed, o->share_params, o, err);
    if (!rc && o->trace) {
        e->trace = o->trace;
        rc = dl_exec_trace_prepare(e, err);
    }
    if (rc) {
        dl_exec_free(e);
        return err->code ? err->code : rc;
    }
    return DL_OK;
}

/* The key/value caches for incremental decoding of the layers whose kind
 * keeps one (op.h's kv_cache: attention). */
static int init_caches(struct dl_exec *e, const struct dl_graph *g, int max_batch, long positions,
                       const struct dl_exec *share, struct dl_error *err)
{
    int rc = dl_exec_device(e)->host_memory ? DL_OK
                                               : dl_errorf(err, DL_ERR_UNSUPPORTED, "incremental decoding runs on "
                                                           "the host's memory");
    e->decode.cache = rc ? NULL : dl_calloc((size_t)g->n, sizeof *e->decode.cache, err);
    if (!rc && !e->decode.cache)
        rc = DL_ERR_NOMEM;
    if (!rc && share && (share->decode.cache_len != positions || share->max_batch != max_batch || !share->decode.cache ||
                         share->g->n != g->n))
        rc = dl_errorf(err, DL_ERR_INTERNAL, "an executor's caches are for another network or size");
    e->decode.cache_shared = share != NULL;
    for (int i = 0; !rc && share && i < g->n; i++)
        e->decode.cache[i] = share->decode.cache[i];
    for (int i = 0; !rc && !share && i < g->n; i++)
        if (g->layers[i].kind->kv_cache &&
            !(e->decode.cache[i] = dl_calloc((size_t)max_batch * 2 * (size_t)g->layers[i].out_shape.c * (size_t)positions,
                                      sizeof **e->decode.cache, err)))
            rc = DL_ERR_NOMEM;
    e->decode.cache_len = positions;
    if (rc)
        dl_exec_free(e);
    return rc;
}

int dl_exec_init(struct dl_exec *e, const struct dl_graph *g, int max_batch, uint64_t seed,
                 const struct dl_exec_options *o, struct dl_error *err)
{
    const struct dl_exec_options none = {0};
    if (!o)
        o = &none;
    /* Incremental decoding runs in f32: the caches, and the reference's
     * cached pass the attention kernels take, are f32. */
    struct dl_exec_options decoding;
    struct dl_kernel_choices f32;
    if (o->decode_positions > 0 && o->kernels && o->kernels->precision != DL_F32) {
        decoding = *o, f32 = *o->kernels;
        f32.precision = DL_F32;
        decoding.kernels = &f32;
        o = &decoding;
    }
    /* Document masking: only kernels that honour it run the layers that
     * read the documents. */
    struct dl_exec_options masked;
    struct dl_kernel_choices with_mask;
    int experts = o->shard && dl_grid_ep(&o->shard->dims) > 1; /* and only expert-parallel kernels run experts */
    if (o->doc_mask || experts) {
        masked = *o;
        if (o->kernels)
            with_mask = *o->kernels;
        else
            memset(&with_mask, 0, sizeof with_mask);
        with_mask.doc_mask = o->doc_mask;
        with_mask.experts = experts;
        masked.kernels = &with_mask;
        o = &masked;
    }
    int rc;
    if (o->plan || !o->tuner.plan) {
        rc = init_planned(e, g, max_batch, seed, o, o->plan, err);
    } else {
        struct dl_mbplan plan = {0}; /* the tuner plans the layers as this rank runs them */
        rc = o->tuner.plan(o->tuner.ctx, o->shard ? &o->shard->local : g, max_batch, o->kernels, &plan, err);
        if (!rc)
            rc = init_planned(e, g, max_batch, seed, o, &plan, err);
        dl_mbplan_free(&plan);
    }
    if (!rc && o->decode_positions > 0)
        rc = init_caches(e, g, max_batch, o->decode_positions, o->share_cache, err);
    if (!rc && o->doc_mask) {
        struct dl_kernel_choices on_device = with_mask;
        on_device.device = dl_exec_device(e)->kernels;
        rc = dl_exec_doc_mask_init(e, g, o, &on_device, err);
        if (rc)
            dl_exec_free(e);
    }
    return rc;
}

int dl_exec_timing_enable(struct dl_exec *e, struct dl_error *err)
{
    if (!e->stats.time_fwd) {
        e->stats.time_fwd = dl_calloc((size_t)e->g->n, sizeof *e->stats.time_fwd, err);
        e->stats.time_bwd = dl_calloc((size_t)e->g->n, sizeof *e->stats.time_bwd, err);
        e->stats.time_wgt = dl_calloc((size_t)e->g->n, sizeof *e->stats.time_wgt, err);
        if (!e->stats.time_fwd || !e->stats.time_bwd || !e->stats.time_wgt)
            return DL_ERR_NOMEM;
    }
    memset(e->stats.time_fwd, 0, sizeof *e->stats.time_fwd * (size_t)e->g->n);
    memset(e->stats.time_bwd, 0, sizeof *e->stats.time_bwd * (size_t)e->g->n);
    memset(e->stats.time_wgt, 0, sizeof *e->stats.time_wgt * (size_t)e->g->n);
    return DL_OK;
}

int dl_exec_reorders(const struct dl_exec *e)
{
    int r = 0;
    for (int s = 0; s < e->impl->n_steps; s++)
        r += e->impl->steps[s].kind == DL_STEP_REORDER;
    return r;
}

int dl_exec_casts(const struct dl_exec *e)
{
    const struct dl_exec_impl *m = e->impl;
    int r = 0;
    for (int s = 0; s < m->n_steps; s++)
        r += m->steps[s].kind == DL_STEP_REORDER &&
             m->tensors[m->steps[s].src].shape.dtype != m->tensors[m->steps[s].out].shape.dtype;
    return r;
}
