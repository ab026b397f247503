/* help.c: `dltrain help layers`: every layer type with its keys, defaults and
 * ranges, printed from the op kinds' attribute tables (the schema itself). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "spec/attrs.h"

int dl_cli_help(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs("Usage: dltrain help layers\n", stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "layers") != 0) {
        if (argc >= 2)
            fprintf(stderr, "dltrain help: unknown topic '%s' (expected layers)\n", argv[1]);
        fputs("Usage: dltrain help layers\n", stderr);
        return 2;
    }
    fputs("Every layer also takes these keys:\n"
          "  name     its name (default: type and a count)\n"
          "  type     the layer type, one of those below\n"
          "  inputs   the layers it reads (default: the item before it)\n"
          "  stage    pipeline stage that begins at this layer (integer from 0; default: cut by dltrain)\n"
          "  split    tensor-parallel split: auto (default), none, column, row (fc), filters, channels,\n"
          "           height (conv).  auto: fc layers pair up column/row, convolutions split by filters\n"
          "           when the tensor ranks divide them, other layers follow their input, and a loss\n"
          "           after a column-split last layer reads its classes split (no gather; split: none\n"
          "           on the loss gathers them).  height: bands of rows with halos exchanged between\n"
          "           neighbour ranks, for stride-1 'same' convolutions only; element-wise layers, add,\n"
          "           batch norm and later stride-1 'same' convolutions keep the bands, other layers\n"
          "           read them gathered\n\n",
          stdout);
    for (int i = 0; dl_op_kinds[i]; i++) {
        dl_attrs_print_doc(stdout, dl_op_kinds[i]);
        putchar('\n');
    }
    return 0;
}
