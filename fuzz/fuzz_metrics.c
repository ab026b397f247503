/* fuzz_metrics.c: fuzz target for the --metrics reader of `dltrain plot`
 * (io/metrics_read.h): any bytes as a JSON-lines file, in memory (memfd). */
#include "fuzz/fuzz.h"
#include "io/metrics_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = dl_fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct dl_metrics_run r;
    struct dl_error err = {0};
    if (dl_metrics_read(path, &r, &err) == DL_OK)
        dl_metrics_run_free(&r);
    close(fd);
    return 0;
}
