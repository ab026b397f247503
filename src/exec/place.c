/* place.c: the executor's memory plan.  Every buffer its steps need (each
 * tensor's values and gradient, a layer's kernel state, a gradient from
 * several consumers through scratch, the shared workspace) with its
 * lifetime on the timeline (forward steps 0..S-1, backward S..2S-1, a
 * split backward's weight-gradient passes 2S..3S-1: what they read lives
 * until they run), from which plan/plan.c places them in one arena
 * (doc/executor.md "Memory"). */
#include "exec/exec_impl.h"

#include <stdlib.h>
#include <string.h>

static int add_buf(struct dl_exec_impl *m, size_t bytes, int first, int last)
{
    m->mem.bufs[m->mem.n_bufs] = (struct dl_plan_buf){.bytes = bytes, .first = first, .last = last};
    return m->mem.n_bufs++;
}

/* Which consumer writes each input gradient in place: the first to run in
 * backward (the last in forward); the others go through scratch and add. */
static void mark_scratch(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    memset(m->written, 0, sizeof *m->written * (size_t)m->n_tensors);
    for (int s = m->n_steps - 1; s >= 0; s--) {
        struct dl_exec_step *st = &m->steps[s];
        if (st->kind == DL_STEP_REORDER || st->kind == DL_STEP_TP) { /* their backward adds into the source */
            m->written[st->src] = 1;
        } else if (st->kind == DL_STEP_SEND) { /* receives a gradient for src */
            st->via_scratch[0] = m->written[st->src];
            m->written[st->src] = 1;
        } else if (st->kind == DL_STEP_LAYER) {
            const struct dl_layer *l = &e->g->layers[st->layer];
            for (int j = 0; j < l->n_in; j++) {
                int t = st->in[j];
                st->via_scratch[j] = m->written[t];
                m->written[t] = 1;
            }
        }
    }
}

/* Raises buffer b's last use to `until` (b < 0: none). */
static void keep_until(struct dl_exec_impl *m, int b, int until)
{
    if (b >= 0 && m->mem.bufs[b].last < until)
        m->mem.bufs[b].last = until;
}

static int root_of(const struct dl_exec_impl *m, int t)
{
    while (m->tensors[t].alias >= 0)
        t = m->tensors[t].alias;
    return t;
}

/* When root tensor t's values may go (timeline units): after its last
 * reader in forward, and after every backward that reads them -- its
 * producer's when that kernel's backward reads its output, each reading
 * layer's when that one reads its inputs (dl_kernel_backward_reads; the
 * other steps' backward reads gradients only). */
static int data_end(const struct dl_exec *e, int t)
{
    const struct dl_exec_impl *m = e->impl;
    int S = m->n_steps, end = 2 * S - 1, last = m->keep_outputs ? S - 1 : m->tensors[t].step;
    for (int s = 0; s < S; s++) {
        const struct dl_exec_step *st = &m->steps[s];
        int reads = st->src >= 0 && root_of(m, st->src) == t;
        reads |= st->kind == DL_STEP_ALLREDUCE && root_of(m, st->out) == t;
        int as_input = 0;
        for (int j = 0; st->kind == DL_STEP_LAYER && j < e->g->layers[st->layer].n_in; j++)
            as_input |= root_of(m, st->in[j]) == t;
        if (reads || as_input)
            last = s > last ? s : last; /* forward */
        if ((reads || as_input) && st->again) /* read again when its run is recomputed */
            last = end - m->recompute.run_last[st->run] > last ? end - m->recompute.run_last[st->run] : last;
        if (st->kind != DL_STEP_LAYER)
            continue;
        unsigned r = dl_kernel_backward_reads(st->kernel, &e->g->layers[st->layer], st->cfg.relu);
        if ((as_input && (r & DL_READS_INPUTS)) || (root_of(m, st->out) == t && (r & DL_READS_OUTPUT)))
            last = end - s > last ? end - s : last; /* its backward */
    }
    return last;
}

/* The buffer holding tensor t's values (an alias's are another's). */
static int data_buf(const struct dl_exec_impl *m, int t)
{
    while (m->tensors[t].alias >= 0)
        t = m->tensors[t].alias;
    return m->tensors[t].run >= 0 ? m->tensors[t].buf_again : m->tensors[t].buf_data; /* recomputed: its second home */
}

/* A split backward's weight-gradient pass comes after the input-gradient
 * pass, as a third part of the timeline (step s at 3S - 1 - s): what it
 * reads (the layer's inputs, its output and output gradient, its kernel
 * state, the workspace) lives until then. */
