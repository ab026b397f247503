/* steps.c: turns the graph into the executor's step list.  For each layer in
 * topological order: choose its kernel, negotiate layouts with its producers,
 * insert an explicit reorder step for every input whose layout differs (one
 * per tensor and layout, shared by the consumers) and a cast step, a
 * reorder between dtypes that keeps the layout, for every input whose dtype
 * differs from the kernel's (kernel.h "Dtypes"; the communication steps
 * take f32); place.c then plans the steps' buffers.  Layers with
 * a micro-batch plan get their kernel from it (micro.c checks the rest).
 * A ReLU (a kind with is_relu, ops/op.h) that alone consumes a layer's
 * output is folded into that layer's kernel when the kernel can apply it
 * (fuses_relu, kernel.h "Fused ReLU": the direct convolution): it gets no
 * step, and its output is the producer's tensor; a ReLU read only by a layer
 * whose kind has commutes_with_relu (max pooling) moves past it into that
 * layer's kernel the same way, and the pooling reads the ReLU's input.
 * With a shard (plan/shard.h) only the layers of its stage get steps: a
 * tensor an earlier stage made is a receive step, a tensor a later stage
 * reads is followed by a send step, and the shard's tensor-parallel
 * adapters (slice, gather, the sum of a partial input gradient) and the
 * sums of partial outputs are steps between producer and consumer, in
 * plain layout, as reorders are.  An executor runs one stage of the shard
 * (several per rank with interleaved stages). */
#include "exec/exec_impl.h"

#include <stdlib.h>
#include <string.h>

static int add_tensor(struct dl_exec_impl *m, int step, struct dl_shape s, enum dl_layout l, int needs_grad)
{
    struct dl_exec_tensor *t = &m->tensors[m->n_tensors];
    *t = (struct dl_exec_tensor){.step = step, .alias = -1, .shape = s, .layout = l, .count = dl_layout_count(l, s),
                                 .needs_grad = needs_grad, .last_use = step, .buf_data = -1, .buf_grad = -1,
                                 .run = -1, .buf_again = -1};
    return m->n_tensors++;
}

/* A new step of kind k at the end of the list. */
static struct dl_exec_step *add_step(struct dl_exec_impl *m, enum dl_step_kind k, int src, int timed_layer)
{
    struct dl_exec_step *st = &m->steps[m->n_steps];
    memset(st, 0, sizeof *st);
    st->kind = k;
    st->layer = -1;
    st->src = src;
    st->out = -1;
    st->timed_layer = timed_layer;
    st->buf_saved = -1;
    st->run = -1;
    st->buf_saved_again = -1;
    for (int j = 0; j < DL_MAX_INPUTS; j++)
        st->buf_scratch[j] = -1;
    if (src >= 0)
        m->tensors[src].last_use = m->n_steps;
    return st;
}

/* The tensor holding src's values in dtype want: src itself, or a
 * (possibly shared) cast copy in src's layout, a reorder step between
 * dtypes. */
static int cast(struct dl_exec *e, int src, enum dl_dtype want, int layer)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_exec_tensor *t = &m->tensors[src];
    if (t->shape.dtype == want)
        return src;
    for (int s = 0; s < m->n_steps; s++)
        if (m->steps[s].kind == DL_STEP_REORDER && m->steps[s].src == src &&
            m->tensors[m->steps[s].out].shape.dtype == want)
            return m->steps[s].out;
    struct dl_exec_step *st = add_step(m, DL_STEP_REORDER, src, layer);
    struct dl_shape shape = t->shape;
    shape.dtype = want;
    st->out = add_tensor(m, m->n_steps, shape, t->layout, t->needs_grad);
    m->n_steps++;
    return st->out;
}

/* The tensor holding src's values in layout want: src itself when the
 * memory is the same, else a (possibly shared) reordered copy. */
