/* maxpool_kernel.c: the "simd" max pooling kernel, the default for maxpool:
 * the project's vectorized loops in whichever layout the input arrives
 * (maxpool_nchw.c forward on NCHW, maxpool_blocked.c forward and backward on
 * nChw8c / nChw16c; the reference backward on NCHW, a scatter that is
 * already cheap there).  Its saved winners are the reference op's, in the
 * output's layout.  With a fused ReLU (kernel.h) it clamps its output and
 * masks the incoming gradient by it in the workspace (relu_fold.c). */
#include "backends/cpu_simd/simd.h"

#include <stdlib.h>
#include <string.h>

#include "ops/kinds.h"

struct simd_maxpool {
    const struct dl_layer *l;
    int block; /* channels per block of the layout: 1 (NCHW), 8 or 16 */
    int relu;  /* a fused ReLU */
    struct dl_pool_geom g; /* the windows, read through attr.h */
    long out_count; /* values per sample of the output, in its layout */
    size_t saved;
};

static int maxpool_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                          struct dl_error *err)
{
    struct simd_maxpool *q = dl_calloc(1, sizeof *q, err);
    if (!q)
        return DL_ERR_NOMEM;
    q->l = l;
    dl_maxpool_geom(l, &q->g);
    q->block = dl_layout_block(cfg->in[0]);
    q->relu = cfg->relu;
    q->out_count = dl_layout_count(cfg->out, l->out_shape);
    q->saved = dl_dtype_size(DL_F32) * (size_t)cfg->mb * (size_t)q->out_count;
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

/* A fused ReLU's masked output gradient: as large as the saved winners. */
static size_t maxpool_ws(const void *inst, enum dl_dir dir)
{
    const struct simd_maxpool *q = inst;
    return q->relu && dir == DL_DIR_BACKWARD_DATA ? q->saved : 0;
}

static void maxpool_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_maxpool *q = inst;
    if (q->block == 1)
        dl_simd_maxpool_forward(&a->c, &q->g);
    else
        dl_simd_maxpool_blocked_forward(&a->c, &q->g, q->block);
    if (!q->relu)
        return;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < a->c.batch; n++)
        dl_simd_relu_inplace(dl_tensor_f32(&a->c.out) + (long)n * q->out_count, q->out_count);
}

static void maxpool_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_maxpool *q = inst;
    if (!a->c.din[0].data)
        return;
    struct dl_op_call c = a->c;
    if (q->relu) {
        float *masked = a->workspace;
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < c.batch; n++) {
            long at = (long)n * q->out_count;
            dl_simd_relu_mask(masked + at, dl_tensor_const_f32(&c.dout) + at, dl_tensor_f32(&c.out) + at, q->out_count);
        }
        c.dout.data = masked;
    }
    if (q->block == 1)
        q->l->kind->backward(&c);
    else
        dl_simd_maxpool_blocked_backward(&c, &q->g, q->block);
}

const struct dl_kernel dl_kernel_simd_maxpool = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_maxpool, .fuses_relu = 1,
    .layouts = dl_kernel_follow_layouts, .create = maxpool_create, .destroy = maxpool_destroy,
    .workspace_bytes = maxpool_ws, .saved_bytes = maxpool_saved,
    .forward = maxpool_forward, .backward_data = maxpool_backward,
};
