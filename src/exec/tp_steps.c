/* tp_steps.c: tensor parallelism's communication steps on channel blocks
 * (doc/parallel.md), as the four regions of Megatron-LM (Shoeybi et al.
 * 2019; megatron/core/tensor_parallel/mappings.py), each a forward and a
 * backward side by side:
 *   copy to region       forward: the whole tensor as it is (an alias)
 *                        backward: the ranks' partial gradients summed
 *   reduce from region   forward: the ranks' partial outputs summed
 *                        backward: the gradient as it is (nothing to do)
 *   scatter to region    forward: this rank's block of a whole tensor
 *                        backward: the blocks' gradients allgathered whole
 *   gather from region   forward: the blocks allgathered whole
 *                        backward: this rank's block of the whole gradient,
 *                        or, when the gradient is a partial sum (the layer
 *                        after was split by its outputs), the sums
 *                        reduce-scattered into the blocks
 * A step of kind TP is one of copy, scatter or gather by its tp_in (plan/
 * shard.h's enum dl_tp_in: AS_IS, SLICE, GATHER); an ALLREDUCE step is a
 * reduce (a row-split layer's partial output).  The steps on bands of rows
 * (height splits, sequence parallelism) are tp_rows.c's, those on shares of
 * the samples (`split: batch`) tp_samples.c's; the splits themselves are
 * decided in plan/tp_split.c and chosen by the planner in
 * planner/tp_split_choice.c.  Tensors are plain (NCHW): a rank's channel
 * block t of a tensor of C channels holds channels [t*C/T, (t+1)*C/T) of
 * every sample; channel groups (a packed q, k, v) are blocked as samples of
 * their own.  Every rank of a tensor group has the same step list, so their
 * collectives come in the same order. */
#include "exec/exec_impl.h"

#include <string.h>

static void failed(struct dl_exec *e, int rc)
{
    dl_exec_comm_status(e, rc);
}

/* Where a tensor-parallel step's buffers are: NULL, host memory (the
 * host's, or a device's host mirrors, staging.c); else that device's
 * memory, which only its copy_rows and accumulate touch (in place, over
 * the tensor group's communicator of device buffers).  Row r of rows of B
 * values each, from src + r * src_pitch to dst + r * dst_pitch (pitches
 * in values), or added there when acc: the same sums either way, so both
 * give the same bits.  On the device a copy is one call; a sum, one call
 * a row (in order: errors go to e). */
static void move_rows(struct dl_exec *e, const struct dl_device *dev, dl_real *dst, long dst_pitch,
                      const dl_real *src, long src_pitch, long B, int rows, int acc)
{
    int rc = DL_OK;
    if (!dev) {
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            dl_real *d = dst + (long)r * dst_pitch;
            const dl_real *v = src + (long)r * src_pitch;
            for (long i = 0; i < B; i++)
                d[i] = acc ? d[i] + v[i] : v[i];
        }
    } else if (!acc) {
        rc = dev->copy_rows(dst, sizeof *dst * (size_t)dst_pitch, src, sizeof *src * (size_t)src_pitch,
                            sizeof *dst * (size_t)B, (size_t)rows, &e->err);
    } else {
        for (int r = 0; r < rows && !rc; r++)
            rc = dev->accumulate(dst + (long)r * dst_pitch, src + (long)r * src_pitch, B, DL_F32, &e->err);
    }
    if (rc && !e->status)
        e->status = rc;
}

/* [T][N][B] (a collective's rank order, B values per sample and rank) to
 * [N][T][B] (the whole tensor's sample order), added when acc. */
static void ranks_to_samples(struct dl_exec *e, const struct dl_device *dev, const dl_real *byrank, dl_real *whole,
                             int N, long B, int T, int acc)
{
    for (int t = 0; t < T; t++)
        move_rows(e, dev, whole + t * B, T * B, byrank + (long)t * N * B, B, B, N, acc);
}

static void samples_to_ranks(struct dl_exec *e, const struct dl_device *dev, const dl_real *whole, dl_real *byrank,
                             int N, long B, int T)
{
    for (int t = 0; t < T; t++)
        move_rows(e, dev, byrank + (long)t * N * B, B, whole + t * B, T * B, B, N, 0);
}

/* Block t of whole ([N][T][B]) into block ([N][B]), added when acc. */
static void block_of(struct dl_exec *e, const struct dl_device *dev, const dl_real *whole, dl_real *block, int N,
                     long B, int T, int t, int acc)
{
    move_rows(e, dev, block, B, whole + t * B, T * B, B, N, acc);
}

