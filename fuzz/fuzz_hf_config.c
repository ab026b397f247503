/* fuzz_hf_config.c: fuzz target for the config.json check of Hugging Face
 * LLaMA imports (train/hf_llama_config.h): the input is the file (in
 * memory, memfd), checked against llama-tiny's configuration.  Any input
 * gets an answer (OK, or DL_ERR_SPEC/DL_ERR_DATA with a message), never a
 * crash or a leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/fuzz.h"
#include "train/hf_llama_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = dl_fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    const struct dl_hf_llama_config c = {.vocab = 256, .hidden = 64, .intermediate = 128, .layers = 2, .heads = 4,
                                         .kv_heads = 2, .head_dim = 16, .max_positions = 64, .eps = 1e-5,
                                         .theta = 10000, .scaling_factor = 1, .low_freq_factor = 1,
                                         .high_freq_factor = 4, .original_context = 8192, .tied = 1};
    struct dl_error err = {0};
    int rc = dl_hf_llama_config_check(path, &c, &err);
    if (rc != DL_OK && rc != DL_ERR_SPEC && rc != DL_ERR_DATA)
        abort();
    if (rc != DL_OK && !err.msg[0])
        abort(); /* a refusal always says why */
    close(fd);
    return 0;
}
