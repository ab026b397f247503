/* grad_norm.c: this rank's part of the whole model's gradient norm, and
 * the gradient's scaling (gradient-norm clipping, parallel/strategy.c).  A
 * rank holds its stages' layers, and of a layer split over the tensor ranks
 * its slice: summing the squares over the tensor and pipeline groups gives
 * the whole model's, provided a weight kept whole on every tensor rank (a
 * layer norm's, an unsplit layer's) is counted on tensor rank 0 only.  With
 * expert ranks the same holds of the expert group: each holds its own
 * experts, and the weights every one of them holds are counted on the
 * group's first rank only. */
#include "exec/exec_impl.h"

#include <stdlib.h>

int dl_exec_grad_sq(const struct dl_exec *e, double *sq, struct dl_error *err)
{
    *sq = 0;
    dl_real *buf = NULL;
    long cap = 0;
    const dl_real *g = e->n_weights ? dl_exec_host_values(e, e->dweights, e->n_weights, &buf, &cap, err) : NULL;
    if (e->n_weights && !g)
        return err->code;
    dl_exec_grad_sq_range(e, g, 0, e->n_weights, sq);
    free(buf);
    return DL_OK;
}

void dl_exec_grad_sq_range(const struct dl_exec *e, const dl_real *g, long lo, long hi, double *sq)
{
    const struct dl_graph *l = e->g;
    double sum = 0;
    for (int i = 0; i < l->n; i++) {
        if (!dl_shard_runs(e->shard, i))
            continue;
        for (int j = 0; j < l->layers[i].n_params; j++) {
            const struct dl_param_desc *p = &l->layers[i].param[j];
            if (!p->trainable || p->shares || !e->dparam[i][j])
                continue;
            if (e->shard->layer[i].slice[j].dim < 0 && e->shard->pos.t != 0) /* whole here and on rank 0 */
                continue;
            if (!p->per_expert && e->shard->pos.d % dl_grid_ep(&e->shard->dims) != 0) /* and on expert rank 0 */
                continue;
            long at = e->flat.weight_index[e->flat.param_first[i] + j], from = at > lo ? at : lo,
                 to = at + p->count < hi ? at + p->count : hi;
            double part = 0;
            #pragma omp parallel for reduction(+ : part) schedule(static) if (to - from > (1L << 16))
            for (long k = from; k < to; k++)
                part += (double)g[k - lo] * (double)g[k - lo];
            sum += part;
        }
    }
    *sq = sum;
}

int dl_exec_grad_scale(struct dl_exec *e, double f, struct dl_error *err)
{
    if (e->n_weights == 0)
        return DL_OK;
    const struct dl_device *dev = dl_exec_device(e);
    return dev->scale(e->dweights, e->n_weights, (dl_real)f, DL_F32, err);
}
