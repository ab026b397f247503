/* ps_shards.c: the layout, the shards, the final gather and the slowest
 * worker of the strategies with server ranks (see ps_shards.h). */
#include "parallel/ps_shards.h"

#include "comm/allreduce.h"

int dl_ps_servers(const struct dl_parallel_opts *po, int size)
{
    int k = po->ps_servers > 0 ? po->ps_servers : 1;
    if (k > size - 1)
        k = size - 1;
    return k < 1 ? 1 : k;
}

void dl_ps_shard(long n, int servers, int s, long *lo, long *hi)
{
    *lo = (long)dl_block_lo((size_t)n, servers, s);
    *hi = (long)dl_block_lo((size_t)n, servers, s + 1);
}

void dl_ps_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out)
{
    int servers = dl_ps_servers(po, size);
    out->role = rank < servers ? DL_ROLE_SERVER : DL_ROLE_WORKER;
    out->data_ranks = size - servers;
    out->data_rank = rank < servers ? 0 : rank - servers;
    out->eval = DL_EVAL_RANK0_FINAL;
    out->checkpoint_writer = -1;
}

int dl_ps_gather_final(struct dl_comm *c, struct dl_exec *e, int servers, struct dl_error *err)
{
    int rc = DL_OK;
    if (c->rank == 0) {
        for (int s = 1; s < servers && !rc; s++) {
            long lo, hi;
            dl_ps_shard(e->n_weights, servers, s, &lo, &hi);
            rc = c->ops->recv(c, e->weights + lo, sizeof *e->weights * (size_t)(hi - lo), s, DL_TAG_PS_FINAL, err);
        }
        if (!rc && e->n_state)
            rc = c->ops->recv(c, e->state, sizeof *e->state * (size_t)e->n_state, servers, DL_TAG_PS_FINAL, err);
    } else if (c->rank < servers) {
        long lo, hi;
        dl_ps_shard(e->n_weights, servers, c->rank, &lo, &hi);
        rc = c->ops->send(c, e->weights + lo, sizeof *e->weights * (size_t)(hi - lo), 0, DL_TAG_PS_FINAL, err);
    } else if (c->rank == servers && e->n_state) {
        rc = c->ops->send(c, e->state, sizeof *e->state * (size_t)e->n_state, 0, DL_TAG_PS_FINAL, err);
    }
    return rc;
}

long dl_ps_slowest(const struct dl_ps_worker_slot *w, int n)
{
    long least = -1;
    for (int i = 0; i < n; i++)
        if (!w[i].finished && (least < 0 || w[i].clock < least))
            least = w[i].clock;
    return least;
}
