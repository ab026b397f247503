/* no_decay.c: the weights weight decay leaves out (see no_decay.h). */
#include "train/no_decay.h"

#include <stdlib.h>
#include <string.h>

int dl_no_decay_applies(const struct dl_layer *l, int j, unsigned kinds)
{
    if ((kinds & DL_NO_DECAY_BIAS) && strcmp(l->param[j].name, "bias") == 0)
        return 1;
    if ((kinds & DL_NO_DECAY_NORM) && l->kind->is_norm)
        return 1;
    return (kinds & DL_NO_DECAY_EMBEDDING) && l->kind->is_embedding;
}

int dl_no_decay_apply(struct dl_exec *const *e, int n, const dl_real *weights, unsigned kinds, struct dl_optim *o,
                      long *count, struct dl_error *err)
{
    int cap = 0, m = 0, rc = DL_OK;
    struct dl_optim_span *s = NULL;
    long total = 0;
    for (int x = 0; kinds && x < n && !rc; x++) {
        const struct dl_graph *g = e[x]->g;
        for (int i = e[x]->first; i < e[x]->end && !rc; i++) {
            const struct dl_layer *l = &g->layers[i];
            for (int j = 0; j < l->n_params && !rc; j++) {
                const struct dl_param_desc *p = &l->param[j];
                /* a copy of a tied parameter (op.h's replica) as its owner */
                const struct dl_layer *own = p->replica ? &g->layers[p->share_layer] : l;
                if (!p->trainable || (p->shares && !p->replica) || !e[x]->param[i][j] ||
                    !dl_no_decay_applies(own, p->replica ? p->share_param : j, kinds))
                    continue;
                if (m == cap) {
                    cap = cap ? 2 * cap : 64;
                    struct dl_optim_span *grown = realloc(s, sizeof *s * (size_t)cap);
                    if (!grown) {
                        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
                        break;
                    }
                    s = grown;
                }
                long at = e[x]->param[i][j] - weights;
                s[m++] = (struct dl_optim_span){at, at + p->count};
                total += p->count;
            }
        }
    }
    if (!rc)
        rc = dl_optim_set_no_decay(o, s, m, err);
    free(s);
    if (count)
        *count = total;
    return rc;
}
