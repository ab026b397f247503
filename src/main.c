/* main.c: subcommand dispatch only; each subcommand lives in src/cli/.  The
 * one thing before it: OpenBLAS must learn the CPU before any work starts
 * (src/backends/cpu_blas/openblas_core.c). */
#include "backends/cpu_blas/openblas_core.h"
#include "cli/cli.h"

int main(int argc, char **argv)
{
    dl_openblas_core_fix(argv);
    return dl_cli_main(argc, argv);
}
