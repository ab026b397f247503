/* plan.c: static buffer placement (see plan.h).  Buffers are placed largest
 * first; each goes to the lowest offset where it fits between the buffers
 * already placed whose lifetimes intersect its own.  O(n^2 log n), which is
 * nothing next to a training step even for ResNet-50's ~1000 buffers. */
#include "plan/plan.h"

#include <stdlib.h>

static size_t round_up(size_t b)
{
    return (b + DL_PLAN_ALIGN - 1) / DL_PLAN_ALIGN * DL_PLAN_ALIGN;
}

struct order_key {
    size_t bytes;
    int first, index;
};

/* Larger first; ties by earlier start then index, so the result never
 * depends on qsort's stability. */
static int by_size(const void *pa, const void *pb)
{
    const struct order_key *x = pa, *y = pb;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int by_offset(const void *pa, const void *pb)
{
    const struct dl_plan_buf *x = *(const struct dl_plan_buf *const *)pa, *y = *(const struct dl_plan_buf *const *)pb;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int dl_plan(struct dl_plan_buf *b, int n, size_t *peak, struct dl_error *err)
{
    struct order_key *order = dl_calloc((size_t)(n > 0 ? n : 1), sizeof *order, err);
    const struct dl_plan_buf **live = dl_calloc((size_t)(n > 0 ? n : 1), sizeof *live, err);
    if (!order || !live) {
        free(order);
        free(live);
        return DL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        order[i] = (struct order_key){b[i].bytes, b[i].first, i};
    qsort(order, (size_t)n, sizeof *order, by_size);
    size_t top = 0;
    for (int oi = 0; oi < n; oi++) {
        struct dl_plan_buf *x = &b[order[oi].index];
        size_t need = round_up(x->bytes);
        x->offset = 0;
        if (!need)
            continue;
        /* Placed buffers alive at the same time, by offset. */
        int m = 0;
        for (int pj = 0; pj < oi; pj++) {
            const struct dl_plan_buf *y = &b[order[pj].index];
            if (y->bytes && y->first <= x->last && x->first <= y->last)
                live[m++] = y;
        }
        qsort(live, (size_t)m, sizeof *live, by_offset);
        /* Best fit: the smallest gap that holds it, else above everything. */
        size_t at = 0, best = (size_t)-1, best_gap = (size_t)-1;
        for (int j = 0; j < m; j++) {
            if (live[j]->offset >= at && live[j]->offset - at >= need && live[j]->offset - at < best_gap) {
                best = at;
                best_gap = live[j]->offset - at;
            }
            size_t end = live[j]->offset + round_up(live[j]->bytes);
            if (end > at)
                at = end;
        }
        x->offset = best != (size_t)-1 ? best : at;
        if (x->offset + need > top)
            top = x->offset + need;
    }
    *peak = top;
    free(order);
    free(live);
    return DL_OK;
}

size_t dl_plan_total(const struct dl_plan_buf *b, int n)
{
    size_t s = 0;
    for (int i = 0; i < n; i++)
        s += round_up(b[i].bytes);
    return s;
}
