/* buckets.c: gradient buckets over the flat weight vector (buckets.h). */
#include "parallel/buckets.h"

#include <stdlib.h>

static int push(struct dl_bucket_range **b, int *n, int *cap, long lo, long hi, struct dl_error *err)
{
    if (*n == *cap) {
        int grown = *cap ? 2 * *cap : 16;
        struct dl_bucket_range *nb = realloc(*b, sizeof *nb * (size_t)grown);
        if (!nb)
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
        *b = nb;
        *cap = grown;
    }
    (*b)[(*n)++] = (struct dl_bucket_range){lo, hi};
    return DL_OK;
}

int dl_buckets_cut(const struct dl_exec *e, long per, int whole_layers, struct dl_bucket_range **out, int *n,
                   struct dl_error *err)
{
    *out = NULL;
    *n = 0;
    if (per < 1)
        per = 1;
    /* Walk the layers backwards, growing the open bucket [lo, hi) one
     * layer's weights at a time; close it before it would overflow, and cut a
     * layer larger than a bucket into bucket-sized pieces (unless whole_layers). */
    long hi = e->n_weights, lo = e->n_weights;
    int rc = DL_OK, cap = 0;
    for (int l = e->g->n - 1; l >= 0 && !rc; l--) {
        long wl = e->flat.weight_begin[l];
        if (wl == lo)
            continue; /* no weights */
        if (hi - wl > per && lo < hi) {
            rc = push(out, n, &cap, lo, hi, err);
            hi = lo;
        }
        lo = wl;
        while (!rc && !whole_layers && hi - lo > per) {
            rc = push(out, n, &cap, hi - per, hi, err);
            hi -= per;
        }
    }
    if (!rc && lo < hi)
        rc = push(out, n, &cap, lo, hi, err);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
