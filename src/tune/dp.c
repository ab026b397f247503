/* dp.c: mu-cuDNN's dynamic program over micro-batch splits.  T(b), the
 * fastest way to run b samples, is either one kernel call on b samples or
 * the best split b = b' + (b - b') into two independently optimal halves;
 * the parts run one after another in one shared workspace, so a split needs
 * the largest of its parts' workspaces.  O(B^2) per layer-direction. */
#include "tune/tune_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int usable(const struct dl_tune_cand *c, int B, size_t limit)
{
    return c->mb >= 1 && c->mb <= B && c->time_s >= 0 && !isnan(c->time_s) && c->ws <= limit;
}

static int add_part(struct dl_tune_config *out, int kernel, int mb, int count)
{
    for (int i = 0; i < out->n; i++)
        if (out->part[i].kernel == kernel && out->part[i].mb == mb) {
            out->part[i].count += count;
            return 0;
        }
    if (out->n == DL_TUNE_MAX_PARTS)
        return -1;
    out->part[out->n].kernel = kernel;
    out->part[out->n].mb = mb;
    out->part[out->n++].count = count;
    return 0;
}

static int part_before(const struct dl_tune_config *c, int a, int b)
{
    return c->part[a].mb > c->part[b].mb || (c->part[a].mb == c->part[b].mb && c->part[a].kernel < c->part[b].kernel);
}

/* Walks the split tree of B (iteratively: B can be large), then orders the
 * runs: largest micro-batches first, then by kernel. */
static int collect(const struct dl_tune_cand *c, const int *best, const int *split, int B, struct dl_tune_config *out)
{
    int *stack = malloc(sizeof *stack * (size_t)(B + 1)), top = 0;
    if (!stack)
        return -1;
    stack[top++] = B;
    int rc = 0;
    while (top > 0 && !rc) {
        int b = stack[--top];
        if (split[b] == 0) {
            rc = add_part(out, c[best[b]].kernel, b, 1);
        } else {
            stack[top++] = split[b];
            stack[top++] = b - split[b];
        }
    }
    free(stack);
    for (int i = 1; i < out->n; i++)
        for (int j = i; j > 0 && part_before(out, j, j - 1); j--) {
            int k = out->part[j].kernel, mb = out->part[j].mb, n = out->part[j].count;
            out->part[j] = out->part[j - 1];
            out->part[j - 1].kernel = k, out->part[j - 1].mb = mb, out->part[j - 1].count = n;
        }
    return rc;
}

int dl_tune_dp(const struct dl_tune_cand *c, int n, int B, size_t limit, struct dl_tune_config *out)
{
    memset(out, 0, sizeof *out);
    if (B < 1)
        return -1;
    int *best = malloc(sizeof *best * (size_t)(B + 1)), *split = malloc(sizeof *split * (size_t)(B + 1));
    double *T = malloc(sizeof *T * (size_t)(B + 1));
    size_t *W = malloc(sizeof *W * (size_t)(B + 1));
    int rc = -1;
    if (!best || !split || !T || !W)
        goto done;
    for (int b = 0; b <= B; b++) {
        best[b] = -1;
        split[b] = 0;
        T[b] = INFINITY;
        W[b] = 0;
    }
    for (int i = 0; i < n; i++) {
        if (!usable(&c[i], B, limit))
            continue;
        int *bi = &best[c[i].mb];
        if (*bi < 0 || c[i].time_s < c[*bi].time_s || (c[i].time_s == c[*bi].time_s && c[i].ws < c[*bi].ws))
            *bi = i;
    }
    for (int b = 1; b <= B; b++) {
        if (best[b] >= 0) {
            T[b] = c[best[b]].time_s;
            W[b] = c[best[b]].ws;
        }
        for (int h = 1; h <= b / 2; h++) {
            double t = T[h] + T[b - h];
            size_t w = W[h] > W[b - h] ? W[h] : W[b - h];
            if (t < T[b] || (t == T[b] && isfinite(t) && w < W[b])) { /* ties keep the single call */
                T[b] = t;
                W[b] = w;
                split[b] = h;
            }
        }
    }
    if (isfinite(T[B]) && collect(c, best, split, B, out) == 0) {
        out->time_s = T[B];
        out->ws = W[B];
        rc = 0;
    }
done:
    free(best), free(split), free(T), free(W);
    return rc;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

int dl_tune_desirable(const struct dl_tune_cand *c, int n, int B, struct dl_tune_config *out)
{
    size_t *ws = malloc(sizeof *ws * (size_t)(n > 0 ? n : 1));
    if (!ws)
        return 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (usable(&c[i], B, SIZE_MAX))
            ws[m++] = c[i].ws;
    qsort(ws, (size_t)m, sizeof *ws, cmp_size);
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (i > 0 && ws[i] == ws[i - 1])
            continue;
        if (dl_tune_dp(c, n, B, ws[i], &out[k]) == 0)
            k++;
    }
    free(ws);
    return dl_tune_pareto(out, k);
}
