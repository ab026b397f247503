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
          "           height (conv), batch (any layer but a loss).  auto: fc layers pair up\n"
          "           column/row, convolutions split by filters when the tensor ranks divide them,\n"
          "           other layers follow their input, and a loss after a column-split last layer\n"
          "           reads its classes split (no gather; split: none on the loss gathers them).\n"
          "           height: bands of rows with halos exchanged between neighbour ranks, for\n"
          "           stride-1 'same' convolutions only; element-wise layers, add, batch norm and\n"
          "           later stride-1 'same' convolutions keep the bands, other layers read them\n"
          "           gathered.  batch: the whole layer on tensor rank t's share of the\n"
          "           samples, [t*N/T, (t+1)*N/T) of a chunk of N (Krizhevsky's hybrid: convolutions\n"
          "           data parallel, fc layers tensor parallel); later layers at auto but a loss keep\n"
          "           the share, others read the shares gathered; weight gradients and batch-norm\n"
          "           statistics are summed over the tensor ranks; never chosen by auto\n"
          "  share    weight tying, {PARAMETER: LAYER}: this layer's parameter is the same-named,\n"
          "           same-dims parameter of an earlier layer, one tensor whose gradient sums both\n"
          "           uses (a language model's head on the token embedding: share: {weight: wte});\n"
          "           stored, counted and checkpointed once; tied layers stay in one pipeline stage\n"
          "  init_std draw the layer's weights (two or more dims) from N(0, init_std) and set its\n"
          "           biases to 0, instead of the type's PyTorch default (GPT-2: 0.02)\n\n",
          stdout);
    for (int i = 0; dl_op_kinds[i]; i++) {
        dl_attrs_print_doc(stdout, dl_op_kinds[i]);
        putchar('\n');
    }
    return 0;
}
