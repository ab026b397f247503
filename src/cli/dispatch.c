/* dispatch.c: picks the subcommand from argv[1]; training is the default. */
#include "cli/cli.h"

#include <stdio.h>

int dl_cli_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "dltrain: not yet\n");
    return 1;
}
