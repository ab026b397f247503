/* fuzz_netfile.c: fuzz target for the network-file parser (YAML, schema,
 * blocks, graph building and shape inference) through dl_net_load_string.
 * Any input must give a network or an error, never a crash or a leak. */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "spec/netfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct dl_net net;
    struct dl_error err = {0};
    if (dl_net_load_string("fuzz.yaml", text, &net, &err) == DL_OK)
        dl_net_free(&net);
    free(text);
    return 0;
}
