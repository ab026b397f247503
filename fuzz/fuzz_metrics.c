/* fuzz_metrics.c: fuzz target for the --metrics reader of `dltrain plot`
 * (io/metrics_read.h): any bytes as a JSON-lines file, in memory (memfd). */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz.h"
#include "io/metrics_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-metrics", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size == 0 || write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        struct dl_metrics_run r;
        struct dl_error err = {0};
        if (dl_metrics_read(path, &r, &err) == DL_OK)
            dl_metrics_run_free(&r);
    }
    close(fd);
    return 0;
}
