/* registry.c: the table of every op kind, built from the list in kinds.h
 * (adding a layer type: doc/ARCHITECTURE.md's checklist). */
#include "ops/op.h"

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
