/* zero_grads.c: ZeRO stage 2's bucketed gradient reductions (see
 * zero_grads.h). */
#include "parallel/zero_grads.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "parallel/buckets.h"
#include "parallel/grad_sync.h"

struct zbucket {
    long lo, hi;     /* weights [lo, hi) */
    int open, close; /* backward's layer order (0: the last layer's): the first and last layer writing it */
    long at;         /* its place in the arena */
};

struct dl_zero_grads {
    struct dl_comm *comm;
    struct dl_exec *exec;
    struct dl_zero_shard shard;
    struct zbucket *b; /* the last weights first */
    int n;
    dl_real *arena;
    long arena_n;
    dl_real *block; /* [shard.block] */
    long piece;     /* the most values one reduce sums (a bucket's) */
    double scale;
    int next;           /* buckets [0, next) summed in this backward */
    int last_layer;     /* the last hook's layer (they fall within a backward) */
    int status;
    struct dl_error err;
    double comm_seconds;
    size_t bytes;
};

/* Where backward writes: every bucket's first and last writer in backward
 * order (a layer writes its own weights' gradients and those of the tied
 * parameters it shares). */
static void writers(const struct dl_exec *e, struct zbucket *b, int n)
{
    const struct dl_graph *g = e->g;
    for (int k = 0; k < n; k++)
        b[k].open = INT_MAX, b[k].close = -1;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            long at = e->flat.weight_index[e->flat.param_first[i] + j], end = at + g->layers[i].param[j].count;
            int t = g->n - 1 - i;
            for (int k = 0; at >= 0 && k < n; k++)
                if (b[k].lo < end && at < b[k].hi) {
                    if (t < b[k].open)
                        b[k].open = t;
                    if (t > b[k].close)
                        b[k].close = t;
                }
        }
}

/* First fit: each bucket at the lowest place clear of every earlier one
 * whose writing overlaps its own in time; the arena's size. */
static long place(struct zbucket *all, int n)
{
    long arena = 0;
    for (int k = 0; k < n; k++) {
        struct zbucket *b = &all[k];
        long size = b->hi - b->lo;
        b->at = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int q = 0; q < k; q++) {
                const struct zbucket *o = &all[q];
                int together = o->open <= b->close && b->open <= o->close;
                if (together && o->at < b->at + size && b->at < o->at + (o->hi - o->lo)) {
                    b->at = o->at + (o->hi - o->lo);
                    moved = 1;
                }
            }
        }
        if (b->at + size > arena)
            arena = b->at + size;
    }
    return arena;
}

/* e's buckets (*b, *n), placed: the arena's size in *arena. */
static int make_buckets(const struct dl_exec *e, size_t bucket_bytes, struct zbucket **b, int *n, long *arena,
                        struct dl_error *err)
{
    long per = (long)((bucket_bytes ? bucket_bytes : DL_GRAD_SYNC_BUCKET_BYTES) / dl_dtype_value_size(DL_F32));
    struct dl_bucket_range *r = NULL;
    *b = NULL;
    int rc = dl_buckets_cut(e, per, 1, &r, n, err);
    if (!rc && !(*b = dl_calloc((size_t)*n + 1, sizeof **b, err)))
        rc = DL_ERR_NOMEM;
    for (int k = 0; !rc && k < *n; k++)
        (*b)[k] = (struct zbucket){.lo = r[k].lo, .hi = r[k].hi};
    free(r);
    if (!rc) {
        writers(e, *b, *n);
        *arena = place(*b, *n);
    }
    return rc;
}

int dl_zero_grads_plan_arena(const struct dl_exec *e, size_t bucket_bytes, long *arena, struct dl_error *err)
{
    struct zbucket *b = NULL;
    int n = 0;
    int rc = make_buckets(e, bucket_bytes, &b, &n, arena, err);
    free(b);
    return rc;
}

int dl_zero_grads_create(struct dl_comm *c, struct dl_exec *e, const struct dl_zero_shard *sh, size_t bucket_bytes,
                         struct dl_zero_grads **out, struct dl_error *err)
{
    *out = NULL;
    if (e->dweights)
        return dl_errorf(err, DL_ERR_INTERNAL, "ZeRO stage 2: an executor with a gradient vector");
    struct dl_zero_grads *z = dl_calloc(1, sizeof *z, err);
    if (!z)
        return DL_ERR_NOMEM;
    z->comm = c;
    z->exec = e;
    z->shard = *sh;
    z->piece = (long)((bucket_bytes ? bucket_bytes : DL_GRAD_SYNC_BUCKET_BYTES) / dl_dtype_value_size(DL_F32));
    z->piece = z->piece > 0 ? z->piece : 1;
    int rc = make_buckets(e, bucket_bytes, &z->b, &z->n, &z->arena_n, err);
    if (!rc) {
        z->arena = dl_calloc((size_t)(z->arena_n > 0 ? z->arena_n : 1), sizeof *z->arena, err);
        z->block = dl_calloc((size_t)(sh->block > 0 ? sh->block : 1), sizeof *z->block, err);
        rc = z->arena && z->block ? DL_OK : DL_ERR_NOMEM;
    }
    for (int k = 0; !rc && k < z->n; k++)
        dl_exec_grads_at(e, z->b[k].lo, z->b[k].hi, z->arena + z->b[k].at);
    if (rc) {
        dl_zero_grads_free(z);
        return rc;
    }
    *out = z;
    return DL_OK;
}

