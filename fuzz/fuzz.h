/* fuzz.h: the libFuzzer entry point every fuzz/fuzz_*.c defines, the
 * in-memory file the readers of paths are given, and the small network
 * whose checkpoints the loader target reads (tests/ckpt_tool writes the
 * seed checkpoints with the same network). */
#ifndef DL_FUZZ_H
#define DL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h> /* memfd_create */
#include <sys/types.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data[0..size) as a file in memory (memfd) whose path goes into path[n]:
 * its descriptor (close it after), or -1. */
static inline int dl_fuzz_file(const uint8_t *data, size_t size, char *path, size_t n)
{
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, n, "/proc/self/fd/%d", fd);
    return fd;
}

#define DL_FUZZ_SMALL_NET                                                                          \
    "input: {shape: [1, 6, 6], classes: 3}\n"                                                      \
    "layers:\n"                                                                                    \
    "  - {name: conv1, type: conv, filters: 3, kernel: 3}\n"                                       \
    "  - {name: bn1, type: batchnorm}\n"                                                           \
    "  - {type: relu}\n"                                                                           \
    "  - {name: fc, type: fc, units: 3}\n"                                                         \
    "loss: softmax_cross_entropy\n"                                                                \
    "train: {optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}\n"

#endif