static int reordered(struct dl_exec *e, int src, enum dl_layout want, int layer)
{
    struct dl_exec_impl *m = e->impl;
    struct dl_exec_tensor *t = &m->tensors[src];
    if (dl_layout_same(t->layout, want, t->shape))
        return src;
    if (t->layout != DL_LAYOUT_PLAIN && want != DL_LAYOUT_PLAIN) /* blocked to blocked: via NCHW */
        return reordered(e, reordered(e, src, DL_LAYOUT_PLAIN, layer), want, layer);
    for (int s = 0; s < m->n_steps; s++)
        if (m->steps[s].kind == DL_STEP_REORDER && m->steps[s].src == src &&
            m->tensors[m->steps[s].out].layout == want && m->tensors[m->steps[s].out].shape.dtype == t->shape.dtype)
            return m->steps[s].out;
    struct dl_exec_step *st = add_step(m, DL_STEP_REORDER, src, layer);
    st->out = add_tensor(m, m->n_steps, t->shape, want, t->needs_grad);
    m->n_steps++;
    return st->out;
}

/* src in layout want and dtype want_dtype: a layout reorder in the
 * smaller of the two dtypes (the cast keeps the layout). */
static int converted(struct dl_exec *e, int src, enum dl_layout want, enum dl_dtype want_dtype, int layer)
{
    enum dl_dtype from = e->impl->tensors[src].shape.dtype;
    if (dl_dtype_size(want_dtype) < dl_dtype_size(from))
        return reordered(e, cast(e, src, want_dtype, layer), want, layer);
    return cast(e, reordered(e, src, want, layer), want_dtype, layer);
}

/* 1 when layer i's output gets a gradient: it or a layer before it learns
 * (decided on the whole network, so that the stages on both sides of a
 * pipeline edge agree whether a gradient message exists). */
static int learns(const struct dl_graph *g, int i)
{
    const struct dl_layer *l = &g->layers[i];
    if (l->n_params > 0)
        return 1;
    for (int k = 0; k < l->n_in; k++)
        if (l->in[k] != DL_GRAPH_INPUT && learns(g, l->in[k]))
            return 1;
    return 0;
}

/* e->act[i]'s description: layer i's output shape in dtype, stored in
 * layout (its values' place is set once the arena is planned). */
static void describe_act(struct dl_exec *e, int i, enum dl_layout layout, enum dl_dtype dtype)
{
    struct dl_shape shape = e->g->layers[i].out_shape;
    shape.dtype = dtype;
    e->act[i] = (struct dl_tensor){NULL, shape, layout};
}

/* Layer p's output, made by an earlier pipeline stage: received once, by a
 * step in front of its first reader i. */
static int received(struct dl_exec *e, int p, int i)
{
    struct dl_exec_impl *m = e->impl;
    if (m->out_tensor[p] >= 0)
        return m->out_tensor[p];
    const struct dl_shard *sh = e->shard;
    struct dl_exec_step *st = add_step(m, DL_STEP_RECV, -1, i);
    st->peer = dl_stages_rank(&sh->stages, sh->layer[p].stage);
    st->peer_layer = p;
    st->edge = dl_shard_edge(sh, p, e->stage);
    st->out = add_tensor(m, m->n_steps, e->g->layers[p].out_shape, DL_LAYOUT_PLAIN, learns(e->shard->g, p));
    m->out_tensor[p] = st->out;
    describe_act(e, p, DL_LAYOUT_PLAIN, DL_F32);
    m->n_steps++;
    return st->out;
}

/* The tensor src adapted by tensor-parallel step `how` into a tensor of
 * shape `shape` (sum_grad: the consumer's input gradient is a partial sum):
 * shared by the layers that need the same one. */
static int tp_step(struct dl_exec *e, int src, int i, enum dl_tp_in how, int sum_grad, int groups, struct dl_shape shape)
{
    struct dl_exec_impl *m = e->impl;
    src = converted(e, src, DL_LAYOUT_PLAIN, DL_F32, i);
    for (int s = 0; s < m->n_steps; s++)
        if (m->steps[s].kind == DL_STEP_TP && m->steps[s].src == src && m->steps[s].tp_in == how &&
            m->steps[s].tp_sum_grad == sum_grad && m->steps[s].tp_groups == groups &&
            dl_shape_eq(m->tensors[m->steps[s].out].shape, shape))
            return m->steps[s].out;
    struct dl_exec_step *st = add_step(m, DL_STEP_TP, src, i);
    st->tp_in = how;
    st->tp_sum_grad = sum_grad;
    st->tp_groups = groups;
    st->out = add_tensor(m, m->n_steps, shape, DL_LAYOUT_PLAIN, m->tensors[src].needs_grad);
    if (how == DL_TP_IN_AS_IS) /* the same values; only the gradient is summed */
        m->tensors[st->out].alias = src;
    m->n_steps++;
    return st->out;
}

