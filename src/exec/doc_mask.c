/* doc_mask.c: document masking in the executor (exec.h's doc_mask): the
 * set-up's refusals, and each forward's document starts, found in its
 * token ids and handed to every call (op.h's doc_start).  A document ends
 * with the separator id, which belongs to it (Megatron-LM's convention:
 * the model still learns to predict the separator, and the position after
 * it starts the next document); a window's first position starts one.
 * The labels across a boundary are the data path's business
 * (data/token_windows.h). */
#include "exec/exec_impl.h"

#include <stdint.h>
#include <string.h>

/* A --kernel choice that puts a kernel without doc_mask on layer l, whose
 * kind reads the document starts: DL_ERR_SPEC naming both. */
static int refuse_choice(const struct dl_layer *l, const struct dl_kernel_choices *ch, struct dl_error *err)
{
    for (int c = 0; c < ch->n; c++) {
        if (strcmp(ch->key[c], "all") != 0 && strcmp(ch->key[c], l->kind->name) != 0 &&
            strcmp(ch->key[c], l->name) != 0)
            continue;
        const struct dl_kernel *k = dl_kernel_find(l->kind, ch->name[c]);
        if (k && !k->doc_mask)
            return dl_errorf(err, DL_ERR_SPEC, "--kernel %s=%s: layer '%s' (%s) reads document boundaries "
                             "(data.document_mask) and kernel '%s' has no document mask; leave the choice out",
                             ch->key[c], ch->name[c], l->name, l->kind->name, k->name);
    }
    return DL_OK;
}

int dl_exec_doc_mask_init(struct dl_exec *e, const struct dl_graph *g, const struct dl_exec_options *o,
                          const struct dl_kernel_choices *ch, struct dl_error *err)
{
    if (g->input.dtype != DL_I32)
        return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: the network's input is not token ids (documents "
                         "are found by their separator id)");
    if (o->doc_separator < 0 || (g->id_limit > 0 && o->doc_separator >= g->id_limit))
        return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: expected a token id below the vocabulary %d, "
                         "found %d", g->id_limit, o->doc_separator);
    if (o->decode_positions > 0)
        return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: incremental decoding has no document mask");
    int readers = 0;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        if (!l->kind->doc_mask)
            continue;
        readers++;
        int rc = refuse_choice(l, ch, err);
        if (rc)
            return rc;
        const struct dl_kernel *k = dl_kernel_select(l, ch);
        if (!k)
            return dl_errorf(err, DL_ERR_SPEC, "layer '%s' (%s): no kernel on %s has a document mask "
                             "(data.document_mask); train on the CPU or without it", l->name, l->kind->name,
                             dl_device_names[ch->device]);
    }
    if (!readers)
        return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: no layer of this network reads document "
                         "boundaries (attention, rope, position_embedding): leave it out");
    struct dl_exec_impl *m = e->impl;
    m->doc_T = dl_shape_count(g->input);
    m->doc_separator = o->doc_separator;
    m->doc_start = dl_calloc((size_t)e->max_batch * (size_t)m->doc_T, sizeof *m->doc_start, err);
    return m->doc_start ? DL_OK : DL_ERR_NOMEM;
}

void dl_exec_doc_mask_forward(struct dl_exec *e, const void *x, int batch)
{
    struct dl_exec_impl *m = e->impl;
    if (!m->doc_start)
        return;
    const int32_t *ids = x;
    long T = m->doc_T;
    for (long n = 0; n < batch; n++) {
        const int32_t *id = ids + n * T;
        int *start = m->doc_start + n * T;
        start[0] = 0;
        for (long t = 1; t < T; t++)
            start[t] = id[t - 1] == m->doc_separator ? (int)t : start[t - 1];
    }
    m->doc_sample0 = e->run.sample0;
}

const int *dl_exec_doc_starts(const struct dl_exec *e)
{
    const struct dl_exec_impl *m = e->impl;
    return m->doc_start ? m->doc_start + (e->run.sample0 - m->doc_sample0) * m->doc_T : NULL;
}
