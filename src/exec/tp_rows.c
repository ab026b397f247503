/* tp_rows.c: the tensor-parallel steps on bands of rows (spatial parallelism,
 * Dryden et al., IPDPS 2019; doc/parallel.md): a whole tensor cut to this
 * rank's band, the bands gathered whole, partial sums reduce-scattered into
 * the bands (sequence parallelism's row-parallel linears: their output in
 * forward, their input gradient in backward), and the halo exchange that gives a
 * layer split by height the rows of its neighbours' bands its window reads
 * (backward sends those rows' gradients back, where they are added); and
 * the sum over the tensor group of the weight gradients a layer computes on
 * its band (on a device without host memory: computed there, summed in a
 * host copy, added back by the device).  Tensors are plain NCHW: band t holds rows [lo, lo + n) of every
 * (sample, channel) plane (plan/shard.h's dl_shard_band). */
#include "exec/exec_impl.h"

#include <string.h>

#include "comm/tags.h"

/* (exec_impl.h) */
void dl_exec_copy_rows(dl_real *dst, int dh, int d0, const dl_real *src, int sh, int s0, int rows, long planes, int W,
                       int acc)
{
    long n = (long)rows * W;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++) {
        dl_real *d = dst + (p * dh + d0) * W;
        const dl_real *s = src + (p * sh + s0) * W;
        if (!acc) {
            memcpy(d, s, sizeof *d * (size_t)n);
            continue;
        }
        for (long i = 0; i < n; i++)
            d[i] += s[i];
    }
}

static void zero_rows(dl_real *dst, int dh, int d0, int rows, long planes, int W)
{
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < planes; p++)
        memset(dst + (p * dh + d0) * W, 0, sizeof *dst * (size_t)rows * (size_t)W);
}

/* The most rows a band of a tensor of H rows has over T ranks. */
static int widest_band(int H, int T)
{
    return (H + T - 1) / T;
}

size_t dl_exec_rows_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch)
{
    const struct dl_exec_tensor *src = &e->impl->tensors[s->src], *out = &e->impl->tensors[s->out];
    int T = e->shard->dims.tp;
    size_t plane_rows = (size_t)batch * (size_t)src->shape.c * (size_t)src->shape.w, real = sizeof(dl_real);
    if (s->tp_in == DL_TP_IN_HALO) /* rows to and from each neighbour */
        return 4 * plane_rows * (size_t)(out->shape.h - src->shape.h) / 2 * real;
    int H = src->shape.h > out->shape.h ? src->shape.h : out->shape.h;
    return (size_t)(T + 1) * plane_rows * (size_t)widest_band(H, T) * real; /* a band padded, and every rank's */
}

/* (exec_impl.h) */
void dl_exec_gather_bands(struct dl_exec *e, const dl_real *band, int b, dl_real *whole, int H, long planes, int W,
                          int acc)
{
    struct dl_comm *c = e->impl->tensor_comm;
    int T = c->size, wide = widest_band(H, T);
    long padded = planes * wide * W;
    dl_real *mine = e->impl->mem.workspace, *all = mine + padded;
    dl_exec_copy_rows(mine, wide, 0, band, b, 0, b, planes, W, 0);
    dl_exec_comm_status(e, c->ops->allgather(c, mine, all, sizeof *all * (size_t)padded, &e->err));
    for (int t = 0; t < T && !e->status; t++) {
        int lo, n;
        dl_shard_band(H, T, t, &lo, &n);
        dl_exec_copy_rows(whole, H, lo, all + t * padded, wide, 0, n, planes, W, acc);
    }
}

/* (exec_impl.h) */
void dl_exec_sum_bands(struct dl_exec *e, const dl_real *whole, int H, dl_real *band, int b, long planes, int W,
                       int acc)
{
    struct dl_comm *c = e->impl->tensor_comm;
    int T = c->size, wide = widest_band(H, T);
    long padded = planes * wide * W;
    dl_real *mine = e->impl->mem.workspace, *all = mine + padded;
    for (int t = 0; t < T; t++) { /* rank t's rows, padded (the padding's sums are never read) */
        int lo, n;
        dl_shard_band(H, T, t, &lo, &n);
        dl_exec_copy_rows(all + t * padded, wide, 0, whole, H, lo, n, planes, W, 0);
    }
    dl_exec_comm_status(e, c->ops->reduce_scatter(c, all, mine, DL_F32, (size_t)padded, &e->err));
    if (!e->status)
        dl_exec_copy_rows(band, b, 0, mine, wide, 0, b, planes, W, acc);
}

/* Sends to_up to rank t - 1 and to_down to rank t + 1 (those that exist)
 * while receiving from_up from t - 1 and from_down from t + 1, `bytes`
 * each; tags for messages travelling up and down. */