static void keep_for_weights(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    int S = m->n_steps;
    for (int s = 0; s < S; s++) {
        const struct dl_exec_step *st = &m->steps[s];
        if (!dl_exec_defers_weights(e, st))
            continue;
        int until = 3 * S - 1 - s;
        keep_until(m, st->again ? st->buf_saved_again : st->buf_saved, until);
        for (int j = 0; j < e->g->layers[st->layer].n_in; j++)
            keep_until(m, data_buf(m, st->in[j]), until);
        keep_until(m, data_buf(m, st->out), until);
        keep_until(m, m->tensors[st->out].buf_grad, until);
    }
    keep_until(m, m->mem.buf_workspace, 3 * S - 1);
}

int dl_exec_place(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_graph *g = e->g;
    int S = m->n_steps, end = 2 * S - 1;
    m->mem.bufs = dl_calloc((size_t)(3 * m->n_tensors + (DL_MAX_INPUTS + 2) * S + 1), sizeof *m->mem.bufs, err);
    if (!m->mem.bufs)
        return DL_ERR_NOMEM;
    /* what runs make again (--recompute full, sequence parallelism's gathers), each tensor's last reader in
     * forward (recompute.c) */
    int *last_read = dl_calloc((size_t)m->n_tensors, sizeof *last_read, err);
    if (!last_read || dl_exec_recompute_mark(e, last_read, err)) {
        free(last_read);
        return err->code ? err->code : DL_ERR_NOMEM;
    }
    size_t N = (size_t)e->max_batch;
    for (int t = 1; t < m->n_tensors; t++) { /* tensor 0: the caller's input */
        struct dl_exec_tensor *x = &m->tensors[t];
        size_t real = dl_dtype_value_size(x->shape.dtype);
        int bwd = end - x->step;
        const struct dl_exec_step *made = &m->steps[x->step];
        int keep = made->kind == DL_STEP_LAYER && (made->layer == g->loss || made->layer == g->logits);
        if (x->alias < 0 && x->run >= 0) { /* made again before its run's backward: two homes */
            x->buf_data = add_buf(m, N * (size_t)x->count * real, x->step, last_read[t]);
            x->buf_again = add_buf(m, N * (size_t)x->count * real, end - m->recompute.run_last[x->run], bwd);
        } else if (x->alias < 0) {
            x->held = keep || data_end(e, t) >= S - 1;
            x->buf_data = add_buf(m, N * (size_t)x->count * real, keep ? 0 : x->step, keep ? end : data_end(e, t));
        }
        if (x->needs_grad) /* a received tensor's gradient is sent at the end: kept till then */
            x->buf_grad = add_buf(m, N * (size_t)x->count * real, end - x->last_use,
                                  made->kind == DL_STEP_RECV ? end : bwd);
    }
    mark_scratch(e);
    for (int s = 0; s < S; s++) {
        struct dl_exec_step *st = &m->steps[s];
        st->buf_saved = -1;
        if (st->kind == DL_STEP_SEND && st->via_scratch[0] && m->tensors[st->src].needs_grad)
            st->buf_scratch[0] = add_buf(m, N * (size_t)m->tensors[st->src].count * sizeof(dl_real), end - s, end - s);
        if (st->kind != DL_STEP_LAYER)
            continue;
        st->buf_saved = add_buf(m, st->saved_bytes, s, st->again ? s : end - s);
        if (st->again) /* its kernel state made again before the run's backward */
            st->buf_saved_again = add_buf(m, st->saved_bytes, end - m->recompute.run_last[st->run], end - s);
        for (int j = 0; j < g->layers[st->layer].n_in; j++) {
            const struct dl_exec_tensor *x = &m->tensors[st->in[j]];
            st->buf_scratch[j] = st->via_scratch[j] && x->needs_grad
                                     ? add_buf(m, N * (size_t)x->count * dl_dtype_value_size(x->shape.dtype), end - s, end - s)
                                     : -1;
        }
    }
    m->mem.buf_workspace = add_buf(m, m->mem.workspace_bytes, 0, end);
    if (m->split_backward)
        keep_for_weights(e);
    free(last_read);
    e->stats.unplanned_bytes = dl_plan_total(m->mem.bufs, m->mem.n_bufs);
    return dl_plan(m->mem.bufs, m->mem.n_bufs, &e->stats.arena_bytes, err);
}