/* The tensor layer i reads as input k once tensor parallelism has adapted
 * src: its bands of rows gathered, then its channels sliced or gathered,
 * or (a layer split by its outputs) its partial input gradient to be
 * summed, then cut to this rank's band of rows and given its halos; a
 * share of the samples is gathered first, a whole batch cut to the share
 * last; src itself when nothing is needed. */
static int tp_adapted(struct dl_exec *e, int src, int i, int k)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_shard_layer *L = &e->shard->layer[i];
    const struct dl_layer *whole = &e->shard->g->layers[i];
    enum dl_tp_in how = L->in[k];
    int T = e->shard->dims.tp, sum_grad = how != DL_TP_IN_SLICE && L->by_output && m->tensors[src].needs_grad;
    if (T == 1)
        return src;
    struct dl_shape shape = m->tensors[src].shape;
    if (L->batch_in[k] == DL_TP_IN_GATHER_BATCH)
        src = tp_step(e, src, i, DL_TP_IN_GATHER_BATCH, 0, 1, shape);
    if (L->rows_in[k] == DL_TP_IN_GATHER_ROWS) {
        /* the bands gathered for a layer split by its outputs: its partial
         * input gradient is reduce-scattered into the bands at once */
        int scatter = how == DL_TP_IN_AS_IS && sum_grad;
        shape.h = whole->in_shape[k].h;
        src = tp_step(e, src, i, DL_TP_IN_GATHER_ROWS, scatter, 1, shape);
        sum_grad &= !scatter;
    }
    if (how != DL_TP_IN_AS_IS || sum_grad) {
        shape.c = how == DL_TP_IN_SLICE ? shape.c / T : how == DL_TP_IN_GATHER ? shape.c * T : shape.c;
        src = tp_step(e, src, i, how, sum_grad, L->in_groups[k] > 1 ? L->in_groups[k] : 1, shape);
    }
    if (L->rows_in[k] == DL_TP_IN_SLICE_ROWS) {
        int lo;
        dl_shard_band(shape.h, T, e->shard->pos.t, &lo, &shape.h);
        src = tp_step(e, src, i, DL_TP_IN_SLICE_ROWS, 0, 1, shape);
    }
    if (L->halo) {
        shape.h += 2 * L->halo;
        src = tp_step(e, src, i, DL_TP_IN_HALO, 0, 1, shape);
    }
    if (L->batch_in[k] == DL_TP_IN_SLICE_BATCH)
        src = tp_step(e, src, i, DL_TP_IN_SLICE_BATCH, 0, 1, shape);
    return src;
}

/* The tensor layer i reads as its input k: the graph input, a layer's
 * output (received from the stage that made it), as tensor parallelism
 * delivers it. */
static int input_of(struct dl_exec *e, int i, int k, int graph_input)
{
    const struct dl_layer *l = &e->g->layers[i];
    int p = l->in[k];
    int t = p == DL_GRAPH_INPUT ? graph_input : dl_exec_runs(e, p) ? e->impl->out_tensor[p] : received(e, p, i);
    return tp_adapted(e, t, i, k);
}

/* After the stage's layers: a send step for every output a later stage
 * reads, one per reading stage (to the rank that holds it, which may be
 * this one when the stages are interleaved). */
static void add_sends(struct dl_exec *e)
{
    const struct dl_shard *sh = e->shard;
    struct dl_exec_impl *m = e->impl;
    for (int p = e->first; p < e->end; p++)
        for (int stage = e->stage + 1; stage < sh->stages.S; stage++) {
            int edge = dl_shard_edge(sh, p, stage);
            if (edge < 0)
                continue;
            int src = converted(e, m->out_tensor[p], DL_LAYOUT_PLAIN, DL_F32, p);
            struct dl_exec_step *st = add_step(m, DL_STEP_SEND, src, p);
            st->peer = dl_stages_rank(&sh->stages, stage);
            st->peer_layer = p;
            st->edge = edge;
            m->n_steps++;
        }
}