static void exchange(struct dl_exec *e, const dl_real *to_up, const dl_real *to_down, dl_real *from_up,
                     dl_real *from_down, size_t bytes, int tag_up, int tag_down)
{
    struct dl_comm *c = e->impl->tensor_comm;
    int t = c->rank, T = c->size;
    struct dl_comm_req sent[2] = {0};
    if (t > 0)
        dl_exec_comm_status(e, c->ops->isend(c, to_up, bytes, t - 1, tag_up, &sent[0], &e->err));
    if (t < T - 1)
        dl_exec_comm_status(e, c->ops->isend(c, to_down, bytes, t + 1, tag_down, &sent[1], &e->err));
    if (t > 0)
        dl_exec_comm_status(e, c->ops->recv(c, from_up, bytes, t - 1, tag_down, &e->err));
    if (t < T - 1)
        dl_exec_comm_status(e, c->ops->recv(c, from_down, bytes, t + 1, tag_up, &e->err));
    for (int k = 0; k < 2; k++)
        if (sent[k].active)
            dl_exec_comm_status(e, c->ops->wait(c, &sent[k], &e->err));
}

/* The band src (b rows) into out (b + 2p rows) at rows [p, p + b), with the
 * last p rows of the band above (zeros on rank 0) and the first p rows of
 * the band below (zeros on the last rank) around it. */
static void halo_forward(struct dl_exec *e, const struct dl_exec_tensor *src, const struct dl_exec_tensor *out)
{
    struct dl_comm *c = e->impl->tensor_comm;
    int b = src->shape.h, p = (out->shape.h - b) / 2, W = src->shape.w;
    long planes = (long)e->run.batch * src->shape.c, n = planes * p * W;
    dl_real *to_up = e->impl->mem.workspace, *to_down = to_up + n, *from_up = to_down + n, *from_down = from_up + n;
    dl_exec_copy_rows(out->data, b + 2 * p, p, src->data, b, 0, b, planes, W, 0);
    dl_exec_copy_rows(to_up, p, 0, src->data, b, 0, p, planes, W, 0);
    dl_exec_copy_rows(to_down, p, 0, src->data, b, b - p, p, planes, W, 0);
    exchange(e, to_up, to_down, from_up, from_down, sizeof *to_up * (size_t)n, DL_TAG_HALO_UP, DL_TAG_HALO_DOWN);
    if (c->rank > 0)
        dl_exec_copy_rows(out->data, b + 2 * p, 0, from_up, p, 0, p, planes, W, 0);
    else
        zero_rows(out->data, b + 2 * p, 0, p, planes, W);
    if (c->rank < c->size - 1)
        dl_exec_copy_rows(out->data, b + 2 * p, p + b, from_down, p, 0, p, planes, W, 0);
    else
        zero_rows(out->data, b + 2 * p, p + b, p, planes, W);
}

/* The band's own rows' gradient, then the halos' gradients sent back to
 * the neighbours whose rows they are and theirs added here. */
static void halo_backward(struct dl_exec *e, const struct dl_exec_tensor *src, const struct dl_exec_tensor *out,
                          int acc)
{
    struct dl_comm *c = e->impl->tensor_comm;
    int b = src->shape.h, p = (out->shape.h - b) / 2, W = src->shape.w;
    long planes = (long)e->run.batch * src->shape.c, n = planes * p * W;
    dl_real *to_up = e->impl->mem.workspace, *to_down = to_up + n, *from_up = to_down + n, *from_down = from_up + n;
    dl_exec_copy_rows(src->grad, b, 0, out->grad, b + 2 * p, p, b, planes, W, acc);
    dl_exec_copy_rows(to_up, p, 0, out->grad, b + 2 * p, 0, p, planes, W, 0);
    dl_exec_copy_rows(to_down, p, 0, out->grad, b + 2 * p, p + b, p, planes, W, 0);
    exchange(e, to_up, to_down, from_up, from_down, sizeof *to_up * (size_t)n, DL_TAG_HALO_GRAD_UP,
             DL_TAG_HALO_GRAD_DOWN);
    if (c->rank > 0)
        dl_exec_copy_rows(src->grad, b, 0, from_up, p, 0, p, planes, W, 1);
    if (c->rank < c->size - 1)
        dl_exec_copy_rows(src->grad, b, b - p, from_down, p, 0, p, planes, W, 1);
}

void dl_exec_rows_forward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *out = &m->tensors[s->out];
    long planes = (long)e->run.batch * src->shape.c;
    int lo, n, W = src->shape.w;
    if (s->tp_in == DL_TP_IN_SLICE_ROWS && src->partial) { /* the sums of this rank's band */
        dl_exec_sum_bands(e, src->data, src->shape.h, out->data, out->shape.h, planes, W, 0);
    } else if (s->tp_in == DL_TP_IN_SLICE_ROWS) {
        dl_shard_band(src->shape.h, m->tensor_comm->size, m->tensor_comm->rank, &lo, &n);
        dl_exec_copy_rows(out->data, n, 0, src->data, src->shape.h, lo, n, planes, W, 0);
    } else if (s->tp_in == DL_TP_IN_GATHER_ROWS) {
        dl_exec_gather_bands(e, src->data, src->shape.h, out->data, out->shape.h, planes, W, 0);
    } else {
        halo_forward(e, src, out);
    }
}

