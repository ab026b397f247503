/* recompute.c: activation recomputation, --recompute full (exec.h's
 * options; Chen et al. 2016, Megatron-LM's full recomputation).  The unit
 * is a block instance of the network file (graph.h's block: a `block:`
 * use, each repeat one): the steps of its layers, consecutive in the step
 * list, make a run (the reorders, tensor-parallel adapters and partial-sum
 * allreduces in between count towards the layer they serve; a pipeline
 * send or receive ends a run).  A tensor made by a run and read only by
 * that run's steps is not kept for backward: its first home lives from its
 * step to its last reader in forward, and just before the run's backward
 * (the backward of its last step comes first) the steps that make such
 * tensors run forward again, in order, into second homes that live until
 * their backward.  What the run reads from outside (its input: the
 * previous block's output, or what the pipeline received) is kept as
 * always.  The second forward draws what the first drew (dropout's masks
 * are functions of the layer, step and sample: op.h), runs the
 * tensor group's collectives of the run again on every tensor rank at the
 * same point, and counts nothing (op.h's counts_forwards).  A step of a
 * layer with running statistics (batch norm) never runs twice: its output
 * is kept, so its statistics move once a step.
 * Sequence parallelism (the shard's dims.sp, with or without --recompute)
 * gathers the tensor ranks' bands of positions before each linear that
 * needs them all (Korthikanti et al. 2022): such a gather is a run of its
 * own, made again before the backward of the last layer reading it, so
 * the whole tensor lives in forward and around that backward only, and
 * what stays for backward between them is the band.  The memory plan
 * (place.c's dl_exec_place) places both homes; run.c swaps the pointers. */
#include "exec/exec_impl.h"

#include <stdlib.h>

/* The block instance step s works for (-1: none, or a pipeline message). */
static int block_of(const struct dl_exec *e, const struct dl_exec_step *s)
{
    if (s->kind == DL_STEP_RECV || s->kind == DL_STEP_SEND)
        return -1;
    int layer = s->kind == DL_STEP_LAYER ? s->layer : s->timed_layer;
    return layer >= 0 ? e->g->layers[layer].block : -1;
}

/* A layer whose forward moves state (running statistics, counters). */
static int moves_state(const struct dl_layer *l)
{
    for (int j = 0; j < l->n_params; j++)
        if (!l->param[j].trainable)
            return 1;
    return 0;
}

/* A sequence-parallel gather of the positions' bands (its own run). */
static int regathered(const struct dl_exec *e, const struct dl_exec_step *s)
{
    return e->shard->dims.sp && s->kind == DL_STEP_TP && s->tp_in == DL_TP_IN_GATHER_ROWS;
}

static int root_of(const struct dl_exec_impl *m, int t)
{
    while (m->tensors[t].alias >= 0)
        t = m->tensors[t].alias;
    return t;
}

/* Whether tensor t (a root) may be made again by its run: made there by a
 * step that can run twice, and read in forward only by the run's steps. */
static int recomputable(const struct dl_exec *e, int t, const int *last_read)
{
    const struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *x = &m->tensors[t];
    if (t == 0 || x->alias >= 0 || x->step < 0 || m->steps[x->step].run < 0 || last_read[t] < 0)
        return 0;
    const struct dl_exec_step *made = &m->steps[x->step];
    if (made->kind == DL_STEP_RECV)
        return 0;
    if (made->kind == DL_STEP_LAYER &&
        (made->layer == e->g->loss || made->layer == e->g->logits || moves_state(&e->g->layers[made->layer])))
        return 0;
    int r = made->run;
    if (regathered(e, made)) /* the gathered bands: read by the layers after it, made again for their backward */
        return 1;
    for (int s = 0; s < m->n_steps; s++) { /* every forward reader of t or of an alias of it */
        const struct dl_exec_step *st = &m->steps[s];
        int reads = st->src >= 0 && root_of(m, st->src) == t;
        reads |= st->kind == DL_STEP_ALLREDUCE && root_of(m, st->out) == t;
        for (int j = 0; st->kind == DL_STEP_LAYER && j < e->g->layers[st->layer].n_in; j++)
            reads |= root_of(m, st->in[j]) == t;
        if (reads && st->run != r)
            return 0;
    }
    return 1;
}