int dl_exec_make_instance(struct dl_exec_step *s, const struct dl_layer *l, const struct dl_kernel *k, int mb,
                          struct dl_error *err)
{
    struct dl_kernel_config cfg = s->cfg;
    cfg.mb = mb;
    void *inst = NULL;
    if (s->n_inst == DL_EXEC_MAX_INSTANCES)
        return dl_errorf(err, DL_ERR_INTERNAL, "layer '%s': more than %d kernel instances", l->name,
                         DL_EXEC_MAX_INSTANCES);
    int rc = dl_kernel_create(k, l, &cfg, &inst, err);
    if (rc) {
        dl_error_prefix(err, "layer '%s' (kernel %s)", l->name, k->name);
        return rc;
    }
    s->inst[s->n_inst++] = (struct dl_exec_instance){k, mb, inst};
    return DL_OK;
}

/* The kernel that runs layer i: the plan's (first part of the first
 * direction that runs) when the layer is tuned, else the registry's; a
 * layer on bands of rows or a share of the samples takes one that sums its statistics through
 * sync_sum (batch norm's over the tensor group); one whose outputs are
 * partial sums, an f32 one; one off autocast's list with an f32 input, an
 * f32 one. */
static const struct dl_kernel *layer_kernel(const struct dl_exec *e, int i, const struct dl_kernel_choices *ch);

/* The dtype layer p's output will have: the graph input's, f32 for a
 * tensor another stage sends, a folded ReLU's input's, else its kernel's
 * (the one chosen, or the one layer_kernel would choose). */
static enum dl_dtype produced_dtype(const struct dl_exec *e, int p, const struct dl_kernel_choices *ch)
{
    if (p == DL_GRAPH_INPUT)
        return e->g->input.dtype;
    if (!dl_exec_runs(e, p))
        return DL_F32;
    if (e->fused[p])
        return produced_dtype(e, e->g->layers[p].in[0], ch);
    const struct dl_kernel *k = e->kernel[p] ? e->kernel[p] : layer_kernel(e, p, ch);
    return k ? dl_kernel_tensor_dtype(k, e->g->layers[p].out_shape) : DL_F32; /* none: refused when p is built */
}

static const struct dl_kernel *layer_kernel(const struct dl_exec *e, int i, const struct dl_kernel_choices *ch)
{
    const struct dl_mbplan *p = &e->impl->mbplan;
    if (p->batch && p->layer[i].tuned)
        for (int d = 0; d < DL_N_DIRS; d++)
            if (p->layer[i].dir[d].n)
                return p->layer[i].dir[d].part[0].kernel;
    struct dl_kernel_choices own = {0};
    if (ch)
        own = *ch;
    if (e->shard->layer[i].split_rows || e->shard->layer[i].split_batch)
        own.sync_stats = 1;
    if (e->shard->layer[i].partial) /* partial sums are summed over the tensor group in f32 */
        own.precision = DL_F32;
    /* A layer off autocast's list runs in a lower precision only when all
     * its inputs come in it (PyTorch's promotion: f32 + bf16 adds in f32,
     * so a transformer's residual stream stays f32). */
    const struct dl_layer *l = &e->g->layers[i];
    for (int j = 0; own.precision != DL_F32 && !l->kind->autocast_bf16 && j < l->n_in; j++)
        if (produced_dtype(e, l->in[j], ch) == DL_F32)
            own.precision = DL_F32;
    return dl_kernel_select(l, &own);
}

/* 1 when ReLU layer r may be folded into layer o's kernel (its producer or
 * its consumer): fusion is on, r reads one tensor (and, moving into its
 * consumer, is read by that layer alone; folded into its producer it may
 * have several readers, as a ResNet block's last ReLU does: they read the
 * producer's clamped output), neither layer is the logits or has a
 * micro-batch plan, and no --kernel choice steers r away from its default
 * (the precision's). */
