/* maxpool_kernel.c: the "simd" max pooling kernel, the default for maxpool:
 * the project's vectorized loops in whichever layout the input arrives
 * (maxpool_nchw.c forward on NCHW, maxpool_blocked.c forward and backward on
 * nChw8c / nChw16c; the reference backward on NCHW, a scatter that is
 * already cheap there).  Its saved winners are the reference op's, in the
 * output's layout. */
#include "backends/cpu_simd/simd.h"

#include <stdlib.h>

#include "ops/kinds.h"

struct simd_maxpool {
    const struct dl_layer *l;
    int block; /* channels per block of the layout: 1 (NCHW), 8 or 16 */
    size_t saved;
};

static int maxpool_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                          struct dl_error *err)
{
    struct simd_maxpool *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    q->l = l;
    q->block = dl_layout_block(cfg->in[0]);
    q->saved = sizeof(float) * (size_t)cfg->mb * (size_t)dl_layout_count(cfg->out, l->out_shape);
    *inst = q;
    return DL_OK;
}

static void maxpool_destroy(void *inst)
{
    free(inst);
}

static size_t maxpool_saved(const void *inst)
{
    return ((const struct simd_maxpool *)inst)->saved;
}

static void maxpool_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_maxpool *q = inst;
    if (q->block == 1)
        dl_simd_maxpool_forward(&a->c);
    else
        dl_simd_maxpool_blocked_forward(&a->c, q->block);
}

static void maxpool_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_maxpool *q = inst;
    if (!a->c.din[0])
        return;
    if (q->block == 1)
        q->l->kind->backward(&a->c);
    else
        dl_simd_maxpool_blocked_backward(&a->c, q->block);
}

const struct dl_kernel dl_kernel_simd_maxpool = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_maxpool, .layouts = dl_kernel_follow_layouts,
    .create = maxpool_create, .destroy = maxpool_destroy, .saved_bytes = maxpool_saved,
    .forward = maxpool_forward, .backward_data = maxpool_backward,
};
