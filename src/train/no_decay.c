/* no_decay.c: the weights weight decay leaves out (see no_decay.h). */
#include "train/no_decay.h"

#include <stdlib.h>
#include <string.h>

#include "train/param_spans.h"

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
    struct dl_optim_span *s = NULL;
    int m = 0, rc = kinds ? dl_param_spans(e, n, weights, dl_no_decay_applies, kinds, &s, &m, count, err) : DL_OK;
    if (!kinds && count)
        *count = 0;
    if (!rc)
        rc = dl_optim_set_no_decay(o, s, m, err);
    free(s);
    return rc;
}
