/* sync.c: synchronous data parallelism: every rank's gradient, scaled by its
 * share of the global batch, is summed over the ranks in buckets that
 * overlap with backward (grad_sync.c), with stall detection (stall.c); then
 * every rank applies the same optimizer step to the same weights.  With a
 * codec, SGD's momentum and weight decay move into the gradient path
 * (momentum correction, grad_sync.h) and the optimizer takes plain steps.
 * On a GPU, the buckets are summed over NCCL in device memory when the
 * build has it (compiled only: never run on a GPU so far).  With --zero 1
 * (zero.h) the gradient is reduce-scattered after backward instead, each
 * rank updates its block of the weights and the blocks are allgathered;
 * with --zero 2 (zero_grads.h) backward's buckets are summed into their
 * owners' blocks as they are finished, and no rank holds the whole
 * gradient; with --zero 3 (zero_weights.h) no rank holds the whole
 * weights either: the updated blocks are not allgathered, each layer's
 * weights are gathered when the executor runs it. */
#include "parallel/strategy.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "io/trace.h"
#include "parallel/grad_sync.h"
#include "parallel/stall.h"
#include "parallel/zero.h"
#include "parallel/zero_grads.h"
#include "parallel/zero_weights.h"

struct sync_impl {
    struct dl_grad_sync *gs;
    struct dl_comm *device_comm; /* the buckets' communicator of device buffers, or NULL */
    struct dl_stall *stall;
    int global_batch; /* of the step in progress */
    int local_batch;
    int corrected;    /* momentum correction: the optimizer steps without momentum */
    int zero;         /* ZeRO stage 1 or 2: gs is NULL; the block's gradient sums go to block */
    struct dl_zero_shard shard;
    dl_real *block;   /* [shard.block] (stage 1) */
    dl_real *staging; /* [shard.ranks x chunk]: the pieces of one collective (zero.h's dl_zero_chunk) */
    long chunk;
    enum dl_dtype wire; /* stage 1's sums on the wire: f32, or bf16 (--grad-dtype) */
    struct dl_zero_grads *grads; /* stages 2 and 3 */
    struct dl_zero_weights *weights; /* stage 3 (also s->zero_weights) */
};

static int sync_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err)
{
    struct sync_impl *im = s->impl;
    im->global_batch = global_batch;
    im->local_batch = local_batch;
    if (im->grads)
        dl_zero_grads_begin(im->grads, (double)local_batch / (double)global_batch);
    else if (!im->zero)
        dl_grad_sync_begin(im->gs, (double)local_batch / (double)global_batch);
    return DL_OK;
}

/* ZeRO's update of this rank's block from the sums of its gradient: the
 * block clipped by the whole model's norm (its ranks' squares summed, then
 * the grid's), updated, and the blocks allgathered into every rank's
 * weights; *comm gets the allgather's seconds added. */
static int zero_update(struct dl_strategy *s, double lr, const struct dl_step_metrics *m, dl_real *block, double *comm,
                       struct dl_error *err)
{
    struct sync_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    const struct dl_zero_shard *sh = &im->shard;
    struct dl_comm *c = s->comm;
    size_t bytes = dl_dtype_value_size(DL_F32) * (size_t)sh->block;
    int rc = DL_OK;
    double sq = 0, f = 1;
    if (s->clip_norm > 0 || s->guard) {
        dl_exec_grad_sq_range(e, block, sh->lo, sh->lo + sh->n, &sq);
        rc = dl_comm_sum_small(c, &sq, 1, err); /* the blocks' squares, then the grid's */
    }
    if (!rc)
        rc = dl_strategy_judge(s, sq, m, &f, err);
    if (rc || s->skipped) /* a skipped update: every rank's weights as they were */
        return rc;
    for (long i = 0; f < 1 && i < sh->n; i++)
        block[i] *= (dl_real)f;
    double t_update = dl_trace_now(e->trace);
    if (!rc && sh->n)
        rc = dl_optim_step(s->optim, lr, e->weights + sh->lo, block);
    if (im->weights) /* stage 3: what was gathered ahead is stale */
        dl_zero_weights_updated(im->weights);
    if (dl_trace_on(e->trace))
        dl_trace_span(e->trace, DL_TRACE_OPTIMIZER, "optimizer", t_update);
    if (!rc && !im->weights) { /* the weights padded to the ranks' blocks: the last one's tail is zero */
        memcpy(block, e->weights + sh->lo, bytes);
        double t1 = dl_clock_now();
        rc = dl_zero_allgather(c, sh, block, e->weights, im->chunk, im->staging, err);
        *comm += dl_clock_now() - t1;
    }
    return rc;
}

