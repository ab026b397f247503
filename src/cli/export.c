/* export.c: `dltrain export --net FILE --checkpoint FILE|DIR -o OUT`: a
 * trained network's weights in Hugging Face's layout of its family (train/
 * hf_weights.h): GPT-2's safetensors, which transformers' GPT2LMHeadModel
 * loads with load_state_dict(strict=True), or a LLaMA's folder (config.json
 * and model.safetensors) for LlamaForCausalLM.from_pretrained. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "train/hf_weights.h"

#define PROG "dltrain export"

static void help(void)
{
    fputs("Usage: dltrain export --net FILE --checkpoint FILE|DIR -o OUT [--format hf-gpt2|hf-llama]\n"
          "                      [--save-dtype fp32|bf16]\n"
          "Writes a checkpoint's weights (or the latest in a --checkpoint-dir) in Hugging Face's layout of\n"
          "the network's family (--format names it; the network decides by default):\n"
          "  GPT-2 (nets/gpt2.yaml's names): OUT.safetensors with transformer.h.0.attn.c_attn.weight\n"
          "    [in, out] (Conv1D), ..., lm_head.weight, for GPT2LMHeadModel.load_state_dict (strict);\n"
          "  LLaMA (model.embed_tokens, model.layers.N...: nets/llama-tiny.yaml): the folder OUT with\n"
          "    config.json (LlamaConfig: sizes, heads, kv heads, rope theta and scaling, eps, tying) and\n"
          "    model.safetensors, for LlamaForCausalLM.from_pretrained(OUT); OUT.safetensors: the\n"
          "    weights alone.\n"
          "--save-dtype bf16 writes the weights rounded to bf16 (to nearest even), half the bytes, for\n"
          "inference; the checkpoints keep the fp32 master weights.\n\n",
          stdout);
    dl_net_options_help(stdout);
}

/* Everything the command line asks for. */
struct export_command {
    struct dl_net_options net_options;
    const char *checkpoint, *out;
    enum dl_dtype save;  /* --save-dtype */
    const char *format;  /* --format's family ("GPT-2", "LLaMA"); NULL: the network's */
};

static int take_format(void *settings, const char *value, struct dl_error *err)
{
    struct export_command *cmd = settings;
    if (strcmp(value, "hf-gpt2") == 0 || strcmp(value, "hf-llama") == 0) {
        cmd->format = strcmp(value, "hf-gpt2") == 0 ? "GPT-2" : "LLaMA";
        return DL_OK;
    }
    return dl_errorf(err, DL_ERR_SPEC, "--format: expected hf-gpt2 (Hugging Face's GPT-2) or hf-llama (its "
                     "LlamaForCausalLM), found '%s'", value);
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
    const char *family = dl_hf_family(&net.graph);
    if (cmd.format && strcmp(cmd.format, family) != 0) {
        fprintf(stderr, PROG ": --format: the network's layers carry %s's names, not %s's\n", family, cmd.format);
        dl_net_free(&net);
        return 2;
    }
    struct dl_error err = {0};
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd.net_options, &eo);
    int rc = dl_exec_init(&e, &net.graph, 1, net.train.seed, &eo, &err);
    if (!rc) {
        rc = dl_load_weights(checkpoint, NULL, &e, &net.graph, &err);
        if (!rc)
            rc = dl_hf_export(out, &net.graph, &e, cmd.save, &err);
        dl_exec_free(&e);
    }
    if (!rc)
        printf("export: %s -> %s (Hugging Face %s layout)\n", checkpoint, out, family);
    dl_net_free(&net);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}