static int may_fold_relu(const struct dl_exec *e, int r, int o, const struct dl_kernel_choices *ch)
{
    const struct dl_graph *g = e->g;
    const struct dl_mbplan *p = &e->impl->mbplan;
    const struct dl_layer *l = &g->layers[r];
    if ((ch && ch->no_fusion) || !l->kind->is_relu || l->n_in != 1 || (o > r && l->n_consumers != 1) ||
        r == g->logits || o == g->logits || !dl_exec_runs(e, r) || !dl_exec_runs(e, o))
        return 0;
    if (e->shard->layer[r].split_out != e->shard->layer[o].split_out ||
        e->shard->layer[r].split_rows != e->shard->layer[o].split_rows ||
        e->shard->layer[r].split_batch != e->shard->layer[o].split_batch || e->shard->layer[r < o ? r : o].partial)
        return 0; /* a ReLU after partial sums waits for their sum */
    if (p->batch && (p->layer[r].tuned || p->layer[o].tuned))
        return 0;
    struct dl_kernel_choices plain = {0}; /* ch without its --kernel choices: the precision's default */
    if (ch)
        plain = *ch, plain.n = 0;
    return dl_kernel_select(l, ch) == dl_kernel_select(l, &plain);
}

/* 1 when layer i (run by k) takes the ReLU after it into its kernel: the
 * ReLU reads i's output, which nothing else reads. */
static int fuses_next_relu(const struct dl_exec *e, int i, const struct dl_kernel *k,
                           const struct dl_kernel_choices *ch)
{
    const struct dl_graph *g = e->g;
    return k->fuses_relu && i + 1 < g->n && g->layers[i].n_consumers == 1 && g->layers[i + 1].in[0] == i &&
           may_fold_relu(e, i + 1, i, ch);
}

/* 1 when ReLU layer i can move past the layer that alone reads it and be
 * folded into that layer's kernel: the layer's kind commutes with ReLU (max
 * pooling: max(., 0) commutes with taking a window's maximum, and the
 * gradient goes to the same winner, or nowhere when the window's maximum is
 * not positive), so it runs on the ReLU's input and clamps its (for pooling
 * 4x smaller) output instead.  (Only a NaN tells them apart: the ReLU turns
 * it into 0 before the window, the pooling lets it win and then clamps it.) */
static int relu_moves_into_pooling(const struct dl_exec *e, int i, const struct dl_kernel_choices *ch)
{
    const struct dl_graph *g = e->g;
    if (i + 1 >= g->n || !g->layers[i + 1].kind->commutes_with_relu || g->layers[i + 1].in[0] != i)
        return 0;
    return layer_kernel(e, i + 1, ch)->fuses_relu && may_fold_relu(e, i, i + 1, ch);
}

/* 1 when layer i's partial sums (a row-parallel linear's, under sequence
 * parallelism) reach every reader as its band of positions only: each
 * reader runs here, takes the tensor as it is but for its band of rows
 * (SLICE_ROWS), and is no ReLU that could fold into another kernel.  Then
 * no allreduce follows the layer: the readers' band steps reduce-scatter
 * the sums (Korthikanti et al. 2022), half the bytes.  Not when the
 * executor keeps every output for a reader outside it (exec.h's
 * keep_outputs), which would find partial sums. */
static int scattered_by_readers(const struct dl_exec *e, int i)
{
    const struct dl_graph *g = e->g;
    const struct dl_shard *sh = e->shard;
    int readers = 0;
    if (!sh->dims.sp || e->impl->keep_outputs || i == g->logits || i == g->loss)
        return 0;
    for (int j = i + 1; j < g->n; j++)
        for (int k = 0; k < g->layers[j].n_in; k++) {
            if (g->layers[j].in[k] != i)
                continue;
            const struct dl_shard_layer *L = &sh->layer[j];
            if (!dl_exec_runs(e, j) || g->layers[j].kind->is_relu || L->rows_in[k] != DL_TP_IN_SLICE_ROWS ||
                L->in[k] != DL_TP_IN_AS_IS || L->batch_in[k] != DL_TP_IN_AS_IS || L->halo || L->by_output)
                return 0;
            readers++;
        }
    return readers > 0 && readers == g->layers[i].n_consumers;
}

