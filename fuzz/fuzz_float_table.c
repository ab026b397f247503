/* fuzz_float_table.c: fuzz target for the readers of float tables
 * (data/float_table.h): the same bytes read as a .npy file and as a CSV
 * file (in memory, memfd).  Both must refuse or read without a memory
 * error, and a table they read must be as large as it says. */
#include "data/float_table.h"
#include "fuzz/fuzz.h"

/* Reads path with reader; a table read is as large as it says. */
static void read_with(int (*reader)(const char *, struct dl_float_table *, struct dl_error *), const char *path)
{
    struct dl_float_table t;
    struct dl_error err = {0};
    if (reader(path, &t, &err) != DL_OK)
        return;
    volatile float sum = 0;
    for (long i = 0; i < t.rows * t.cols; i++) /* every value read is there */
        sum += t.v[i];
    (void)sum;
    dl_float_table_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = dl_fuzz_file(data, size, path, sizeof path);
    if (fd >= 0) {
        read_with(dl_npy_read, path);
        read_with(dl_csv_read, path);
        close(fd);
    }
    return 0;
}