void dl_exec_add_into(struct dl_exec *e, const struct dl_device *dev, dl_real *dst, const dl_real *src, long n, int acc)
{
    if (dst == src && !acc)
        return;
    if (dev) {
        int rc = acc ? dev->accumulate(dst, src, n, DL_F32, &e->err)
                     : dev->copy(dst, src, sizeof *dst * (size_t)n, DL_COPY_WITHIN, &e->err);
        if (rc && !e->status)
            e->status = rc;
        return;
    }
    if (!acc) {
        memcpy(dst, src, sizeof *dst * (size_t)n);
        return;
    }
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        dst[i] += src[i];
}

/* A collective's buffers on dev are final: the device's queued kernels
 * and copies have finished (a communicator of device buffers runs on a
 * stream of its own, which does not follow them; its collectives return
 * when they are done).  NULL: host memory, nothing to wait for. */
static int settled(const struct dl_device *dev, struct dl_error *err)
{
    return dev ? dev->sync(err) : DL_OK;
}

static int gather_all(struct dl_comm *c, const struct dl_device *dev, const void *send, void *recv, size_t bytes,
                      struct dl_error *err)
{
    int rc = settled(dev, err);
    return rc ? rc : c->ops->allgather(c, send, recv, bytes, err);
}

/* The sums of the communicators are single precision: the double build
 * (gradient checks) has no tensor parallelism. */
static int sum_all(struct dl_comm *c, const struct dl_device *dev, dl_real *buf, size_t n, struct dl_error *err)
{
#ifdef DL_REAL_DOUBLE
    (void)dev;
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "tensor parallelism runs in single precision only");
#else
    int rc = settled(dev, err);
    return rc ? rc : c->ops->allreduce(c, buf, DL_F32, n, err);
#endif
}

static int sum_scatter(struct dl_comm *c, const struct dl_device *dev, const dl_real *send, dl_real *recv,
                       size_t count, struct dl_error *err)
{
#ifdef DL_REAL_DOUBLE
    (void)dev;
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "tensor parallelism runs in single precision only");
#else
    int rc = settled(dev, err);
    return rc ? rc : c->ops->reduce_scatter(c, send, recv, DL_F32, count, err);
#endif
}

int dl_exec_comm_in_place(const struct dl_exec *e, const struct dl_exec_step *s)
{
    return e->impl->tensor_device_comm &&
           (s->kind == DL_STEP_ALLREDUCE || (s->kind == DL_STEP_TP && s->tp_in <= DL_TP_IN_GATHER));
}

/* Step s's tensor group: the communicator of device buffers, *dev its
 * device, when s runs in place; else the host's, *dev = NULL. */
static struct dl_comm *tensor_group(const struct dl_exec *e, const struct dl_exec_step *s,
                                    const struct dl_device **dev)
{
    const struct dl_exec_impl *m = e->impl;
    int in_place = dl_exec_comm_in_place(e, s);
    *dev = in_place ? m->device : NULL;
    return in_place ? m->tensor_device_comm : m->tensor_comm;
}

/* A step on shares of the samples (`split: batch`). */
static int on_samples(const struct dl_exec_step *s)
{
    return s->tp_in == DL_TP_IN_SLICE_BATCH || s->tp_in == DL_TP_IN_GATHER_BATCH;
}

size_t dl_exec_tp_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch)
{
    if (s->kind != DL_STEP_TP || s->tp_in == DL_TP_IN_AS_IS)
        return 0;
    if (on_samples(s))
        return dl_exec_samples_workspace(e, s, batch);
    if (s->tp_in >= DL_TP_IN_SLICE_ROWS)
        return dl_exec_rows_workspace(e, s, batch);
    const struct dl_exec_impl *m = e->impl;
    long a = m->tensors[s->src].count, b = m->tensors[s->out].count;
    return sizeof(dl_real) * (size_t)batch * (size_t)(a + b); /* the whole tensor by rank, and a block */
}


/* A channel-block step's operands: its tensors, the tensor group and where
 * its buffers are (tensor_group), N samples (times the channel groups), T
 * ranks, a block's values per sample of src and of dst, the workspace, and
 * acc: 1 when src's gradient already holds a sum to add to. */
struct tp_call {
    struct dl_exec *e;
    const struct dl_exec_step *s;
    const struct dl_exec_tensor *src, *dst;
    const struct dl_device *dev;
    struct dl_comm *c;
    int N, T, acc;
    long src_count, dst_count;
    dl_real *byrank;
};

static struct tp_call tp_call(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    struct tp_call k = {.e = e, .s = s, .src = &m->tensors[s->src], .dst = &m->tensors[s->out]};
    k.c = tensor_group(e, s, &k.dev);
    int G = s->tp_groups > 1 ? s->tp_groups : 1;
    k.N = e->run.batch * G;
    k.T = k.c->size;
    k.acc = m->written[s->src];
    k.src_count = k.src->count / G;
    k.dst_count = k.dst->count / G;
    k.byrank = m->mem.workspace;
    return k;
}

/* copy to region: forward, the tensor as it is (src and dst are the same
 * memory); backward, the consumer's partial input gradient summed. */
