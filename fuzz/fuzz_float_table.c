/* fuzz_float_table.c: fuzz target for the readers of float tables
 * (data/float_table.h): the same bytes read as a .npy file and as a CSV
 * file (in memory, memfd).  Both must refuse or read without a memory
 * error, and a table they read must be as large as it says. */
#include "data/float_table.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = dl_fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct dl_float_table t;
    struct dl_error err = {0};
    if (dl_npy_read(path, &t, &err) == DL_OK) {
        volatile float sum = 0;
        for (long i = 0; i < t.rows * t.cols; i++) /* every value read is there */
            sum += t.v[i];
        dl_float_table_free(&t);
    }
    if (dl_csv_read(path, &t, &err) == DL_OK) {
        volatile float sum = 0;
        for (long i = 0; i < t.rows * t.cols; i++)
            sum += t.v[i];
        dl_float_table_free(&t);
    }
    close(fd);
    return 0;
}