void dl_zero_grads_free(struct dl_zero_grads *z)
{
    if (!z)
        return;
    if (z->exec->hooks.grad_hook_ctx == z)
        z->exec->hooks.grad_hook = NULL, z->exec->hooks.grad_hook_ctx = NULL;
    free(z->b);
    free(z->arena);
    free(z->block);
    free(z);
}

/* Bucket k scaled, each rank's part of it summed into that rank and added
 * to its block, then zeroed for the buckets after it. */
static int sum_bucket(struct dl_zero_grads *z, int k, struct dl_error *err)
{
    const struct zbucket *b = &z->b[k];
    const struct dl_zero_shard *sh = &z->shard;
    dl_real *g = z->arena + b->at;
    long n = b->hi - b->lo;
    int rc = DL_OK, D = sh->ranks;
    double t0 = dl_clock_now();
    if (z->scale != 1.0)
        for (long i = 0; i < n; i++)
            g[i] = (dl_real)(g[i] * z->scale);
    for (int r = 0; r < D && !rc; r++) {
        long from = b->lo > r * sh->block ? b->lo : r * sh->block;
        long to = b->hi < (r + 1) * sh->block ? b->hi : (r + 1) * sh->block;
        if (from >= to)
            continue;
        for (long at = from; !rc && at < to; at += z->piece) /* a layer larger than a bucket: in pieces */
            rc = z->comm->ops->reduce(z->comm, g + (at - b->lo), DL_F32,
                                      (size_t)(to - at < z->piece ? to - at : z->piece), r, err);
        z->bytes += dl_dtype_value_size(DL_F32) * (size_t)(to - from) * (size_t)(D - 1) / (size_t)D;
        if (!rc && r == sh->rank)
            for (long i = from; i < to; i++)
                z->block[i - sh->lo] += g[i - b->lo];
    }
    memset(g, 0, sizeof *g * (size_t)n);
    z->comm_seconds += dl_clock_now() - t0;
    return rc;
}

/* Sums the buckets [next, ...) that backward has finished: those whose
 * weights begin at or above `boundary`. */
static void sum_ready(struct dl_zero_grads *z, long boundary)
{
    while (!z->status && z->next < z->n && z->b[z->next].lo >= boundary) {
        int rc = sum_bucket(z, z->next++, &z->err);
        if (rc)
            z->status = rc;
    }
}

static void on_layer_done(void *ctx, int layer)
{
    struct dl_zero_grads *z = ctx;
    if (layer >= z->last_layer) { /* another backward (a pipeline chunk's): the last one's rest first */
        sum_ready(z, 0);
        z->next = 0;
    }
    z->last_layer = layer;
    sum_ready(z, z->exec->flat.weight_begin[layer]);
}

void dl_zero_grads_begin(struct dl_zero_grads *z, double scale)
{
    z->scale = scale;
    z->next = 0;
    z->last_layer = INT_MAX;
    z->status = DL_OK;
    z->comm_seconds = 0;
    z->bytes = 0;
    memset(z->arena, 0, sizeof *z->arena * (size_t)(z->arena_n > 0 ? z->arena_n : 1));
    memset(z->block, 0, sizeof *z->block * (size_t)(z->shard.block > 0 ? z->shard.block : 1));
    z->exec->hooks.grad_hook = on_layer_done;
    z->exec->hooks.grad_hook_ctx = z;
}

int dl_zero_grads_end(struct dl_zero_grads *z, dl_real **block, double *comm_seconds, size_t *bytes,
                      struct dl_error *err)
{
    sum_ready(z, 0); /* layers without weights may not have reached the last buckets */
    z->exec->hooks.grad_hook = NULL;
    z->exec->hooks.grad_hook_ctx = NULL;
    *block = z->block;
    *comm_seconds = z->comm_seconds;
    *bytes = z->bytes;
    if (z->status && err)
        *err = z->err;
    return z->status;
}

long dl_zero_grads_arena(const struct dl_zero_grads *z)
{
    return z->arena_n;
}
