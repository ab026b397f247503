/* stages.c: pipeline stages (see stages.h): the cut of the network into
 * P*V stages, from `stage:` keys or balanced by dynamic programming. */
#include "plan/stages.h"

#include <math.h>
#include <stdlib.h>

double dl_stages_layer_cost(const struct dl_layer *l)
{
    return 3.0 * l->flops + 3.0 * (double)dl_shape_count(l->out_shape);
}

int dl_stages_of(const struct dl_stages *s, int i)
{
    int st = 0;
    while (st + 1 < s->S && i >= s->first[st + 1])
        st++;
    return st;
}

void dl_stages_free(struct dl_stages *s)
{
    free(s->first);
    free(s->cost);
    s->first = NULL;
    s->cost = NULL;
}

/* The cuts the `stage:` keys ask for; 0 when there are none. */
static int cuts_from_file(const struct dl_graph *g, int P, int *first, struct dl_error *err)
{
    int any = 0, cur = 0, last = g->n - 1; /* the loss follows the layer before it */
    for (int i = 0; i < last; i++)
        any |= g->layers[i].stage >= 0;
    if (!any)
        return 0;
    first[0] = 0;
    for (int i = 0; i < last; i++) {
        const struct dl_layer *l = &g->layers[i];
        if (l->stage < 0 || l->stage == cur)
            continue;
        if (l->stage >= P)
            return -dl_errorf(err, DL_ERR_SPEC, "layer '%s': stage %d, but the pipeline has %d stages (0 to %d)",
                              l->name, l->stage, P, P - 1);
        if (l->stage < cur)
            return -dl_errorf(err, DL_ERR_SPEC, "layer '%s': stage %d after a layer of stage %d: stages must follow "
                              "the topological order (see dltrain check)", l->name, l->stage, cur);
        if (i == 0 || l->stage > cur + 1)
            return -dl_errorf(err, DL_ERR_SPEC, "layer '%s' begins stage %d, so stage %d has no layers", l->name,
                              l->stage, i == 0 ? 0 : cur + 1);
        cur = l->stage;
        first[cur] = i;
    }
    if (cur != P - 1)
        return -dl_errorf(err, DL_ERR_SPEC, "the stage keys end at stage %d, but the pipeline has %d stages: stage %d "
                          "has no layers", cur, P, cur + 1);
    return 1;
}

/* Linear partition of cost[0..n) into P non-empty runs minimising the
 * largest sum: best[k][i] = min over j of max(best[k-1][j], sum(j..i)). */
static int balance(const double *cost, int n, int P, int *first, struct dl_error *err)
{
    double *prefix = calloc((size_t)n + 1, sizeof *prefix), *best = calloc((size_t)(P + 1) * (size_t)(n + 1), sizeof *best);
    int *cut = calloc((size_t)(P + 1) * (size_t)(n + 1), sizeof *cut);
    if (!prefix || !best || !cut) {
        free(prefix), free(best), free(cut);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory cutting pipeline stages");
    }
#define B(k, i) best[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
#define C(k, i) cut[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
    for (int i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + cost[i];
    for (int i = 0; i <= n; i++)
        B(1, i) = prefix[i];
    for (int k = 2; k <= P; k++)
        for (int i = k; i <= n; i++) { /* the first i layers in k stages: the last stage is j..i-1 */
            B(k, i) = INFINITY;
            for (int j = k - 1; j < i; j++) {
                double v = fmax(B(k - 1, j), prefix[i] - prefix[j]);
                if (v < B(k, i)) { /* ties keep the earliest cut */
                    B(k, i) = v;
                    C(k, i) = j;
                }
            }
        }
    first[P] = n;
    for (int k = P, i = n; k >= 2; k--) {
        i = C(k, i);
        first[k - 1] = i;
    }
    first[0] = 0;
#undef B
#undef C
    free(prefix), free(best), free(cut);
    return DL_OK;
}

int dl_stages_cut(const struct dl_graph *g, int ranks, int V, const double *cost, struct dl_stages *out,
                  struct dl_error *err)
{
    long S = (long)ranks * V;
    *out = (struct dl_stages){.S = (int)S, .V = V};
    int layers = g->n - 1; /* the loss goes with the last stage */
    if (ranks < 1 || V < 1 || S > layers) {
        if (V > 1)
            return dl_errorf(err, DL_ERR_SPEC, "%d pipeline ranks x %d virtual stages (interleaved:%d) = %ld stages, "
                             "but the network has %d layers before its loss: at most %d stages (V <= %d)", ranks, V,
                             V, S, layers, layers, ranks > 0 ? layers / ranks : 0);
        return dl_errorf(err, DL_ERR_SPEC, "%ld pipeline stages, but the network has %d layers before its loss: "
                         "at most %d stages", S, layers, layers);
    }
    out->first = calloc((size_t)S + 1, sizeof *out->first);
    out->cost = calloc((size_t)S, sizeof *out->cost);
    double *c = calloc((size_t)g->n, sizeof *c);
    int rc = !out->first || !out->cost || !c ? dl_errorf(err, DL_ERR_NOMEM, "out of memory cutting pipeline stages")
                                             : DL_OK;
    for (int i = 0; !rc && i < g->n; i++)
        c[i] = cost ? cost[i] : dl_stages_layer_cost(&g->layers[i]);
    if (!rc) {
        c[layers - 1] += c[layers]; /* the loss is cut together with the layer before it */
        int f = cuts_from_file(g, (int)S, out->first, err);
        if (f < 0)
            rc = -f;
        else if (f > 0)
            out->from_file = 1;
        else
            rc = balance(c, layers, (int)S, out->first, err);
        out->first[S] = g->n;
    }
    for (int i = 0; !rc && i < layers; i++)
        out->cost[dl_stages_of(out, i)] += c[i];
    free(c);
    if (rc)
        dl_stages_free(out);
    return rc;
}
