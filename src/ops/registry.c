/* registry.c: the table of every op kind.  Adding a layer type means adding
 * its file in src/ops/ and one line here. */
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
