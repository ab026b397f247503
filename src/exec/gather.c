/* gather.c: the whole network's parameters from the shards of a grid (see
 * exec.h): what checkpoints and --dump-weights write, in one process's
 * order and layouts, whatever the grid.  Rank 0 knows every rank's shard
 * (dl_shard_make is a pure function of the grid and the rank), so a rank
 * sends only its values and rank 0 puts each slice in its place.  The
 * counters (i64, host memory) travel the same way, 8 bytes a value. */
#include "exec/exec_impl.h"

#include <stdlib.h>
#include <string.h>

#include "comm/tags.h"

/* A tied parameter (share:) is its owner's: in no set of its own. */
static int in_set(const struct dl_param_desc *p, enum dl_param_set set)
{
    if (p->shares)
        return 0;
    if (set == DL_PARAMS_COUNTERS || p->dtype != DL_F32)
        return set == DL_PARAMS_COUNTERS && p->dtype == DL_I64;
    return set == DL_PARAMS_TRAINABLE ? p->trainable : !p->trainable;
}

/* Bytes of one value of set. */
static size_t value_size(enum dl_param_set set)
{
    return set == DL_PARAMS_COUNTERS ? sizeof(int64_t) : sizeof(dl_real);
}

long dl_exec_param_count(const struct dl_graph *g, enum dl_param_set set)
{
    double trainable = 0, state = 0;
    long counters = 0;
    for (int i = 0; i < g->n; i++) {
        dl_layer_param_tally(&g->layers[i], &trainable, &state);
        counters += dl_layer_counters(&g->layers[i]);
    }
    return set == DL_PARAMS_COUNTERS ? counters : (long)(set == DL_PARAMS_TRAINABLE ? trainable : state);
}

/* Where parameter j of layer i starts in the whole vector of set. */
static long whole_offset(const struct dl_graph *g, enum dl_param_set set, int i, int j)
{
    long at = 0;
    for (int k = 0; k < g->n; k++)
        for (int m = 0; m < g->layers[k].n_params && (k < i || (k == i && m < j)); m++)
            at += in_set(&g->layers[k].param[m], set) ? g->layers[k].param[m].count : 0;
    return at;
}

/* Walks the parameters of set that shard sh holds, in the order of a local
 * vector, with where each lives in the whole vector: for every whole
 * element of a held slice, copy(ctx, local index, whole index).  A copy of
 * a tied parameter (op.h's replica) is the owner's elements, copied only
 * with replicas (into a rank's vector; out of it, the owner's count). */
static long walk(const struct dl_shard *sh, enum dl_param_set set, void (*copy)(void *ctx, long local, long whole),
                 void *ctx, int replicas)
{
    const struct dl_graph *g = sh->g;
    long at_local = 0, at_whole = 0;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            const struct dl_param_desc *p = &g->layers[i].param[j];
            if (dl_shard_runs(sh, i) && j < sh->local.layers[i].n_params && sh->local.layers[i].param[j].replica) {
                const struct dl_param_desc *own = &g->layers[p->share_layer].param[p->share_param];
                long from = in_set(own, set) ? whole_offset(g, set, p->share_layer, p->share_param) : -1;
                for (long k = 0; copy && replicas && from >= 0 && k < own->count; k++) {
                    long l = dl_param_slice_index(own, &sh->layer[i].slice[j], k); /* the owner's slice */
                    if (l >= 0)
                        copy(ctx, at_local + l, from + k);
                }
                at_local += from >= 0 ? sh->local.layers[i].param[j].count : 0;
                continue;
            }
            if (!in_set(p, set))
                continue;
            if (dl_shard_runs(sh, i) && j < sh->local.layers[i].n_params) {
                for (long k = 0; copy && k < p->count; k++) {
                    long l = dl_param_slice_index(p, &sh->layer[i].slice[j], k);
                    if (l >= 0)
                        copy(ctx, at_local + l, at_whole + k);
                }
                at_local += sh->local.layers[i].param[j].count;
            }
            at_whole += p->count;
        }
    return at_local;
}

struct copy_ctx {
    const unsigned char *from;
    unsigned char *to;
    size_t size; /* bytes a value */
};