/* The step list and its tensors, with room for every layer's step, its
 * inputs' reorders, casts and communication steps, and its sends and sums. */
static int alloc_step_list(struct dl_exec *e, struct dl_error *err)
{
    const struct dl_graph *g = e->g;
    struct dl_exec_impl *m = e->impl;
    int max_steps = g->n * (6 + 6 * DL_MAX_INPUTS) + 8;
    m->steps = dl_calloc((size_t)max_steps, sizeof *m->steps, err);
    m->tensors = dl_calloc((size_t)max_steps + 1, sizeof *m->tensors, err);
    m->out_tensor = dl_calloc((size_t)g->n, sizeof *m->out_tensor, err);
    m->written = dl_calloc((size_t)max_steps + 1, sizeof *m->written, err);
    if (!m->steps || !m->tensors || !m->out_tensor || !m->written)
        return DL_ERR_NOMEM;
    for (int i = 0; i < g->n; i++)
        m->out_tensor[i] = -1;
    return DL_OK;
}

/* Folded ReLU i: no step; its output is its input's tensor, its kernel the
 * one that applies it (its producer's, layer i - 1, or its consumer's,
 * i + 1). */
static void place_folded_relu(struct dl_exec *e, int i, int input, const struct dl_kernel_choices *ch)
{
    struct dl_exec_impl *m = e->impl;
    int p = e->g->layers[i].in[0];
    int src = p == DL_GRAPH_INPUT ? input : dl_exec_runs(e, p) ? m->out_tensor[p] : received(e, p, i);
    m->out_tensor[i] = src;
    e->kernel[i] = e->fused[i] == DL_FUSED_INTO_PRODUCER ? e->kernel[i - 1] : layer_kernel(e, i + 1, ch);
    describe_act(e, i, m->tensors[src].layout, m->tensors[src].shape.dtype);
}

/* Layer i's step through kernel k: its inputs in the layouts and dtypes k
 * wants (offered[]: the layouts its producers offered), the ReLU folded
 * into it, its output tensor, and its instance for the whole batch. */
static int add_layer_step(struct dl_exec *e, int i, const struct dl_kernel *k, int input,
                          const struct dl_kernel_choices *ch, enum dl_layout *offered, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_layer *l = &e->g->layers[i];
    enum dl_layout want[DL_MAX_INPUTS], out;
    int src[DL_MAX_INPUTS], in[DL_MAX_INPUTS];
    for (int j = 0; j < l->n_in; j++) {
        src[j] = input_of(e, i, j, input);
        offered[j] = m->tensors[src[j]].layout;
    }
    dl_kernel_layouts(k, l, offered, want, &out);
    for (int j = 0; j < l->n_in; j++)
        in[j] = converted(e, src[j], want[j], dl_kernel_tensor_dtype(k, l->in_shape[j]), i);
    struct dl_exec_step *s = add_step(m, DL_STEP_LAYER, -1, i);
    s->layer = i;
    s->kernel = k;
    e->kernel[i] = k;
    s->cfg.mb = e->max_batch;
    s->cfg.out = out;
    int relu_before = l->in[0] >= 0 && e->fused[l->in[0]] == DL_FUSED_INTO_POOLING;
    int relu_after = !relu_before && fuses_next_relu(e, i, k, ch);
    s->cfg.relu = relu_before || relu_after;
    if (relu_after)
        e->fused[i + 1] = DL_FUSED_INTO_PRODUCER;
    for (int j = 0; j < l->n_in; j++) {
        s->in[j] = in[j];
        s->cfg.in[j] = m->tensors[in[j]].layout;
        m->tensors[in[j]].last_use = m->n_steps;
    }
    /* A gradient flows into this output only when something upstream learns. */
    int needs_grad = l->n_params > 0;
    for (int j = 0; j < l->n_in; j++)
        needs_grad |= m->tensors[in[j]].needs_grad;
    struct dl_shape out_shape = l->out_shape;
    out_shape.dtype = dl_kernel_tensor_dtype(k, out_shape);
    s->out = add_tensor(m, m->n_steps, out_shape, out, needs_grad);
    m->out_tensor[i] = s->out;
    describe_act(e, i, out, out_shape.dtype);
    m->n_steps++;
    int rc = dl_exec_make_instance(s, l, k, e->max_batch, err);
    if (rc)
        return rc;
    s->saved_bytes = dl_kernel_saved_bytes(k, s->inst[0].inst);
    s->n_fixed = 1;
    return DL_OK;
}

