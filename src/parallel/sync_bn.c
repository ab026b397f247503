/* sync_bn.c: cross-rank sums for synchronised batch normalisation (see
 * sync_bn.h). */
#include "parallel/sync_bn.h"

#include <stdlib.h>
#include <string.h>

struct dl_sync_bn {
    struct dl_comm *comm;     /* split from the world, same ranks */
    double *all;              /* size x n received values */
    int cap;
    int failed;
    struct dl_error err;
};

int dl_sync_bn_create(struct dl_comm *world, struct dl_sync_bn **out, struct dl_error *err)
{
    struct dl_sync_bn *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    int rc = world->ops->split(world, 0, world->rank, &s->comm, err);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return DL_OK;
}

void dl_sync_bn_free(struct dl_sync_bn *s)
{
    if (!s)
        return;
    dl_comm_close(s->comm);
    free(s->all);
    free(s);
}

void dl_sync_bn_sum(void *ctx, double *v, int n)
{
    struct dl_sync_bn *s = ctx;
    int p = s->comm->size;
    if (s->failed || p == 1)
        return;
    if (n * p > s->cap) { /* grows to the widest layer once, then stays */
        double *a = realloc(s->all, sizeof *a * (size_t)n * (size_t)p);
        if (!a) {
            s->failed = dl_errorf(&s->err, DL_ERR_NOMEM, "out of memory for synchronised batch norm");
            return;
        }
        s->all = a;
        s->cap = n * p;
    }
    int rc = s->comm->ops->allgather(s->comm, v, s->all, sizeof *v * (size_t)n, &s->err);
    if (rc) {
        s->failed = rc;
        return;
    }
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < p; r++)
            sum += s->all[(size_t)r * (size_t)n + (size_t)i];
        v[i] = sum;
    }
}

int dl_sync_bn_status(const struct dl_sync_bn *s, struct dl_error *err)
{
    if (s && s->failed && err)
        *err = s->err;
    return s ? s->failed : DL_OK;
}
