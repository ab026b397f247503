/* buckets.c: gradient buckets over the flat weight vector (buckets.h). */
#include "parallel/buckets.h"

#include <stdlib.h>

static int push(struct dl_bucket_range **b, int *n, int *cap, long lo, long hi, int per_expert,
                struct dl_error *err)
{
    if (*n == *cap) {
        int grown = *cap ? 2 * *cap : 16;
        struct dl_bucket_range *nb = realloc(*b, sizeof *nb * (size_t)grown);
        if (!nb)
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
        *b = nb;
        *cap = grown;
    }
    (*b)[(*n)++] = (struct dl_bucket_range){lo, hi, per_expert};
    return DL_OK;
}

/* The lowest index at or above which layer l's weights below top are all
 * per-expert or all not (*per_expert says which): the start of the layer's
 * topmost run of either. */
static long run_below(const struct dl_exec *e, int l, long top, int *per_expert)
{
    const struct dl_layer *L = &e->g->layers[l];
    long lo = e->flat.weight_begin[l];
    int kind = -1;
    for (int j = L->n_params - 1; j >= 0; j--) {
        long at = e->flat.weight_index[e->flat.param_first[l] + j];
        if (at < 0 || L->param[j].shares || at >= top)
            continue;
        if (kind >= 0 && L->param[j].per_expert != kind)
            return *per_expert = kind, at + L->param[j].count;
        kind = L->param[j].per_expert;
    }
    *per_expert = kind > 0;
    return lo;
}

int dl_buckets_cut(const struct dl_exec *e, long per, int whole_layers, struct dl_bucket_range **out, int *n,
                   struct dl_error *err)
{
    *out = NULL;
    *n = 0;
    if (per < 1)
        per = 1;
    /* Walk the layers backwards, growing the open bucket [lo, hi) one run
     * of a layer's weights at a time (the whole layer unless it holds
     * per-expert weights and others); close it before it would overflow or
     * mix the two, and cut a run larger than a bucket into bucket-sized
     * pieces (unless whole_layers). */
    long hi = e->n_weights, lo = e->n_weights;
    int rc = DL_OK, cap = 0, open_kind = 0;
    for (int l = e->g->n - 1; l >= 0 && !rc; l--) {
        while (!rc && e->flat.weight_begin[l] < lo) {
            int kind;
            long wl = run_below(e, l, lo, &kind);
            if ((hi - wl > per || kind != open_kind) && lo < hi) {
                rc = push(out, n, &cap, lo, hi, open_kind, err);
                hi = lo;
            }
            open_kind = kind;
            lo = wl;
            while (!rc && !whole_layers && hi - lo > per) {
                rc = push(out, n, &cap, hi - per, hi, kind, err);
                hi -= per;
            }
        }
    }
    if (!rc && lo < hi)
        rc = push(out, n, &cap, lo, hi, open_kind, err);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
