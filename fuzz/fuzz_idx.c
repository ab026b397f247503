/* fuzz_idx.c: fuzz target for the dataset readers: the IDX reader (raw or
 * gzip) with 1 to 4 dimensions, and the images + labels pair check.  The
 * first byte chooses the dimension count and where the input is split into
 * an images and a labels file; the files live in memory (memfd). */
#include "data/idx.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int ndim = 1 + data[0] % 4;
    size_t split = size > 1 ? (size_t)data[0] * (size - 1) / 256 : 0;
    const uint8_t *a = data + 1, *b = data + 1 + split;
    size_t na = split, nb = size - 1 - split;
    char pa[64], pb[64];
    int fa = dl_fuzz_file(a, na, pa, sizeof pa), fb = dl_fuzz_file(b, nb, pb, sizeof pb);
    if (fa >= 0) {
        struct dl_idx x;
        struct dl_error err = {0};
        if (dl_idx_read(pa, ndim, &x, &err) == DL_OK)
            dl_idx_free(&x);
    }
    if (fa >= 0 && fb >= 0) {
        struct dl_idx img, lab;
        struct dl_error err = {0};
        if (dl_idx_read_pair(pa, pb, 10, &img, &lab, &err) == DL_OK) {
            dl_idx_free(&img);
            dl_idx_free(&lab);
        }
    }
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    return 0;
}
