/* random_batch.c: random inputs in the graph input's dtype and labels
 * (random_batch.h). */
#include "graph/random_batch.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/real.h"
#include "core/rng.h"
#include "core/target_bits.h"

int dl_graph_random_batch(const struct dl_graph *g, int n, void **x, int **y, struct dl_error *err)
{
    long count = (long)n * dl_shape_count(g->input), labels = (long)n * g->positions;
    *x = malloc(dl_dtype_value_size(g->input.dtype) * (size_t)(count > 0 ? count : 1));
    *y = malloc(sizeof **y * (size_t)(labels > 0 ? labels : 1));
    if (!*x || !*y) {
        free(*x), free(*y);
        *x = NULL, *y = NULL;
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory (a batch of %d random samples)", n);
    }
    struct dl_rng r;
    dl_rng_seed(&r, 1);
    int32_t *ids = *x;   /* an i32 input */
    dl_real *values = *x; /* an f32 one */
    for (long i = 0; i < count; i++) {
        if (g->input.dtype == DL_I32) /* token ids below the vocabulary */
            ids[i] = (int32_t)dl_rng_below(&r, (uint64_t)g->id_limit);
        else
            values[i] = (dl_real)dl_rng_normal(&r);
    }
    for (long k = 0; k < labels; k++) /* class ids, or a regression loss's standard normal targets */
        (*y)[k] = g->float_targets ? dl_target_bits((float)dl_rng_normal(&r)) : (int)dl_rng_below(&r, (uint64_t)g->classes);
    return DL_OK;
}