/* ZeRO stage 1's step: this rank's share of the batch scaled in, the
 * gradient reduce-scattered into its block, which is updated; stage 2's:
 * the block's sums as backward left them. */
static int zero_finish(struct dl_strategy *s, double lr, const struct dl_step_metrics *m, struct dl_step_stats *st,
                       struct dl_error *err)
{
    struct sync_impl *im = s->impl;
    struct dl_exec *e = s->exec;
    const struct dl_zero_shard *sh = &im->shard;
    struct dl_comm *c = s->comm;
    size_t bytes = dl_dtype_value_size(DL_F32) * (size_t)sh->block, D1 = (size_t)(c->size - 1);
    size_t summed = bytes * D1 + dl_dtype_size(im->wire) * (size_t)sh->block * D1; /* the allgather's, the sums' */
    dl_real *block = im->block;
    double comm = 0, hidden = 0, t0 = dl_clock_now();
    int rc = DL_OK;
    if (im->grads) { /* summed during backward, between its layers (the compute thread's time) */
        rc = dl_zero_grads_end(im->grads, &block, &comm, &summed, err);
        summed += bytes * (size_t)(c->size - 1);
        if (im->weights) { /* stage 3: forward's and backward's gathers instead of the allgather */
            double gathers, waited;
            size_t sent;
            dl_zero_weights_take_stats(im->weights, &gathers, &waited, &sent);
            hidden = gathers - waited;
            comm += gathers;
            summed = summed - bytes * D1 + sent;
        }
    } else {
        rc = dl_exec_grad_scale(e, (double)im->local_batch / im->global_batch, err);
        if (!rc && s->before_update)
            rc = s->before_update(s->update_ctx, err);
        if (!rc)
            rc = dl_zero_reduce_scatter(c, sh, e->dweights, block, im->chunk, im->staging, im->wire, err);
        comm = dl_clock_now() - t0;
    }
    if (!rc)
        rc = zero_update(s, lr, m, block, &comm, err);
    st->comm_seconds = comm;
    st->exposed_seconds = comm - hidden; /* none hidden but stage 3's gathers ahead */
    st->bytes_sent = st->dense_bytes = summed;
    return rc;
}

static int sync_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                       struct dl_step_stats *st, struct dl_error *err)
{
    struct sync_impl *im = s->impl;
    if (im->zero) {
        int rc = dl_stall_arrive(im->stall, step, err);
        if (!rc)
            rc = dl_strategy_sum_metrics(s, m, im->global_batch, err);
        return rc ? rc : zero_finish(s, lr, m, st, err);
    }
    double summed[DL_STEP_METRICS];
    dl_step_metrics_pack(m, summed);
    int rc = dl_stall_arrive(im->stall, step, err);
    struct dl_grad_sync_stats gst = {0};
    if (!rc)
        rc = dl_grad_sync_end(im->gs, summed, DL_STEP_METRICS, dl_stall_poll, im->stall, &gst, err);
    if (rc)
        return rc;
    dl_step_metrics_unpack(summed, m);
    m->samples = im->global_batch;
    st->comm_seconds = gst.comm_seconds;
    st->exposed_seconds = gst.exposed_seconds;
    st->bytes_sent = gst.bytes_sent;
    st->dense_bytes = gst.dense_bytes;
    if (im->corrected) {
        /* The summed buckets already are the momentum step: apply them as they
         * are.  The optimizer's momentum buffer stays zero. */
        struct dl_optim_spec keep = s->optim->spec;
        s->optim->spec.momentum = 0;
        s->optim->spec.weight_decay = 0;
        s->optim->spec.nesterov = 0;
        rc = dl_strategy_optim_step(s, lr, m, err);
        s->optim->spec = keep;
        return rc;
    }
    return dl_strategy_optim_step(s, lr, m, err);
}

static int sync_end(struct dl_strategy *s, struct dl_error *err)
{
    struct sync_impl *im = s->impl;
    return dl_stall_finish(im->stall, err);
}

