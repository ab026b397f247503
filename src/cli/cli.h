/* cli.h: entry points of the subcommands (one file each in src/cli/). */
#ifndef DL_CLI_H
#define DL_CLI_H

int dl_cli_main(int argc, char **argv);

#endif
