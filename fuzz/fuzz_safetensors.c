/* fuzz_safetensors.c: fuzz target for the safetensors reader and the
 * checkpoint loader: every input is validated as a safetensors file and then
 * loaded into a small network's run state (fuzz.h), as --resume would (its
 * metadata checked against the limits of a run too: 4 steps of 16 samples of
 * 1 label an epoch), and as weights only. */
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "io/safetensors.h"
#include "spec/netfile.h"
#include "train/checkpoint.h"

static struct dl_net net;
static struct dl_exec exec;
static struct dl_optim optim;
static int ready;

/* The run state is built once and kept (the fuzzer calls us millions of
 * times); it is freed at exit so that LeakSanitizer stays quiet. */
static void cleanup(void)
{
    dl_optim_free(&optim);
    dl_exec_free(&exec);
    dl_net_free(&net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dl_error err = {0};
    if (!ready) {
        if (dl_net_load_string("fuzz.yaml", DL_FUZZ_SMALL_NET, &net, &err) ||
            dl_exec_init(&exec, &net.graph, 2, 1, NULL, &err) ||
            dl_optim_init(&optim, &net.train.optim, exec.n_weights, &err))
            abort();
        atexit(cleanup);
        ready = 1;
    }
    struct dl_st_file f;
    if (dl_st_open_memory("fuzz.safetensors", data, size, &f, &err) == DL_OK) {
        for (int i = 0; i < f.n; i++) /* touch every byte the reader claims is there */
            if (f.t[i].end > f.t[i].begin)
                err.code += ((const uint8_t *)f.t[i].data)[f.t[i].end - f.t[i].begin - 1];
        dl_st_close(&f);
    }
    const struct dl_checkpoint_limits limits = {.steps_per_epoch = 4, .epoch_samples = 16, .positions = 1};
    struct dl_run_view v = {&net.graph, &exec, &optim, &limits};
    struct dl_checkpoint_meta meta;
    dl_checkpoint_load_memory("fuzz.safetensors", data, size, &v, &meta, &err);
    v.limits = NULL;
    v.optim = NULL;
    dl_checkpoint_load_memory("fuzz.safetensors", data, size, &v, &meta, &err);
    return 0;
}