static void copy_to_region_backward(const struct tp_call *k)
{
    struct dl_exec *e = k->e;
    failed(e, sum_all(k->c, k->dev, k->dst->grad, (size_t)e->run.batch * (size_t)k->dst->count, &e->err));
    dl_exec_add_into(e, k->dev, k->src->grad, k->dst->grad, (long)e->run.batch * k->src->count, k->acc);
}

/* scatter to region: forward, this rank's block of the whole tensor. */
static void scatter_to_region_forward(const struct tp_call *k)
{
    block_of(k->e, k->dev, k->src->data, k->dst->data, k->N, k->dst_count, k->T, k->c->rank, 0);
}

/* scatter to region: backward, every rank's block of the gradient, whole again. */
static void scatter_to_region_backward(const struct tp_call *k)
{
    struct dl_exec *e = k->e;
    failed(e, gather_all(k->c, k->dev, k->dst->grad, k->byrank, sizeof *k->byrank * (size_t)k->N * (size_t)k->dst_count,
                         &e->err));
    ranks_to_samples(e, k->dev, k->byrank, k->src->grad, k->N, k->dst_count, k->T, k->acc);
}

/* gather from region: forward, the blocks allgathered whole. */
static void gather_from_region_forward(const struct tp_call *k)
{
    struct dl_exec *e = k->e;
    failed(e, gather_all(k->c, k->dev, k->src->data, k->byrank, sizeof *k->byrank * (size_t)k->N * (size_t)k->src_count,
                         &e->err));
    ranks_to_samples(e, k->dev, k->byrank, k->dst->data, k->N, k->src_count, k->T, 0);
}

/* gather from region: backward, this rank's block of the whole gradient
 * (the same on every rank), or of partial whole gradients summed over the
 * group (reduce-scattered, as sequence parallelism's row-parallel linear). */
static void gather_from_region_backward(const struct tp_call *k)
{
    struct dl_exec *e = k->e;
    if (!k->s->tp_sum_grad) {
        block_of(e, k->dev, k->dst->grad, k->src->grad, k->N, k->src_count, k->T, k->c->rank, k->acc);
        return;
    }
    dl_real *block = k->byrank + (long)k->N * k->dst_count;
    samples_to_ranks(e, k->dev, k->dst->grad, k->byrank, k->N, k->src_count, k->T);
    failed(e, sum_scatter(k->c, k->dev, k->byrank, block, (size_t)k->N * (size_t)k->src_count, &e->err));
    dl_exec_add_into(e, k->dev, k->src->grad, block, (long)k->N * k->src_count, k->acc);
}

/* The regions of a TP step on channel blocks, by its tp_in (NULL: nothing
 * to do in that direction). */
static const struct {
    void (*forward)(const struct tp_call *k);
    void (*backward)(const struct tp_call *k);
} regions[DL_TP_IN_GATHER + 1] = {
    [DL_TP_IN_AS_IS] = {NULL, copy_to_region_backward},
    [DL_TP_IN_SLICE] = {scatter_to_region_forward, scatter_to_region_backward},
    [DL_TP_IN_GATHER] = {gather_from_region_forward, gather_from_region_backward},
};

void dl_exec_tp_forward(struct dl_exec *e, const struct dl_exec_step *s)
{
    if (s->kind == DL_STEP_ALLREDUCE) { /* reduce from region: the partial outputs summed */
        const struct dl_device *dev;
        struct dl_comm *c = tensor_group(e, s, &dev);
        const struct dl_exec_tensor *out = &e->impl->tensors[s->out];
        failed(e, sum_all(c, dev, out->data, (size_t)e->run.batch * (size_t)out->count, &e->err));
    } else if (on_samples(s)) {
        dl_exec_samples_forward(e, s);
    } else if (s->tp_in >= DL_TP_IN_SLICE_ROWS) {
        dl_exec_rows_forward(e, s);
    } else if (regions[s->tp_in].forward) {
        struct tp_call k = tp_call(e, s);
        regions[s->tp_in].forward(&k);
    }
}

void dl_exec_tp_backward(struct dl_exec *e, const struct dl_exec_step *s)
{
    struct dl_exec_impl *m = e->impl;
    if (s->kind != DL_STEP_TP) /* reduce from region: the gradient as it is */
        return;
    if (on_samples(s)) {
        dl_exec_samples_backward(e, s);
        return;
    }
    if (s->tp_in >= DL_TP_IN_SLICE_ROWS) {
        dl_exec_rows_backward(e, s);
        return;
    }
    if (!m->tensors[s->src].needs_grad)
        return;
    struct tp_call k = tp_call(e, s);
    regions[s->tp_in].backward(&k);
    m->written[s->src] = 1;
}

void dl_exec_group_sum_reals(struct dl_exec *e, dl_real *buf, size_t n)
{
    failed(e, sum_all(e->impl->tensor_comm, NULL, buf, n, &e->err));
}

