/* reference.c: the reference kernel, which runs any op kind through its
 * plain-C forward and backward from src/ops/ (NCHW only).  It is the ground
 * truth the fast kernels are tested against and the fallback for every layer
 * no fast kernel supports.  The op computes input and weight gradients in one
 * pass, so backward_weights is NULL (see kernel.h). */
#include "backends/reference/reference.h"

#include <stdlib.h>

struct ref_inst {
    const struct dl_layer *l;
    int mb;
};

static int ref_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                      struct dl_error *err)
{
    struct ref_inst *r = dl_calloc(1, sizeof *r, err);
    if (!r)
        return DL_ERR_NOMEM;
    r->l = l;
    r->mb = cfg->mb;
    *inst = r;
    return DL_OK;
}

static void ref_destroy(void *inst)
{
    free(inst);
}

static size_t ref_saved_bytes(const void *inst)
{
    const struct ref_inst *r = inst;
    const struct dl_layer *l = r->l;
    long n = l->kind->saved_size ? l->kind->saved_size(l->attr, r->mb, l->in_shape, l->out_shape) : 0;
    return (size_t)n * dl_dtype_value_size(DL_F32);
}

static void ref_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct ref_inst *r = inst;
    r->l->kind->forward(&a->c);
}

static void ref_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct ref_inst *r = inst;
    r->l->kind->backward(&a->c);
}

const struct dl_kernel dl_kernel_reference = {
    .name = "reference",
    .backend = "reference",
    .op = NULL,
    .sync_stats = 1, /* the ops' reference code sums batch statistics through sync_sum */
    .doc_mask = 1,   /* the ops' reference code reads doc_start */
    .backward_reads = DL_READS_AS_OP,
    .create = ref_create,
    .destroy = ref_destroy,
    .saved_bytes = ref_saved_bytes,
    .forward = ref_forward,
    .backward_data = ref_backward,
};