/* Layer i's partial sums over the tensor group: reduce-scattered by its
 * readers' SLICE_ROWS steps, or summed in place by an ALLREDUCE step
 * after it. */
static void sum_partial_output(struct dl_exec *e, int i)
{
    struct dl_exec_impl *m = e->impl;
    if (scattered_by_readers(e, i)) {
        m->tensors[m->out_tensor[i]].partial = 1;
        return;
    }
    struct dl_exec_step *ar = add_step(m, DL_STEP_ALLREDUCE, -1, i);
    ar->out = m->out_tensor[i];
    m->n_steps++;
}

/* The workspace of layer i's step s: a micro-batch plan's own slice (set up
 * by micro.c), else the shared workspace raised to what its instance
 * needs. */
static int size_layer_workspace(struct dl_exec *e, int i, struct dl_exec_step *s, const enum dl_layout *offered,
                                struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    if (m->mbplan.batch && m->mbplan.layer[i].tuned) {
        s->mbplan = &m->mbplan.layer[i];
        return dl_exec_micro_setup(e, s, offered, &m->mem.workspace_bytes, err);
    }
    size_t w = dl_kernel_workspace_max(s->kernel, s->inst[0].inst);
    if (w > m->mem.workspace_bytes)
        m->mem.workspace_bytes = w;
    return DL_OK;
}

/* The buffers of the tensor group's reductions (dl_exec_group_*) and of
 * the weight gradients summed over it (tp_rows.c's grad_part: on a device
 * without host memory in the device's memory, with a host copy). */
static int alloc_group_buffers(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    if ((m->group_cap = dl_exec_group_values(e)) > 0 &&
        !(m->group = dl_calloc((size_t)e->shard->dims.tp * (size_t)m->group_cap, sizeof *m->group, err)))
        return DL_ERR_NOMEM;
    long part = dl_exec_rows_grad_values(e);
    int most = 0;
    for (int i = 0; i < e->g->n; i++)
        most = e->g->layers[i].n_params > most ? e->g->layers[i].n_params : most;
    if (part > 0 && !(m->grad_part_at = dl_calloc((size_t)most, sizeof *m->grad_part_at, err)))
        return DL_ERR_NOMEM;
    if (part > 0 && m->device->host_memory && !(m->grad_part = dl_calloc((size_t)part, sizeof *m->grad_part, err)))
        return DL_ERR_NOMEM;
    if (part > 0 && !m->device->host_memory) { /* the kernels write it on the device; summed in a host copy */
        m->grad_part = m->device->alloc(sizeof *m->grad_part * (size_t)part, err);
        m->grad_part_host = m->grad_part ? dl_calloc((size_t)part, sizeof *m->grad_part_host, err) : NULL;
        if (!m->grad_part_host)
            return DL_ERR_NOMEM;
    }
    return DL_OK;
}

int dl_exec_build_steps(struct dl_exec *e, const struct dl_kernel_choices *ch, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    int rc = alloc_step_list(e, err);
    if (rc)
        return rc;
    int input = add_tensor(m, -1, e->g->input, DL_LAYOUT_PLAIN, 0);
    for (int i = e->first; i < e->end; i++) {
        if (!e->fused[i] && relu_moves_into_pooling(e, i, ch))
            e->fused[i] = DL_FUSED_INTO_POOLING;
        if (e->fused[i]) {
            place_folded_relu(e, i, input, ch);
            continue;
        }
        enum dl_layout offered[DL_MAX_INPUTS];
        rc = add_layer_step(e, i, layer_kernel(e, i, ch), input, ch, offered, err);
        if (rc)
            return rc;
        struct dl_exec_step *s = &m->steps[m->tensors[m->out_tensor[i]].step]; /* the layer's step */
        if (e->shard->layer[i].partial)
            sum_partial_output(e, i);
        rc = size_layer_workspace(e, i, s, offered, err);
        if (rc)
            return rc;
    }
    add_sends(e);
    dl_exec_samples_mark(e);
    rc = dl_exec_samples_check(e, e->max_batch, err);
    if (!rc)
        rc = alloc_group_buffers(e, err);
    if (rc)
        return rc;
    for (int s = 0; s < m->n_steps; s++) {
        size_t w = dl_exec_tp_workspace(e, &m->steps[s], e->max_batch);
        if (w > m->mem.workspace_bytes)
            m->mem.workspace_bytes = w;
    }
    return DL_OK;
}