int dl_exec_recompute_mark(struct dl_exec *e, int *last_read, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    int S = m->n_steps, full = m->recompute.mode == DL_RECOMPUTE_FULL;
    /* runs: consecutive steps of one block instance (--recompute full), or
     * a sequence-parallel gather alone */
    for (int s = 0, prev = -1; s < S; s++) {
        int b = full ? block_of(e, &m->steps[s]) : -1;
        if (b < 0 && regathered(e, &m->steps[s])) {
            m->steps[s].run = m->recompute.n_runs++;
            prev = -1;
            continue;
        }
        m->steps[s].run = b < 0 ? -1 : b == prev && s > 0 && m->steps[s - 1].run >= 0 ? m->steps[s - 1].run
                                                                                      : m->recompute.n_runs++;
        prev = b;
    }
    /* each tensor's last forward reader, through its aliases */
    for (int t = 0; t < m->n_tensors; t++)
        last_read[t] = -1;
    for (int s = 0; s < S; s++) {
        const struct dl_exec_step *st = &m->steps[s];
        if (st->src >= 0)
            last_read[root_of(m, st->src)] = s;
        if (st->kind == DL_STEP_ALLREDUCE)
            last_read[root_of(m, st->out)] = s;
        for (int j = 0; st->kind == DL_STEP_LAYER && j < e->g->layers[st->layer].n_in; j++)
            last_read[root_of(m, st->in[j])] = s;
    }
    for (int t = 0; t < m->n_tensors; t++) /* roots first: an alias comes after its root */
        if (recomputable(e, t, last_read))
            m->tensors[t].run = m->steps[m->tensors[t].step].run;
    for (int t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].alias >= 0)
            m->tensors[t].run = m->tensors[root_of(m, t)].run;
    /* the steps that make a recomputed tensor run again; a run with none
     * is not recomputed at all */
    m->recompute.run_last = dl_calloc((size_t)(m->recompute.n_runs > 0 ? m->recompute.n_runs : 1), sizeof *m->recompute.run_last, err);
    if (!m->recompute.run_last)
        return DL_ERR_NOMEM;
    for (int r = 0; r < m->recompute.n_runs; r++)
        m->recompute.run_last[r] = -1;
    for (int s = 0; s < S; s++) {
        struct dl_exec_step *st = &m->steps[s];
        st->again = st->run >= 0 && st->out >= 0 && m->tensors[st->out].run == st->run;
        if (st->again)
            m->recompute.run_last[st->run] = s;
    }
    for (int s = 0; s < S; s++) /* the run's backward starts at its last step, whatever runs again */
        if (m->steps[s].run >= 0 && m->recompute.run_last[m->steps[s].run] >= 0 && s > m->recompute.run_last[m->steps[s].run])
            m->recompute.run_last[m->steps[s].run] = s;
    for (int s = 0; s < S; s++) { /* a gather's: at the last layer reading what it gathered */
        const struct dl_exec_step *st = &m->steps[s];
        if (st->run >= 0 && st->again && regathered(e, st) && last_read[st->out] > m->recompute.run_last[st->run])
            m->recompute.run_last[st->run] = last_read[st->out];
    }
    return DL_OK;
}

/* Every recomputed tensor and step at home h (0 first, 1 again; run r
 * only for again, -1: every run). */
static void point(struct dl_exec *e, int again, int r)
{
    struct dl_exec_impl *m = e->impl;
    for (int t = 0; t < m->n_tensors; t++) {
        struct dl_exec_tensor *x = &m->tensors[t];
        if (x->run >= 0 && (r < 0 || x->run == r))
            x->data = again ? x->data_again : x->data_first;
    }
    for (int s = 0; s < m->n_steps; s++) {
        struct dl_exec_step *st = &m->steps[s];
        if (st->again && (r < 0 || st->run == r))
            st->saved = again ? st->saved_again : st->saved_first;
    }
}

void dl_exec_recompute_first(struct dl_exec *e)
{
    if (e->impl->recompute.n_runs > 0)
        point(e, 0, -1);
}

void dl_exec_recompute_again(struct dl_exec *e, int r)
{
    point(e, 1, r);
}
