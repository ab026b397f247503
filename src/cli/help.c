/* help.c: `dltrain help layers`: every layer type with its keys, defaults and
 * ranges, printed from the op kinds' attribute tables (the schema itself). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "spec/attrs.h"

int dl_cli_help(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "layers") != 0) {
        fputs("Usage: dltrain help layers\n", argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; dl_op_kinds[i]; i++) {
        dl_attrs_print_doc(stdout, dl_op_kinds[i]);
        putchar('\n');
    }
    return 0;
}
