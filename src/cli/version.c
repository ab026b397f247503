/* version.c: `dltrain --version`: the version, the commit it was built from
 * (build-commit.h, written by make from `git describe`) and what the build
 * contains, each part asked of its own layer (comm/, backends/), so that no
 * #ifdef is needed here. */
#include "cli/options.h"

#include "config.h"

#include <stdio.h>

#include "backends/device.h"
#include "backends/cpu_blas/openblas_core.h"
#include "backends/kernel.h"
#include "build-commit.h"
#include "comm/comm.h"
#include "io/tensorboard.h"
#include "plot/chart.h"

void dl_print_version(const char *prog)
{
    char comm[512], kernels[512], devices[256], tensorboard[128], charts[128], blas_core[256];
    dl_comm_libraries(comm, sizeof comm);
    dl_kernel_libraries(kernels, sizeof kernels);
    dl_device_libraries(devices, sizeof devices);
    dl_tensorboard_libraries(tensorboard, sizeof tensorboard);
    dl_chart_libraries(charts, sizeof charts);
    dl_openblas_core_describe(blas_core, sizeof blas_core);
    printf("%s (dltrain) %s\n", prog, PACKAGE_VERSION);
    printf("commit: %s\n", DL_BUILD_COMMIT);
    printf("communication: %s\n", comm);
    printf("kernels: reference, simd%s%s\n", *kernels ? ", " : "", kernels);
    printf("OpenBLAS core: %s\n", blas_core);
    printf("devices: cpu, emulated; %s\n", devices);
    printf("TensorBoard: %s\n", tensorboard);
    printf("charts: %s\n", charts);
    printf("License: MIT (see LICENSE)\n");
}
