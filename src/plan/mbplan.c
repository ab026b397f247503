/* mbplan.c: the micro-batch plan's small helpers (see mbplan.h): allocation,
 * appending runs of micro-batches, text for reports and the workspace total. */
#include "plan/mbplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_mbplan_alloc(struct dl_mbplan *p, int n_layers, int batch, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    p->layer = dl_calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *p->layer, err);
    if (!p->layer)
        return DL_ERR_NOMEM;
    p->n_layers = n_layers;
    p->batch = batch;
    return DL_OK;
}

void dl_mbplan_free(struct dl_mbplan *p)
{
    free(p->layer);
    memset(p, 0, sizeof *p);
}

int dl_mbplan_dir_samples(const struct dl_mbplan_dir *d)
{
    int s = 0;
    for (int i = 0; i < d->n; i++)
        s += d->part[i].mb * d->part[i].count;
    return s;
}

int dl_mbplan_dir_add(struct dl_mbplan_dir *d, const struct dl_kernel *k, int mb, int count, struct dl_error *err)
{
    if (count <= 0)
        return DL_OK;
    if (d->n > 0 && d->part[d->n - 1].kernel == k && d->part[d->n - 1].mb == mb) {
        d->part[d->n - 1].count += count;
        return DL_OK;
    }
    if (d->n == DL_MBPLAN_MAX_GROUPS)
        return dl_errorf(err, DL_ERR_INTERNAL, "micro-batch plan: more than %d runs in one direction",
                         DL_MBPLAN_MAX_GROUPS);
    d->part[d->n++] = (struct dl_mbpart){k, mb, count};
    return DL_OK;
}

void dl_mbplan_dir_str(const struct dl_mbplan_dir *d, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < d->n && len < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%s %dx%d", i ? " + " : "", d->part[i].kernel->name,
                         d->part[i].mb, d->part[i].count);
        len += w > 0 ? (size_t)w : 0;
    }
    if (d->n == 0)
        snprintf(buf, size, "-");
}

int dl_mbplan_dir_same(const struct dl_mbplan_dir *a, const struct dl_mbplan_dir *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->part[i].kernel != b->part[i].kernel || a->part[i].mb != b->part[i].mb ||
            a->part[i].count != b->part[i].count)
            return 0;
    return 1;
}

void dl_mbplan_finish(struct dl_mbplan *p)
{
    p->workspace_bytes = 0;
    for (int i = 0; i < p->n_layers; i++)
        for (int d = 0; d < DL_N_DIRS; d++) {
            const struct dl_mbplan_dir *x = &p->layer[i].dir[d];
            if (p->layer[i].tuned && x->n && x->ws_offset + x->ws_bytes > p->workspace_bytes)
                p->workspace_bytes = x->ws_offset + x->ws_bytes;
        }
}
