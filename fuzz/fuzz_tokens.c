/* fuzz_tokens.c: fuzz target for the token-file reader (data/token_file.h):
 * the input is the file (in memory, memfd), read by the header check and by
 * the whole reader: what the reader takes the header check takes, with its
 * count. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/token_file.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-tokens", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct dl_error err = {0};
    long count = 0;
    int width = 0, head = dl_token_file_header(path, &count, &width, &err);
    struct dl_token_stream s = {0};
    int whole = dl_token_file_read(path, &s, &width, &err);
    if ((head != DL_OK && whole == DL_OK) || (whole == DL_OK && s.n != count)) /* ids > INT32_MAX fail only whole */
        abort();
    dl_token_stream_free(&s);
    close(fd);
    return 0;
}
