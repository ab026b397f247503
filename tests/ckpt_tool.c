/* ckpt_tool.c: a small helper for the shell tests of checkpoints.
 *   ckpt_tool write FILE   one checkpoint of a small trained network
 *   ckpt_tool loop DIR     resumes from the latest checkpoint of DIR and writes
 *                          one per step forever (--keep 2); the kill test
 *                          SIGKILLs it at random moments
 *   ckpt_tool check DIR    loads the latest valid checkpoint of DIR; prints
 *                          "step N, skipped K" and exits 0, or 1 when none loads
 *   ckpt_tool dump FILE NAME   prints the tensor NAME of FILE as %.9g lines
 * The network is fuzz.h's small one, so that its checkpoints seed the
 * checkpoint-loader fuzz target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "io/safetensors.h"
#include "spec/netfile.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"

static int die(const struct dl_error *err)
{
    fprintf(stderr, "ckpt_tool: %s\n", err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct dl_error err = {0};
    struct dl_net net;
    struct dl_exec e;
    struct dl_optim o;
    if (dl_net_load_string("ckpt_tool.yaml", DL_FUZZ_SMALL_NET, &net, &err) || dl_exec_init(&e, &net.graph, 2, 5, NULL, &err) ||
        dl_optim_init(&o, &net.train.optim, e.n_weights, &err))
        return die(&err);
    struct dl_run_view v = {&net.graph, &e, &o};
    dl_real x[72];
    int y[2] = {0, 2};
    for (int i = 0; i < 72; i++)
        x[i] = (dl_real)((i * 37 % 11) - 5) / 5;
    struct dl_checkpoint_meta m = {.seed = 5, .world_size = 1, .dp = 1, .tp = 1, .pp = 1};
    if (!strcmp(argv[1], "write")) {
        dl_exec_forward(&e, x, y, 2, 1);
        dl_exec_backward(&e);
        dl_optim_step(&o, 0.1, e.weights, e.dweights);
        m.global_step = 1;
        return dl_checkpoint_save(argv[2], &v, &m, &err) ? die(&err) : 0;
    }
    if (!strcmp(argv[1], "loop")) {
        char path[1024];
        int found;
        /* continue from the latest checkpoint, as a resumed run would */
        if (dl_checkpoint_find_latest(argv[2], path, sizeof path, &found, NULL, 0, &err) ||
            (found && dl_checkpoint_load(path, &v, &m, &err)))
            return die(&err);
        for (long s = m.global_step + 1;; s++) {
            dl_exec_zero_grad(&e);
            dl_exec_forward(&e, x, y, 2, 1);
            dl_exec_backward(&e);
            dl_optim_step(&o, 0.01, e.weights, e.dweights);
            m.global_step = s;
            if (dl_checkpoint_path(path, sizeof path, argv[2], s, &err) || dl_checkpoint_save(path, &v, &m, &err) ||
                dl_checkpoint_rotate(argv[2], 2, NULL, &err))
                return die(&err);
        }
    }
    if (!strcmp(argv[1], "check")) {
        char path[1024], warn[8192];
        int found;
        if (dl_checkpoint_find_latest(argv[2], path, sizeof path, &found, warn, sizeof warn, &err))
            return die(&err);
        if (!found || dl_checkpoint_load(path, &v, &m, &err)) {
            fprintf(stderr, "ckpt_tool: no loadable checkpoint: %s%s\n", warn, err.msg);
            return 1;
        }
        int skipped = 0;
        for (const char *p = warn; (p = strchr(p, '\n')); p++)
            skipped++;
        printf("step %ld, skipped %d\n", m.global_step, skipped);
        return 0;
    }
    if (!strcmp(argv[1], "dump") && argc == 4) {
        struct dl_st_file f;
        if (dl_st_open(argv[2], &f, &err))
            return die(&err);
        const struct dl_st_entry *t = dl_st_find(&f, argv[3]);
        if (!t || t->dtype != DL_ST_F32)
            return 1;
        for (uint64_t i = 0; i < t->count; i++)
            printf("%.9g\n", (double)((const float *)t->data)[i]);
        dl_st_close(&f);
        return 0;
    }
    return 2;
}
