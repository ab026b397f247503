/* export.c: `dltrain export --net FILE --checkpoint FILE|DIR -o OUT`: a
 * trained network's weights in Hugging Face's GPT-2 layout (train/
 * hf_gpt2.h), which transformers' GPT2LMHeadModel loads with
 * load_state_dict(strict=True) (or from_pretrained, beside a config.json). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "train/hf_gpt2.h"

#define PROG "dltrain export"

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

/* Everything the command line asks for. */
struct export_command {
    struct dl_net_options net_options;
    const char *checkpoint, *out;
    enum dl_dtype save;  /* --save-dtype */
};

static int take_format(void *settings, const char *value, struct dl_error *err)
{
    (void)settings;
    return strcmp(value, "hf-gpt2") == 0 ? DL_OK
           : dl_errorf(err, DL_ERR_SPEC, "--format: expected hf-gpt2 (Hugging Face's GPT-2), found '%s'", value);
}

static int take_save_dtype(void *settings, const char *value, struct dl_error *err)
{
    return dl_precision_parse("--save-dtype", value, &((struct export_command *)settings)->save, err);
}

int dl_cli_export(int argc, char **argv)
{
    static const struct dl_option options[] = {
        DL_OPTION_STRING("checkpoint", struct export_command, checkpoint),
        DL_OPTION_OUTPUT(struct export_command, out),
        DL_OPTION_CALL("format", required_argument, take_format),
        DL_OPTION_CALL("save-dtype", required_argument, take_save_dtype), DL_OPTION_END};
    struct export_command cmd = {.save = DL_F32};
    dl_net_options_init(&cmd.net_options);
    struct dl_command_line line = {PROG, options, &cmd, &cmd.net_options, help, .repeat_try = 1};
    int first_argument, status = dl_options_parse(&line, argc, argv, &first_argument);
    if (status >= 0)
        return status;
    const char *checkpoint = cmd.checkpoint, *out = cmd.out;
    if (!checkpoint || !out) {
        fprintf(stderr, PROG ": %s\nTry '" PROG " --help'.\n",
                !checkpoint ? "no weights given: --checkpoint FILE or DIR" : "no output given: -o OUT.safetensors");
        return 2;
    }
    struct dl_net net;
    status = dl_net_options_load(&cmd.net_options, &net, PROG);
    if (status)
        return status;
    struct dl_error err = {0};
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd.net_options, &eo);
    int rc = dl_exec_init(&e, &net.graph, 1, net.train.seed, &eo, &err);
    if (!rc) {
        rc = dl_load_weights(checkpoint, NULL, &e, &net.graph, &err);
        if (!rc)
            rc = dl_hf_gpt2_export(out, &net.graph, &e, cmd.save, &err);
        dl_exec_free(&e);
    }
    if (!rc)
        printf("export: %s -> %s (Hugging Face GPT-2 layout)\n", checkpoint, out);
    dl_net_free(&net);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}
