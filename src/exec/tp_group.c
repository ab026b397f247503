/* tp_group.c: reductions of values over the tensor group (exec_impl.h's
 * dl_exec_group_*): a class-split loss's sums, maxima and best (value,
 * index) pairs, and the batch statistics of a layer on bands of rows,
 * gathered from every rank and reduced in rank order so that every rank
 * gets the same bits. */
#include "exec/exec_impl.h"

int dl_exec_group_values(const struct dl_exec *e)
{
    int most = 0;
    for (int i = e->first; i < e->end; i++) {
        long rows = (long)e->max_batch * (e->g->positions > 1 ? e->g->positions : 1);
        rows = rows < DL_SPLIT_CLASSES_ROWS ? rows : DL_SPLIT_CLASSES_ROWS;
        int n = e->shard->layer[i].split_classes ? 3 * (int)rows + 1 /* the loss's sums (correct's pairs: 2 a row) */
                : e->shard->layer[i].split_rows || e->shard->layer[i].split_batch ? 2 * e->g->layers[i].in_shape[0].c + 1 /* batch statistics */
                                                 : 0;
        most = n > most ? n : most;
    }
    return most;
}

/* Every rank's v[0..n) into m->group, [rank][n]; 0 when that failed. */
static int group_gather(struct dl_exec *e, const double *v, int n)
{
    struct dl_exec_impl *m = e->impl;
    if (e->status)
        return 0;
    if (n > m->group_cap) {
        e->status = dl_errorf(&e->err, DL_ERR_INTERNAL, "%d values to reduce over the tensor group, room for %d", n,
                              m->group_cap);
        return 0;
    }
    dl_exec_comm_status(e, m->tensor_comm->ops->allgather(m->tensor_comm, v, m->group, sizeof *v * (size_t)n, &e->err));
    return !e->status;
}

void dl_exec_group_sum(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    const double *all = e->impl->group;
    if (!group_gather(e, v, n))
        return;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int t = 0; t < e->impl->tensor_comm->size; t++)
            sum += all[(long)t * n + i];
        v[i] = sum;
    }
}

void dl_exec_group_max(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    const double *all = e->impl->group;
    if (!group_gather(e, v, n))
        return;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < e->impl->tensor_comm->size; t++)
            v[i] = all[(long)t * n + i] > v[i] ? all[(long)t * n + i] : v[i];
}

void dl_exec_group_stats_sum(void *ctx, double *v, int n)
{
    struct dl_exec *e = ctx;
    dl_exec_group_sum(ctx, v, n);
    if (e->hooks.sync_sum && !e->status)
        e->hooks.sync_sum(e->hooks.sync_ctx, v, n);
}

void dl_exec_group_best(struct dl_exec *e, double *pairs, int n)
{
    const double *all = e->impl->group;
    if (!group_gather(e, pairs, 2 * n))
        return;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < e->impl->tensor_comm->size; t++) {
            const double *p = all + (long)t * 2 * n + 2 * i;
            if (t == 0 || p[0] > pairs[2 * i]) {
                pairs[2 * i] = p[0];
                pairs[2 * i + 1] = p[1];
            }
        }
}

