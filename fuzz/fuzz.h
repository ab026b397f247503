/* fuzz.h: the libFuzzer entry point every fuzz/fuzz_*.c defines, and the
 * small network whose checkpoints the loader target reads (tests/ckpt_tool
 * writes the seed checkpoints with the same network). */
#ifndef DL_FUZZ_H
#define DL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
