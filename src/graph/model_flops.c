/* model_flops.c: a language model's FLOPs per token (see model_flops.h). */
#include "graph/model_flops.h"

double dl_graph_model_flops_per_token(const struct dl_graph *g)
{
    double T = g->input.h, per_token = 0;
    if (g->id_limit <= 0 || T < 1)
        return 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        if (l->kind->autocast_bf16 || l->kind->weight_products) /* products with weights: forward, both gradients */
            per_token += 3 * l->flops / T;
        else if (l->kind->kv_cache) /* attention: q k^T and the weights times v, the whole window */
            per_token += 12 * T * l->out_shape.c;
    }
    return per_token;
}