static void to_whole(void *ctx, long local, long whole)
{
    struct copy_ctx *c = ctx;
    memcpy(c->to + (size_t)whole * c->size, c->from + (size_t)local * c->size, c->size);
}

static void to_local(void *ctx, long local, long whole)
{
    struct copy_ctx *c = ctx;
    memcpy(c->to + (size_t)local * c->size, c->from + (size_t)whole * c->size, c->size);
}

int dl_exec_take(const struct dl_exec *e, enum dl_param_set set, const void *whole, void *mine,
                 struct dl_error *err)
{
    /* the counters are host memory on every device */
    const struct dl_device *dev = set == DL_PARAMS_COUNTERS ? &dl_device_host : dl_exec_device(e);
    long n = walk(e->shard, set, NULL, NULL, 0);
    size_t size = value_size(set);
    /* on a device: this executor's values in a host copy, copied back */
    void *local = dev->host_memory ? mine : dl_calloc((size_t)(n > 0 ? n : 1), size, err);
    if (!local)
        return DL_ERR_NOMEM;
    struct copy_ctx c = {whole, local, size};
    walk(e->shard, set, to_local, &c, 1);
    int rc = DL_OK;
    if (local != mine) {
        rc = dev->copy(mine, local, size * (size_t)n, DL_COPY_TO_DEVICE, err);
        free(local);
    }
    return rc;
}

/* gather with `mine` readable by the host. */
static int gather_host(const struct dl_exec *e, struct dl_comm *world, long n, enum dl_param_set set,
                       const void *mine, void *whole, struct dl_error *err)
{
    const struct dl_shard *sh = e->shard;
    const struct dl_grid_dims *d = &sh->dims;
    size_t size = value_size(set);
    int ep = dl_grid_ep(d); /* the first expert group's ranks hold every expert */
    if (d->tp * d->pp * ep == 1) { /* every rank holds the whole network: rank 0's is it */
        if (world->rank == 0)
            memcpy(whole, mine, size * (size_t)n);
        return DL_OK;
    }
    if (world->rank != 0)
        return sh->pos.d < ep ? world->ops->send(world, mine, size * (size_t)n, 0, DL_TAG_GATHER_PARAMS, err)
                              : DL_OK;
    int rc = DL_OK;
    for (int t = 0; t < d->tp && !rc; t++)
        for (int k = 0; k < d->pp * ep && !rc; k++) { /* pipeline rank k / ep, expert rank k % ep */
            int r = dl_grid_rank(d, (struct dl_grid_pos){t, k % ep, k / ep});
            struct dl_shard other;
            rc = r == 0 ? DL_OK : dl_shard_make(sh->g, d, sh->V, r, NULL, &other, err);
            if (rc)
                break;
            const struct dl_shard *theirs = r == 0 ? sh : &other;
            long count = walk(theirs, set, NULL, NULL, 0);
            void *buf = r == 0 ? (void *)mine : dl_calloc((size_t)(count ? count : 1), size, err);
            rc = buf ? DL_OK : DL_ERR_NOMEM;
            if (!rc && r != 0)
                rc = world->ops->recv(world, buf, size * (size_t)count, r, DL_TAG_GATHER_PARAMS, err);
            struct copy_ctx c = {buf, whole, size};
            if (!rc)
                walk(theirs, set, to_whole, &c, 0);
            if (r != 0) {
                free(buf);
                dl_shard_free(&other);
            }
        }
    return rc;
}

int dl_exec_gather(const struct dl_exec *e, struct dl_comm *world, enum dl_param_set set, const void *mine,
                   void *whole, struct dl_error *err)
{
    long n = walk(e->shard, set, NULL, NULL, 0), cap = 0;
    dl_real *staging = NULL; /* on a device: this executor's values copied out (the counters are the host's) */
    const void *host = set == DL_PARAMS_COUNTERS ? mine : dl_exec_host_values(e, mine, n, &staging, &cap, err);
    int rc = host ? gather_host(e, world, n, set, host, whole, err) : err->code;
    free(staging);
    return rc;
}
