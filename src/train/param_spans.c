/* param_spans.c: the runs of a rank's weight vector its parameters occupy
 * (see param_spans.h). */
#include "train/param_spans.h"

#include <stdlib.h>
#include <string.h>

/* The rows of parameter p of layer i when it is a hidden layer's weight
 * matrix (two dimensions or more: the first is the rows), which Muon
 * orthogonalises; 0 for a vector, an embedding table and the layer whose
 * output the loss reads (struct dl_optim_span's rows). */
static long matrix_rows(const struct dl_graph *g, int i, const struct dl_layer *own, const struct dl_param_desc *p)
{
    const char *kind = own->kind->name;
    int head = g->loss >= 0 && g->layers[g->loss].n_in > 0 && g->layers[g->loss].in[0] == i;
    if (p->ndim < 2 || head || !strcmp(kind, "embedding") || !strcmp(kind, "position_embedding"))
        return 0;
    return p->dims[0];
}

int dl_param_spans(struct dl_exec *const *e, int n, const dl_real *weights, dl_param_pick pick, unsigned kinds,
                   struct dl_optim_span **spans, int *n_spans, long *count, struct dl_error *err)
{
    int cap = 0, m = 0;
    struct dl_optim_span *s = NULL;
    long total = 0;
    for (int x = 0; x < n; x++) {
        const struct dl_graph *g = e[x]->g;
        for (int i = e[x]->first; i < e[x]->end; i++) {
            const struct dl_layer *l = &g->layers[i];
            for (int j = 0; j < l->n_params; j++) {
                const struct dl_param_desc *p = &l->param[j];
                /* a copy of a tied parameter (op.h's replica) as its owner */
                const struct dl_layer *own = p->replica ? &g->layers[p->share_layer] : l;
                if (!p->trainable || (p->shares && !p->replica) || !e[x]->param[i][j] ||
                    (pick && !pick(own, p->replica ? p->share_param : j, kinds)))
                    continue;
                if (m == cap) {
                    cap = cap ? 2 * cap : 64;
                    struct dl_optim_span *grown = realloc(s, sizeof *s * (size_t)cap);
                    if (!grown) {
                        free(s);
                        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
                    }
                    s = grown;
                }
                long at = e[x]->param[i][j] - weights;
                s[m++] = (struct dl_optim_span){.begin = at, .end = at + p->count,
                                                .rows = matrix_rows(g, i, own, p)};
                total += p->count;
            }
        }
    }
    *spans = s;
    *n_spans = m;
    if (count)
        *count = total;
    return DL_OK;
}

int dl_param_spans_apply(struct dl_exec *const *e, int n, const dl_real *weights, struct dl_optim *o, int *tensors,
                         struct dl_error *err)
{
    if (tensors)
        *tensors = 0;
    if (!o->algo->tensor_step)
        return DL_OK;
    struct dl_optim_span *s;
    int m, rc = dl_param_spans(e, n, weights, NULL, 0, &s, &m, NULL, err);
    if (!rc)
        rc = dl_optim_set_tensors(o, s, m, err);
    free(s);
    if (!rc && tensors)
        *tensors = o->n_tensors;
    return rc;
}
