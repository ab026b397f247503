/* dispatch.c: picks the subcommand from argv[1]; training is the default, so
 * `dltrain --net FILE` trains. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "cli/options.h"

static void usage(FILE *f)
{
    fputs("Usage: dltrain [train] --net FILE [options]   train a network (the default)\n"
          "       dltrain check --net FILE [options]     preflight: layers, settings, memory; exit 2 if the\n"
          "                                              run would fail\n"
          "       dltrain tune --net FILE --batch N      pick kernels and micro-batch splits (cached)\n"
          "       dltrain plan --net FILE --ranks N      predict and rank layouts (grid, cuts, schedule)\n"
          "       dltrain bench step --net FILE          per-layer times and GFLOP/s of a training step\n"
          "       dltrain bench conv [options]           convolution suites (DeepBench, ResNet-50) tuned\n"
          "       dltrain bench comm [options]           benchmark allreduce algorithms and codecs\n"
          "       dltrain bench data --data DIR          decoded images/s vs torchvision\n"
          "       dltrain bench pipeline --net FILE      pipeline schedules on measured stage times\n"
          "       dltrain tokenize -o DIR FILE|DIR...    GPT-2 BPE into token files (train.bin, val.bin)\n"
          "       dltrain generate --net FILE --checkpoint F  sample text from a trained network\n"
          "       dltrain export --net FILE --checkpoint F -o OUT  weights for Hugging Face's GPT2LMHeadModel\n"
          "       dltrain plot RUN.jsonl... -o FILE.svg  loss, accuracy and throughput charts of runs\n"
          "       dltrain help layers                    list every layer type and its keys\n"
          "       dltrain COMMAND --help                 options of one command\n"
          "       dltrain --version                      version, commit and what the build contains\n"
          "See dltrain(1), dltrain-net(5) and dltrain-data(5).\n",
          f);
}

int dl_cli_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0)
        return dl_cli_train(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return dl_cli_check(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0)
        return dl_cli_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "tune") == 0)
        return dl_cli_tune(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return dl_cli_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0)
        return dl_cli_help(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0)
        return dl_cli_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0)
        return dl_cli_generate(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return dl_cli_export(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0)
        return dl_cli_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        dl_print_version("dltrain");
        return 0;
    }
    if (cmd[0] == '-') /* options only: train */
        return dl_cli_train(argc, argv);
    static const char *const commands[] = {"train", "check", "plan", "tune", "bench", "help", "tokenize", "generate", "export", "plot", NULL};
    const char *near = dl_closest_name(cmd, commands);
    if (near)
        fprintf(stderr, "dltrain: unknown command '%s' (did you mean %s?)\n", cmd, near);
    else
        fprintf(stderr, "dltrain: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
