/* main.c: subcommand dispatch only; each subcommand lives in src/cli/. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
    return dl_cli_main(argc, argv);
}
