/* fuzz_tokens.c: fuzz target for the token-file reader (data/token_file.h)
 * and the windows of token datasets (data/token_windows.h): the input is
 * the file (in memory, memfd), read by the header check, by the whole
 * reader and as windows of one position after the header check: what the
 * reader takes the header check takes, with its count, and the windows
 * hold the same ids. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/token_file.h"
#include "data/token_windows.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = dl_fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct dl_error err = {0};
    long count = 0;
    int width = 0, head = dl_token_file_header(path, &count, &width, &err);
    struct dl_token_stream s = {0};
    int whole = dl_token_file_read(path, &s, &width, &err);
    if ((head != DL_OK && whole == DL_OK) || (whole == DL_OK && s.n != count)) /* ids > INT32_MAX fail only whole */
        abort();
    struct dl_token_windows *w = calloc(1, sizeof *w);
    if (w && head == DL_OK &&
        dl_token_windows_add(w, path, 4 * DL_TOKEN_FILE_HEADER_INTS, width, count, &err) == DL_OK && whole == DL_OK &&
        dl_token_windows_split(w, 0, s.n, 1, 0, "fuzz", "training", path, &err) == DL_OK)
        for (long k = 0; k + 1 < s.n; k++) { /* windows of one position: id k, and k + 1 as its label */
            int32_t id;
            int next;
            dl_token_windows_get(w, k, &id, &next);
            if (id != s.id[k] || next != s.id[k + 1])
                abort();
        }
    dl_token_windows_free(w);
    dl_token_stream_free(&s);
    close(fd);
    return 0;
}
