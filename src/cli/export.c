/* export.c: `dltrain export --net FILE --checkpoint FILE|DIR -o OUT`: a
 * trained network's weights in Hugging Face's GPT-2 layout (train/
 * hf_gpt2.h), which transformers' GPT2LMHeadModel loads with
 * load_state_dict(strict=True) (or from_pretrained, beside a config.json). */
#include "cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/options.h"
#include "train/hf_gpt2.h"

#define PROG "dltrain export"

enum { OPT_CHECKPOINT = DL_OPT_FIRST_LOCAL, OPT_OUTPUT, OPT_FORMAT, OPT_SAVE_DTYPE };

static void help(void)
{
    fputs("Usage: dltrain export --net FILE --checkpoint FILE|DIR -o OUT.safetensors [--format hf-gpt2]\n"
          "                      [--save-dtype fp32|bf16]\n"
          "Writes a checkpoint's weights (or the latest in a --checkpoint-dir) in Hugging Face's GPT-2 layout:\n"
          "transformer.h.0.attn.c_attn.weight [in, out] (Conv1D), ..., lm_head.weight, for\n"
          "GPT2LMHeadModel.load_state_dict (strict) or from_pretrained.  --save-dtype bf16 writes the\n"
          "weights rounded to bf16 (to nearest even), half the bytes, for inference; the checkpoints\n"
          "keep the fp32 master weights.\n\n",
          stdout);
    dl_net_options_help(stdout);
}

int dl_cli_export(int argc, char **argv)
{
    static const struct option opts[] = {DL_NET_OPTIONS,
                                         {"checkpoint", required_argument, 0, OPT_CHECKPOINT},
                                         {"output", required_argument, 0, OPT_OUTPUT},
                                         {"format", required_argument, 0, OPT_FORMAT},
                                         {"save-dtype", required_argument, 0, OPT_SAVE_DTYPE},
                                         {0, 0, 0, 0}};
    dl_short_output(argc, argv);
    struct dl_net_options no;
    dl_net_options_init(&no);
    const char *checkpoint = NULL, *out = NULL;
    enum dl_dtype save = DL_F32;
    int opt;
    optind = 1;
    while ((opt = dl_getopt(argc, argv, opts, PROG)) != -1) {
        int r = dl_net_option(&no, opt, optarg, PROG);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_CHECKPOINT: checkpoint = optarg; break;
        case OPT_OUTPUT: out = optarg; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "hf-gpt2") != 0) {
                fprintf(stderr, PROG ": --format: expected hf-gpt2 (Hugging Face's GPT-2), found '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_SAVE_DTYPE: {
            struct dl_error perr = {0};
            if (dl_option_refused(PROG, dl_precision_parse("--save-dtype", optarg, &save, &perr), &perr))
                return 2;
            break;
        }
        case DL_OPT_HELP: help(); return 0;
        default: fprintf(stderr, "Try '" PROG " --help'.\n"); return 2;
        }
    }
    if (!checkpoint || !out) {
        fprintf(stderr, PROG ": %s\nTry '" PROG " --help'.\n",
                !checkpoint ? "no weights given: --checkpoint FILE or DIR" : "no output given: -o OUT.safetensors");
        return 2;
    }
    struct dl_net net;
    int status = dl_net_options_load(&no, &net, PROG);
    if (status)
        return status;
    struct dl_error err = {0};
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&no, &eo);
    int rc = dl_exec_init(&e, &net.graph, 1, net.train.seed, &eo, &err);
    if (!rc) {
        rc = dl_load_weights(checkpoint, NULL, &e, &net.graph, &err);
        if (!rc)
            rc = dl_hf_gpt2_export(out, &net.graph, &e, save, &err);
        dl_exec_free(&e);
    }
    if (!rc)
        printf("export: %s -> %s (Hugging Face GPT-2 layout)\n", checkpoint, out);
    dl_net_free(&net);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}