void dl_exec_rows_backward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_exec_tensor *src = &m->tensors[s->src], *out = &m->tensors[s->out];
    long planes = (long)e->run.batch * src->shape.c;
    int lo, n, W = src->shape.w, acc = m->written[s->src];
    if (!src->needs_grad)
        return;
    if (s->tp_in == DL_TP_IN_SLICE_ROWS) { /* every rank's band of the gradient, whole again */
        dl_exec_gather_bands(e, out->grad, out->shape.h, src->grad, src->shape.h, planes, W, acc);
    } else if (s->tp_in == DL_TP_IN_GATHER_ROWS && s->tp_sum_grad) { /* partial whole gradients: their band's sums */
        dl_exec_sum_bands(e, out->grad, out->shape.h, src->grad, src->shape.h, planes, W, acc);
    } else if (s->tp_in == DL_TP_IN_GATHER_ROWS) { /* the same whole gradient on every rank: its band */
        dl_shard_band(out->shape.h, m->tensor_comm->size, m->tensor_comm->rank, &lo, &n);
        dl_exec_copy_rows(src->grad, n, 0, out->grad, out->shape.h, lo, n, planes, W, acc);
    } else {
        halo_backward(e, src, out, acc);
    }
    m->written[s->src] = 1;
}

/* ---------------------------------------------------------------- weight gradients */

long dl_exec_rows_grad_values(const struct dl_exec *e)
{
    long most = 0;
    for (int i = e->first; i < e->end; i++)
        if ((e->shard->layer[i].split_rows || e->shard->layer[i].split_batch) &&
            dl_layer_param_count(&e->g->layers[i]) > most)
            most = dl_layer_param_count(&e->g->layers[i]);
    return most;
}

int dl_exec_rows_grad_begin(struct dl_exec *e, const struct dl_exec_step *s, struct dl_kernel_args *a)
{
    const struct dl_layer *l = &e->g->layers[s->layer];
    long n = dl_layer_param_count(l), at = 0;
    if (!(e->shard->layer[s->layer].split_rows || e->shard->layer[s->layer].split_batch) || !n)
        return 0;
    int rc = e->impl->device->fill(e->impl->grad_part, 0, sizeof(dl_real) * (size_t)n, &e->err);
    if (rc && !e->status)
        e->status = rc;
    dl_real **part = e->impl->grad_part_at; /* the executor's pointers stay as they are */
    for (int j = 0; j < l->n_params; j++) {
        part[j] = a->c.dparam[j] ? e->impl->grad_part + at : NULL;
        at += a->c.dparam[j] ? l->param[j].count : 0;
    }
    a->c.dparam = part;
    return 1;
}

/* On a device without host memory: the band's weight gradients copied
 * out, summed over the group in host memory, copied back and added to the
 * layer's gradients by the device. */
static void grad_end_on_device(struct dl_exec *e, int layer, long n)
{
    const struct dl_layer *l = &e->g->layers[layer];
    struct dl_exec_impl *m = e->impl;
    const struct dl_device *dev = m->device;
    size_t bytes = sizeof(dl_real) * (size_t)n;
    int rc = e->status ? e->status : dev->copy(m->grad_part_host, m->grad_part, bytes, DL_COPY_TO_HOST, &e->err);
    if (!rc)
        dl_exec_group_sum_reals(e, m->grad_part_host, (size_t)n);
    if (!rc && !e->status)
        rc = dev->copy(m->grad_part, m->grad_part_host, bytes, DL_COPY_TO_DEVICE, &e->err);
    long at = 0;
    for (int j = 0; j < l->n_params && !rc && !e->status; j++) {
        if (!e->dparam[layer][j])
            continue;
        rc = dev->accumulate(e->dparam[layer][j], m->grad_part + at, l->param[j].count, DL_F32, &e->err);
        at += l->param[j].count;
    }
    if (rc && !e->status)
        e->status = rc;
}

void dl_exec_rows_grad_end(struct dl_exec *e, const struct dl_exec_step *s)
{
    const struct dl_layer *l = &e->g->layers[s->layer];
    long n = dl_layer_param_count(l), at = 0;
    if (!e->impl->device->host_memory) {
        grad_end_on_device(e, s->layer, n);
        return;
    }
    dl_exec_group_sum_reals(e, e->impl->grad_part, (size_t)n);
    for (int j = 0; j < l->n_params && !e->status; j++) {
        dl_real *dw = e->dparam[s->layer][j];
        const dl_real *part = e->impl->grad_part + at;
        if (!dw)
            continue;
        for (long k = 0; k < l->param[j].count; k++)
            dw[k] += part[k];
        at += l->param[j].count;
    }
}
