/* bench.c: `dltrain bench WHAT`: routes to the benchmark of WHAT. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int dl_cli_bench(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "comm") == 0)
        return dl_cli_bench_comm(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "step") == 0)
        return dl_cli_bench_step(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "conv") == 0)
        return dl_cli_bench_conv(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "data") == 0)
        return dl_cli_bench_data(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "pipeline") == 0)
        return dl_cli_bench_pipeline(argc - 1, argv + 1);
    FILE *f = argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr;
    if (f == stderr && argc >= 2)
        fprintf(stderr, "dltrain bench: unknown benchmark '%s' (expected comm, step, conv, data or pipeline)\n", argv[1]);
    fputs("Usage: dltrain bench comm [options]   allreduce algorithms and gradient codecs\n"
          "       dltrain bench step --net FILE [--batch N] [--threads N]\n"
          "                                      training-step time per layer, samples/s, GFLOP/s\n"
          "       dltrain bench conv --suite deepbench|resnet50 | --shape ... [--workspace-limit BYTES]\n"
          "                                      undivided vs micro-batched convolutions (tuner)\n"
          "       dltrain bench data --data DIR [--data-threads 1,2] [--net FILE]\n"
          "                                      decoded images/s vs torchvision; exposed input time\n"
          "       dltrain bench pipeline --net FILE [--ranks P] [--pipeline-chunks M]\n"
          "                                      each schedule's step time and bubble, simulated on\n"
          "                                      per-stage times measured in one process\n", f);
    return f == stdout ? 0 : 2;
}
