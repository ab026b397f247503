/* tp_samples.c: tensor parallelism over the samples of a chunk (`split: batch`,
 * doc/parallel.md; Krizhevsky's "one weird trick": convolutions data
 * parallel across the tensor group, fc layers tensor parallel).  A layer on
 * this rank's share of the samples, [t*N/T, (t+1)*N/T) (plan/shard.h's
 * dl_shard_band of N), runs with the share as its batch; a whole batch is
 * cut to the share (free; backward allgathers the shares' gradients) and
 * the shares are allgathered into the whole batch (backward keeps the
 * share of the whole gradient, the same on every rank).  In plain NCHW a
 * share is one contiguous run of samples, so the shares travel as tp_rows.c's
 * bands of a single plane whose rows are samples. */
#include "exec/exec_impl.h"

/* This rank's share of n samples: the first is *lo; returns how many. */
static int share_of(const struct dl_exec *e, int n, int *lo)
{
    int count;
    dl_shard_band(n, e->shard->dims.tp, e->shard->pos.t, lo, &count);
    return count;
}

/* 1 when step s works on this rank's share of the samples. */
static int on_share(const struct dl_exec *e, const struct dl_exec_step *s)
{
    const struct dl_exec_impl *m = e->impl;
    switch (s->kind) {
    case DL_STEP_LAYER:
        return e->shard->layer[s->layer].split_batch;
    case DL_STEP_TP:
        return s->tp_in != DL_TP_IN_SLICE_BATCH && s->tp_in != DL_TP_IN_GATHER_BATCH && m->tensors[s->src].share;
    case DL_STEP_SEND:
        return m->tensors[s->src].share;
    default:
        return m->tensors[s->out].share;
    }
}

void dl_exec_samples_mark(struct dl_exec *e)
{
    struct dl_exec_impl *m = e->impl;
    for (int i = 0; i < m->n_steps; i++) {
        const struct dl_exec_step *s = &m->steps[i];
        if (s->kind == DL_STEP_SEND)
            continue;
        m->tensors[s->out].share = s->kind == DL_STEP_LAYER ? e->shard->layer[s->layer].split_batch
                                   : s->kind == DL_STEP_RECV ? e->shard->layer[s->peer_layer].split_batch
                                   : s->kind == DL_STEP_ALLREDUCE ? m->tensors[s->out].share
                                   : s->tp_in == DL_TP_IN_SLICE_BATCH ? 1
                                   : s->tp_in == DL_TP_IN_GATHER_BATCH ? 0
                                                                       : m->tensors[s->src].share;
    }
}

struct dl_exec_samples dl_exec_samples_enter(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_samples whole = {e->run.batch, e->run.sample0};
    int lo;
    if (on_share(e, s)) {
        e->run.batch = share_of(e, whole.batch, &lo);
        e->run.sample0 += lo;
    }
    return whole;
}

void dl_exec_samples_leave(struct dl_exec *e, struct dl_exec_samples whole)
{
    e->run.batch = whole.batch;
    e->run.sample0 = whole.sample0;
}

int dl_exec_samples_check(const struct dl_exec *e, int batch, struct dl_error *err)
{
    int T = e->shard->dims.tp;
    for (int i = e->first; i < e->end && batch < T; i++)
        if (e->shard->layer[i].split == DL_SPLIT_BATCH)
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s', split batch: a chunk of %d samples cannot give each of "
                             "the %d tensor ranks a share of at least 1 sample (make the batch per data-parallel "
                             "rank and pipeline chunk at least %d)", e->shard->g->layers[i].name, batch, T, T);
    return DL_OK;
}

size_t dl_exec_samples_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch)
{
    int T = e->shard->dims.tp;
    return (size_t)(T + 1) * (size_t)((batch + T - 1) / T) * (size_t)e->impl->tensors[s->src].count * sizeof(dl_real);
}

void dl_exec_samples_forward(struct dl_exec *e, const struct dl_exec_step *s)
{
    const struct dl_exec_tensor *src = &e->impl->tensors[s->src], *out = &e->impl->tensors[s->out];
    int lo, n = share_of(e, e->run.batch, &lo), W = (int)src->count;
    if (s->tp_in == DL_TP_IN_SLICE_BATCH)
        dl_exec_copy_rows(out->data, n, 0, src->data, e->run.batch, lo, n, 1, W, 0);
    else
        dl_exec_gather_bands(e, src->data, n, out->data, e->run.batch, 1, W, 0);
}

void dl_exec_samples_backward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *out = &m->tensors[s->out];
    int lo, n = share_of(e, e->run.batch, &lo), W = (int)src->count, acc = m->written[s->src];
    if (!src->needs_grad)
        return;
    if (s->tp_in == DL_TP_IN_SLICE_BATCH) /* every rank's share of the gradient, the whole batch's again */
        dl_exec_gather_bands(e, out->grad, n, src->grad, e->run.batch, 1, W, acc);
    else /* the same whole gradient on every rank: its share */
        dl_exec_copy_rows(src->grad, n, 0, out->grad, e->run.batch, lo, n, 1, W, acc);
    m->written[s->src] = 1;
}
