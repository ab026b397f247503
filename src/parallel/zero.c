/* zero.c: ZeRO stage 1's blocks and its checkpoints' whole state (see
 * zero.h; the step itself is sync.c's). */
#include "parallel/zero.h"

#include <stdlib.h>
#include <string.h>

void dl_zero_shard_of(long n_weights, int ranks, int rank, struct dl_zero_shard *out)
{
    long block = (n_weights + ranks - 1) / (ranks > 0 ? ranks : 1);
    long lo = block * rank, n = n_weights - lo;
    *out = (struct dl_zero_shard){.lo = lo, .n = n < 0 ? 0 : n < block ? n : block, .block = block, .ranks = ranks,
                                  .rank = rank};
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
