/* tp_split_choice.c: the fc pairs whose tensor-parallel splits the
 * planner chooses (see tp_split_choice.h). */
#include "planner/tp_split_choice.h"

static int is_free_fc(const struct dl_layer *l)
{
    return l->kind->tp.tp_pairs && l->split == DL_SPLIT_AUTO;
}

/* The one layer reading layer i's output (-1: none or several). */
static int only_reader(const struct dl_graph *g, int i)
{
    int reader = -1;
    for (int j = i + 1; j < g->n; j++)
        for (int k = 0; k < g->layers[j].n_in; k++)
            if (g->layers[j].in[k] == i) {
                if (reader >= 0 && reader != j)
                    return -1;
                reader = j;
            }
    return reader;
}

int dl_split_pairs(const struct dl_graph *g, int *first, int *second)
{
    int n = 0;
    for (int i = 0; i < g->n && n < DL_PLAN_MAX_PAIRS; i++) {
        if (!is_free_fc(&g->layers[i]))
            continue;
        int j = only_reader(g, i);
        while (j >= 0 && !is_free_fc(&g->layers[j]) && g->layers[j].kind->tp.channel_local && g->layers[j].n_in == 1 &&
               g->layers[j].n_params == 0)
            j = only_reader(g, j);
        if (j < 0 || !is_free_fc(&g->layers[j]) || g->layers[j].n_in != 1)
            continue;
        first[n] = i;
        second[n++] = j;
        i = j; /* the second is not a first */
    }
    return n;
}

static int is_free_conv(const struct dl_layer *l)
{
    return l->kind->tp.tp_by_samples && l->split == DL_SPLIT_AUTO;
}

int dl_split_has_sample_choice(const struct dl_graph *g)
{
    int conv = 0, fc = 0;
    for (int i = 0; i < g->n; i++) {
        conv |= is_free_conv(&g->layers[i]);
        fc |= g->layers[i].kind->tp.tp_pairs;
    }
    return conv && fc;
}

void dl_split_by_samples(struct dl_graph *g)
{
    for (int i = 0; i < g->n; i++)
        if (is_free_conv(&g->layers[i]))
            g->layers[i].split = DL_SPLIT_BATCH;
}

int dl_split_choice_layers(const int *first, const int *second, int n_pairs, unsigned mask, int *whole)
{
    int n = 0;
    for (int k = 0; k < n_pairs; k++)
        if (mask & (1u << k)) {
            whole[n++] = first[k];
            whole[n++] = second[k];
        }
    return n;
}
