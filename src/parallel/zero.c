/* zero.c: ZeRO stage 1's blocks and its checkpoints' whole state (see
 * zero.h; the step itself is sync.c's). */
#include "parallel/zero.h"

#include "core/bf16.h"
#include "parallel/grad_sync.h"

#include <stdlib.h>
#include <string.h>

void dl_zero_shard_of(long n_weights, int ranks, int rank, struct dl_zero_shard *out)
{
    long block = (n_weights + ranks - 1) / (ranks > 0 ? ranks : 1);
    long lo = block * rank, n = n_weights - lo;
    *out = (struct dl_zero_shard){.lo = lo, .n = n < 0 ? 0 : n < block ? n : block, .block = block, .ranks = ranks,
                                  .rank = rank};
}

long dl_zero_chunk(const struct dl_zero_shard *sh, size_t bucket_bytes)
{
    long per = (long)((bucket_bytes ? bucket_bytes : DL_GRAD_SYNC_BUCKET_BYTES) / dl_dtype_value_size(DL_F32));
    long chunk = per / (sh->ranks > 0 ? sh->ranks : 1);
    if (chunk > sh->block)
        chunk = sh->block;
    return chunk > 0 ? chunk : 1;
}

long dl_zero_staging(const struct dl_zero_shard *sh, size_t bucket_bytes, enum dl_dtype wire)
{
    long chunk = dl_zero_chunk(sh, bucket_bytes);
    return chunk < sh->block || wire != DL_F32 ? chunk * sh->ranks : 0;
}

long dl_zero_grad_values(const struct dl_zero_shard *sh, long n_weights, int stage, long arena, size_t bucket_bytes,
                         enum dl_dtype wire)
{
    return (stage >= 2 ? arena : n_weights) + sh->block + dl_zero_staging(sh, bucket_bytes, wire);
}

long dl_zero_held_weights(const struct dl_zero_shard *sh, long n_weights, int stage, long gathered)
{
    return stage == 3 && sh->ranks > 1 ? sh->block + gathered : n_weights;
}

int dl_zero_allgather(struct dl_comm *c, const struct dl_zero_shard *sh, const dl_real *block, dl_real *weights,
                      long chunk, dl_real *staging, struct dl_error *err)
{
    if (chunk >= sh->block) /* one piece: the ranks' blocks as the weights hold them */
        return c->ops->allgather(c, block, weights, sizeof *block * (size_t)sh->block, err);
    int rc = DL_OK;
    for (long at = 0; !rc && at < sh->block; at += chunk) {
        long n = sh->block - at < chunk ? sh->block - at : chunk;
        rc = c->ops->allgather(c, block + at, staging, sizeof *staging * (size_t)n, err);
        for (int r = 0; !rc && r < sh->ranks; r++)
            memcpy(weights + (long)r * sh->block + at, staging + (long)r * n, sizeof *staging * (size_t)n);
    }
    return rc;
}

int dl_zero_reduce_scatter(struct dl_comm *c, const struct dl_zero_shard *sh, const dl_real *grad, dl_real *block,
                           long chunk, dl_real *staging, enum dl_dtype wire, struct dl_error *err)
{
    if (chunk >= sh->block && wire == DL_F32) /* one piece: the gradient as it is */
        return c->ops->reduce_scatter(c, grad, block, DL_F32, (size_t)sh->block, err);
    int rc = DL_OK;
    for (long at = 0; !rc && at < sh->block; at += chunk) {
        long n = sh->block - at < chunk ? sh->block - at : chunk;
        if (wire == DL_F32) {
            for (int r = 0; r < sh->ranks; r++)
                memcpy(staging + (long)r * n, grad + (long)r * sh->block + at, sizeof *staging * (size_t)n);
            rc = c->ops->reduce_scatter(c, staging, block + at, DL_F32, (size_t)n, err);
            continue;
        }
        /* bf16: the ranks' pieces rounded into the staging's first half, the sums into its tail */
        dl_bf16 *send = (dl_bf16 *)(void *)staging, *sums = send + (long)sh->ranks * n;
        for (int r = 0; r < sh->ranks; r++)
            for (long i = 0; i < n; i++)
                send[(long)r * n + i] = dl_f32_to_bf16(grad[(long)r * sh->block + at + i]);
        rc = c->ops->reduce_scatter(c, send, sums, DL_BF16, (size_t)n, err);
        for (long i = 0; !rc && i < n; i++)
            block[at + i] = dl_bf16_to_f32(sums[i]);
    }
    return rc;
}

int dl_zero_gather_state(struct dl_comm *c, const struct dl_zero_shard *sh, const struct dl_optim *o,
                         struct dl_optim *whole, struct dl_error *err)
{
    int slots = o->algo->state_vectors;
    long B = sh->block, n = whole->n;
    dl_real *mine = dl_calloc((size_t)(B ? B : 1), sizeof *mine, err);
    long total = B * sh->ranks;
    dl_real *all = dl_calloc((size_t)(total > 0 ? total : 1), sizeof *all, err);
    int rc = mine && all ? DL_OK : DL_ERR_NOMEM;
    for (int k = 0; k < slots && !rc; k++) {
        memcpy(mine, o->state + k * o->n, sizeof *mine * (size_t)sh->n); /* the rest of the block stays zero */
        rc = c->ops->allgather(c, mine, all, sizeof *mine * (size_t)B, err);
        if (!rc)
            memcpy(whole->state + k * n, all, sizeof *all * (size_t)n);
    }
    whole->t = o->t;
    free(mine);
    free(all);
    return rc;
}

void dl_zero_take_state(const struct dl_zero_shard *sh, const struct dl_optim *whole, struct dl_optim *o)
{
    for (int k = 0; k < o->algo->state_vectors; k++)
        memcpy(o->state + k * o->n, whole->state + k * whole->n + sh->lo, sizeof *o->state * (size_t)sh->n);
    o->t = whole->t;
}
