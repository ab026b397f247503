/* registry.c: the table of every op kind, built from the list in kinds.h
 * (adding a layer type: doc/ARCHITECTURE.md's checklist). */
#include "ops/op.h"

#include <stdlib.h>
#include <string.h>

#include "ops/kinds.h"

const struct dl_op_kind *const dl_op_kinds[] = {
#define DL_OP(sym) &sym,
    DL_OP_LIST
#undef DL_OP
    NULL
};

const struct dl_op_kind *dl_op_find(const char *name)
{
    for (int i = 0; dl_op_kinds[i]; i++)
        if (strcmp(dl_op_kinds[i]->name, name) == 0)
            return dl_op_kinds[i];
    return NULL;
}

int dl_op_param_descs(const struct dl_op_kind *k, const void *attr, const struct dl_shape *in,
                      struct dl_shape out, struct dl_param_desc **p, struct dl_error *err)
{
    *p = NULL;
    int n = k->params ? k->params(attr, in, out, NULL) : 0;
    if (n <= 0)
        return 0;
    *p = calloc((size_t)n, sizeof **p);
    if (!*p) {
        dl_errorf(err, DL_ERR_NOMEM, "out of memory for the %d parameters of a %s layer", n, k->name);
        return -1;
    }
    return k->params(attr, in, out, *p);
}