static void sync_destroy(struct dl_strategy *s)
{
    struct sync_impl *im = s->impl;
    if (!im)
        return;
    dl_grad_sync_free(im->gs);
    dl_zero_grads_free(im->grads);
    dl_zero_weights_free(im->weights);
    s->zero_weights = NULL;
    free(im->block);
    free(im->staging);
    dl_comm_close(im->device_comm);
    dl_stall_free(im->stall);
    free(im);
}

static int sync_create(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                       struct dl_error *err)
{
    struct sync_impl *im = dl_calloc(1, sizeof *im, err);
    if (!im)
        return DL_ERR_NOMEM;
    s->impl = im;
    struct dl_grad_sync_opts go = {.algorithm = po->allreduce, .codec = po->codec, .grad_dtype = po->grad_dtype,
                                   .bucket_bytes = po->bucket_bytes, .overlap = po->overlap, .seed = seed,
                                   .expert_replicas = po->expert_replicas};
    const struct dl_optim_spec *os = &s->optim->spec;
    im->corrected = po->codec.ops && os->kind == DL_OPTIM_SGD && os->momentum > 0;
    if (im->corrected) {
        go.momentum = os->momentum;
        go.weight_decay = os->weight_decay;
        go.nesterov = os->nesterov;
    }
    /* On a device without host memory with a communicator of its own
     * memory in this build (NCCL), uncompressed buckets summed by the
     * backend's allreduce stay on the device; else they are staged. */
    const struct dl_device *dev = dl_exec_device(s->exec);
    int rc = DL_OK;
    if (!dev->host_memory && dev->comm && dl_comm_available(dev->comm) && s->comm->size > 1 && !po->codec.ops &&
        po->grad_dtype == DL_F32 &&
        (!po->allreduce || !strcmp(po->allreduce, "auto") || !strcmp(po->allreduce, "native")))
        rc = dl_comm_open_over(dev->comm, s->comm, &im->device_comm, err);
    go.device_comm = im->device_comm;
    im->zero = po->zero && s->comm->size > 1;
    if (im->zero) { /* the collectives over blocks a chunk at a time */
        dl_zero_shard_of(s->exec->n_weights, s->comm->size, s->comm->rank, &im->shard);
        im->chunk = dl_zero_chunk(&im->shard, po->bucket_bytes);
        im->wire = po->grad_dtype;
        long staging = dl_zero_staging(&im->shard, po->bucket_bytes, im->wire);
        if (!(im->staging = dl_calloc((size_t)(staging > 0 ? staging : 1), sizeof *im->staging, err)))
            rc = DL_ERR_NOMEM;
    }
    if (!rc && im->zero && po->zero == 3)
        rc = dl_zero_weights_create(s->comm, s->exec, &im->shard, &im->weights, err);
    s->zero_weights = im->weights;
    if (!rc && im->zero && po->zero >= 2) {
        rc = dl_zero_grads_create(s->comm, s->exec, &im->shard, po->bucket_bytes, &im->grads, err);
        if (!rc)
            s->grad_values = dl_zero_grad_values(&im->shard, s->exec->n_weights, 2,
                                                 dl_zero_grads_arena(im->grads), po->bucket_bytes, im->wire);
    } else if (!rc && im->zero) {
        if (!(im->block = dl_calloc((size_t)(im->shard.block ? im->shard.block : 1), sizeof *im->block, err)))
            rc = DL_ERR_NOMEM;
        s->grad_values = dl_zero_grad_values(&im->shard, s->exec->n_weights, 1, 0, po->bucket_bytes, im->wire);
    } else if (!rc) {
        rc = dl_grad_sync_create(s->comm, s->exec, &go, &im->gs, err);
    }
    if (!rc)
        rc = dl_stall_create(s->comm, po->stall_warning_s, po->stall_timeout_s, s->warn, s->warn_ctx, &im->stall,
                             err);
    if (rc)
        sync_destroy(s);
    return rc;
}

const struct dl_strategy_ops dl_strategy_sync = {
    .supports_zero = 1, .supports_grid = 1, .supports_no_decay = 1, .supports_clip_grad_norm = 1, .supports_step_guard = 1,
    .supports_tied_across_ranks = 1,
    .name = "sync", .layout = dl_layout_data_parallel, .create = sync_create, .begin = sync_begin,
    .finish = sync_finish, .end = sync_end, .destroy = sync_destroy};