/* The instance of s's kernel for mb samples: one made at set-up (for the
 * whole batch, or a micro-batch plan's part of that size) or a new one. */
static void *find_or_make_instance(struct dl_exec *e, struct dl_exec_step *s, int mb)
{
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].mb == mb && s->inst[i].kernel == s->kernel)
            return s->inst[i].inst;
    const struct dl_layer *l = &e->g->layers[s->layer];
    if (s->n_inst == DL_EXEC_MAX_INSTANCES && s->n_inst > s->n_fixed) { /* recycle the last one */
        s->inst[s->n_inst - 1].kernel->destroy(s->inst[s->n_inst - 1].inst);
        s->n_inst--;
    }
    if (dl_exec_make_instance(s, l, s->kernel, mb, &e->err)) {
        e->status = e->err.code;
        return NULL;
    }
    return s->inst[s->n_inst - 1].inst;
}

/* An instance run on the whole batch of mb samples: the shared workspace
 * must hold what it needs in every direction, also when the instance was
 * made for a micro-batch plan's part (whose workspace checks covered only
 * the directions that part runs in, in the plan's own slice). */
void *dl_exec_instance(struct dl_exec *e, struct dl_exec_step *s, int mb)
{
    void *inst = find_or_make_instance(e, s, mb);
    if (!inst)
        return NULL;
    const struct dl_layer *l = &e->g->layers[s->layer];
    struct dl_exec_impl *m = e->impl;
    size_t need = dl_kernel_workspace_max(s->kernel, inst);
    size_t saved = dl_kernel_saved_bytes(s->kernel, inst);
    if (saved > s->saved_bytes) {
        e->status = dl_errorf(&e->err, DL_ERR_INTERNAL, "layer '%s' (kernel %s): state for %d samples "
                              "exceeds the plan for %d", l->name, s->kernel->name, mb, e->max_batch);
        return NULL;
    }
    if (need > m->mem.workspace_bytes) { /* outside the steady state: a new batch size */
        void *w = m->device->alloc(need, &e->err);
        if (!w) {
            dl_error_prefix(&e->err, "workspace of layer '%s'", l->name);
            e->status = e->err.code;
            return NULL;
        }
        m->device->free(m->mem.own_workspace);
        m->mem.own_workspace = m->mem.workspace = w;
        m->mem.workspace_bytes = need;
    }
    return inst;
}

int dl_exec_defers_weights(const struct dl_exec *e, const struct dl_exec_step *s)
{
    return s->kind == DL_STEP_LAYER && e->g->layers[s->layer].n_params > 0 &&
           (s->mbplan || !dl_kernel_weights_in_data(s->kernel));
}

void dl_exec_free_steps(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    for (int s = 0; m->steps && s < m->n_steps; s++)
        for (int i = 0; i < m->steps[s].n_inst; i++)
            m->steps[s].inst[i].kernel->destroy(m->steps[s].inst[i].inst);
    free(m->steps);
    free(m->tensors);
    free(m->out_tensor);
    free(m->written);
    free(m->group);
    free(m->grad_part_host);
    free(m->grad_part_at);
    free(m->recompute.run_last);
    free(m->mem.bufs);
    if (m->device && m->device->host_memory)
        free(m->grad_part);
    else if (m->device)
        m->device->free(m->grad_part);
    if (m->device) { /* NULL when set-up stopped before choosing it (nothing allocated) */
        m->device->free(m->mem.arena);
        m->device->free(m->mem.own_workspace);
        m->device->free(m->io.input_on_device);
        m->device->free(m->io.labels_on_device);
    }
    free(m->io.readback);
    dl_mbplan_free(&m->mbplan);
}
