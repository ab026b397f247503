/* zero_weights.c: ZeRO stage 3's weights, gathered a layer at a time and
 * released after use (see zero_weights.h). */
#include "parallel/zero_weights.h"

#include <stdlib.h>

#include "core/clock.h"
#include "core/pages.h"

struct zrange {
    long lo, hi; /* weights [lo, hi) */
};

struct dl_zero_weights {
    struct dl_comm *comm;
    struct dl_zero_shard shard;
    struct dl_exec **execs; /* whose hooks it set */
    int n_execs;
    dl_real *weights;
    long padded;            /* the vector's values: the ranks' blocks */
    struct zrange *ranges;  /* every layer's, sorted and merged within a layer */
    int *first;             /* [layer + 1]: layer i's ranges are [first[i], first[i + 1]) */
    int layers;
    int holding;            /* hold_all's: every weight is here */
    long largest;
    double seconds;
    size_t bytes;
};

static int by_lo(const void *a, const void *b)
{
    const struct zrange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Layer i's parameters' ranges of the flat weights (a tied parameter: its
 * owner's), sorted and merged, written at out (room for its n_params);
 * their count. */
static int layer_ranges(const struct dl_exec *e, int i, struct zrange *out)
{
    const struct dl_layer *l = &e->g->layers[i];
    int n = 0;
    for (int j = 0; e->flat.param_first && j < l->n_params; j++) {
        long at = e->flat.weight_index[e->flat.param_first[i] + j];
        if (at >= 0 && l->param[j].count > 0)
            out[n++] = (struct zrange){at, at + l->param[j].count};
    }
    qsort(out, (size_t)n, sizeof *out, by_lo);
    int m = 0;
    for (int k = 0; k < n; k++)
        if (m && out[k].lo <= out[m - 1].hi)
            out[m - 1].hi = out[k].hi > out[m - 1].hi ? out[k].hi : out[m - 1].hi;
        else
            out[m++] = out[k];
    return m;
}

static long values_of(const struct zrange *r, int n)
{
    long v = 0;
    for (int k = 0; k < n; k++)
        v += r[k].hi - r[k].lo;
    return v;
}

long dl_zero_weights_largest_of(const struct dl_exec *e)
{
    long most = 0;
    for (int i = 0; i < e->g->n; i++) {
        struct zrange r[e->g->layers[i].n_params > 0 ? e->g->layers[i].n_params : 1];
        long v = values_of(r, layer_ranges(e, i, r));
        most = v > most ? v : most;
    }
    return most;
}

long dl_zero_weights_largest(const struct dl_zero_weights *z)
{
    return z->largest;
}

/* The pages wholly inside weights [lo, hi) that hold none of this rank's
 * block handed back. */
static void release(struct dl_zero_weights *z, long lo, long hi)
{
    size_t v = sizeof *z->weights;
    dl_pages_release(z->weights, v * (size_t)lo, v * (size_t)hi, v * (size_t)z->shard.lo,
                     v * (size_t)(z->shard.lo + z->shard.block));
}

/* Weights [lo, hi) from their owners: each rank whose block meets the
 * range broadcasts its part. */
static int gather(struct dl_zero_weights *z, long lo, long hi, struct dl_error *err)
{
    const struct dl_zero_shard *sh = &z->shard;
    int rc = DL_OK;
    for (int r = (int)(lo / sh->block); !rc && r < sh->ranks && (long)r * sh->block < hi; r++) {
        long a = (long)r * sh->block > lo ? (long)r * sh->block : lo;
        long b = (long)(r + 1) * sh->block < hi ? (long)(r + 1) * sh->block : hi;
        size_t bytes = sizeof *z->weights * (size_t)(b - a);
        if (b <= a)
            continue;
        rc = z->comm->ops->bcast(z->comm, z->weights + a, bytes, r, err);
        if (r == sh->rank)
            z->bytes += bytes * (size_t)(sh->ranks - 1);
    }
    return rc;
}

static int on_layer(void *ctx, int layer, int use, struct dl_error *err)
{
    struct dl_zero_weights *z = ctx;
    if (layer < 0 || layer >= z->layers || z->holding)
        return DL_OK;
    double t0 = use ? dl_clock_now() : 0;
    int rc = DL_OK;
    for (int k = z->first[layer]; !rc && k < z->first[layer + 1]; k++)
        if (use)
            rc = gather(z, z->ranges[k].lo, z->ranges[k].hi, err);
        else
            release(z, z->ranges[k].lo, z->ranges[k].hi);
    if (use)
        z->seconds += dl_clock_now() - t0;
    return rc;
}

int dl_zero_weights_hold_all(struct dl_zero_weights *z, int all, struct dl_error *err)
{
    z->holding = all;
    if (!all) {
        release(z, 0, z->padded);
        return DL_OK;
    }
    double t0 = dl_clock_now();
    int rc = gather(z, 0, z->padded, err);
    z->seconds += dl_clock_now() - t0;
    return rc;
}

void dl_zero_weights_take_stats(struct dl_zero_weights *z, double *seconds, size_t *bytes)
{
    *seconds = z->seconds;
    *bytes = z->bytes;
    z->seconds = 0;
    z->bytes = 0;
}

int dl_zero_weights_create(struct dl_comm *c, struct dl_exec *e, const struct dl_zero_shard *sh,
                           struct dl_zero_weights **out, struct dl_error *err)
{
    struct dl_zero_weights *z = dl_calloc(1, sizeof *z, err);
    int params = 0;
    for (int i = 0; i < e->g->n; i++)
        params += e->g->layers[i].n_params;
    if (z) {
        z->ranges = dl_calloc((size_t)(params > 0 ? params : 1), sizeof *z->ranges, err);
        z->first = dl_calloc((size_t)e->g->n + 1, sizeof *z->first, err);
    }
    if (!z || !z->ranges || !z->first) {
        dl_zero_weights_free(z);
        return DL_ERR_NOMEM;
    }
    *z = (struct dl_zero_weights){.comm = c, .shard = *sh, .weights = e->weights, .padded = sh->block * sh->ranks,
                                  .ranges = z->ranges, .first = z->first, .layers = e->g->n};
    for (int i = 0; i < e->g->n; i++) {
        int m = layer_ranges(e, i, z->ranges + z->first[i]);
        z->first[i + 1] = z->first[i] + m;
        long v = values_of(z->ranges + z->first[i], m);
        z->largest = v > z->largest ? v : z->largest;
    }
    int rc = dl_zero_weights_attach(z, e, err);
    if (rc) {
        dl_zero_weights_free(z);
        return rc;
    }
    release(z, 0, z->padded);
    *out = z;
    return DL_OK;
}

int dl_zero_weights_attach(struct dl_zero_weights *z, struct dl_exec *e, struct dl_error *err)
{
    if (e->weights != z->weights)
        return dl_errorf(err, DL_ERR_INTERNAL, "ZeRO stage 3: an executor with weights of its own");
    struct dl_exec **more = realloc(z->execs, sizeof *more * (size_t)(z->n_execs + 1));
    if (!more)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    z->execs = more;
    z->execs[z->n_execs++] = e;
    e->hooks.weights_hook = on_layer, e->hooks.weights_ctx = z;
    return DL_OK;
}

void dl_zero_weights_free(struct dl_zero_weights *z)
{
    if (!z)
        return;
    for (int k = 0; z->execs && k < z->n_execs; k++)
        if (z->execs[k]->hooks.weights_ctx == z)
            z->execs[k]->hooks.weights_hook = NULL, z->execs[k]->hooks.weights_ctx = NULL;
    free(z->ranges);
    free(z->first);
    free(z->execs);
    free(z);
}
