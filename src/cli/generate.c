/* generate.c: `dltrain generate --net FILE --checkpoint FILE|DIR [--prompt
 * TEXT]`: samples text from a trained sequence network, printing each token
 * as it comes.  The tokens are bytes for a network of 256 classes, GPT-2's
 * BPE otherwise (--vocab, data/bpe.h).  Each new token runs one forward of
 * the window (the last T tokens, T the network's input length; positions
 * after them padded, which a causal network never reads) on one sample and
 * draws from the scores at the last real position: divided by
 * --temperature (0: the most likely token), cut to the --top-k best,
 * softmax in double, a draw from the run's seeded generator (--seed).
 * With a key/value cache (the default where the network file has
 * args.context and its position table does not depend on it, as
 * nets/gpt2.yaml's args.positions) a second executor runs the network on
 * one position at a time (exec.h's decode_positions): each token costs one
 * position, whatever the prefix.  The prompt runs as one window from
 * position 0, which fills the caches (the window executor's, shared).  The
 * cache holds the window's T positions (a longer prompt's last T), so up to
 * T tokens it continues exactly as the window does; when it is full it
 * restarts from the last T/2 tokens (where the window would slide by one).  --no-cache (or a network without
 * that argument) runs every token on the whole window. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/rng.h"
#include "data/bpe.h"
#include "data/utf8.h"
#include "exec/exec.h"
#include "train/sample.h"

#define PROG "dltrain generate"

static void help(void)
{
    fputs("Usage: dltrain generate --net FILE --checkpoint FILE|DIR [--prompt TEXT] [options]\n"
          "Samples text from a trained sequence network (token ids in, a loss at every position), printing\n"
          "each token as it comes: bytes for a network of 256 classes, GPT-2's BPE otherwise.\n\n"
          "  --checkpoint FILE|DIR the weights: a checkpoint, or the latest in a --checkpoint-dir\n"
          "  --init-from FILE      the weights: a Hugging Face GPT-2 model.safetensors\n"
          "  --prompt TEXT         the text to continue (default: <|endoftext|>, or a newline for bytes)\n"
          "  --max-tokens N        tokens to generate (default 64)\n"
          "  --temperature X       divide the scores by X (default 1; 0: always the most likely)\n"
          "  --top-k K             draw among the K most likely only (default 0: all)\n"
          "  --vocab NAME|FILE     the BPE vocabulary (default gpt2), or a Hugging Face tokenizer.json\n"
          "  --tokenizer FILE      a tokenizer.json (its template's tokens, Llama 3's <|begin_of_text|>,\n"
          "                        go before the prompt)\n"
          "  --seed N              the draws' seed (default the network's train.seed)\n"
          "  --no-cache            run every token on the whole window (no key/value cache)\n"
          "  --verbose             then the tokens, the time and the window on stderr\n"
          "  --context T           the window (the network's args.context)\n\n",
          stdout);
    dl_net_options_help(stdout);
}

/* Cached mode: the network on one position, its attention layers' caches
 * holding s->id[base .. base + pos). */
struct cached {
    int on;
    struct dl_net net;
    struct dl_exec e;        /* one position a call; the window executor's caches */
    struct dl_exec *window;  /* the prompt's window from position 0, filling the caches */
    long P, base, pos;
};

/* Sets up d for the window of T positions, or leaves d->on 0 (after saying
 * why on stderr) where the network cannot run one position at a time. */
static void open_cached(const struct dl_net_options *no, const char *checkpoint, const char *init_from,
                        struct dl_exec *window, int T, struct cached *d)
{
    struct dl_net_options one = *no;
    struct dl_error err = {0};
    FILE *quiet = fopen("/dev/null", "w"), *saved = stderr; /* the second load's messages are the first's */
    if (dl_net_option(&one, DL_OPT_CONTEXT, "1", PROG) != 1)
        return;
    if (quiet)
        stderr = quiet;
    int rc = dl_net_options_load(&one, &d->net, PROG);
    stderr = saved;
    if (quiet)
        fclose(quiet);
    if (rc) {
        fprintf(stderr, PROG ": no key/value cache (the network file has no args.context to run one position "
                "with): every token runs the window\n");
        return;
    }
    struct dl_exec_options eo;
    dl_net_exec_options(&one, &eo);
    eo.decode_positions = T;
    eo.share_cache = window;
    rc = dl_exec_init(&d->e, &d->net.graph, 1, d->net.train.seed, &eo, &err);
    if (!rc && (rc = dl_load_weights(checkpoint, init_from, &d->e, &d->net.graph, &err)) != 0)
        dl_exec_free(&d->e);
    if (rc) {
        fprintf(stderr, PROG ": no key/value cache (%s): every token runs the window\n", err.msg);
        dl_net_free(&d->net);
        return;
    }
    d->on = 1;
    d->P = T;
    d->window = window;
}

static void close_cached(struct cached *d)
{
    if (!d->on)
        return;
    dl_exec_free(&d->e);
    dl_net_free(&d->net);
    d->on = 0;
}

/* Gives the scores after the tokens of s: an empty cache takes the last P
 * of them in one forward of the window from position 0 (which fills it),
 * then each new token is one position; a full cache starts again from the
 * last P/2 tokens. */
static int cached_scores(struct cached *d, const struct dl_token_stream *s, int32_t *x, int *labels, float *scores,
                         struct dl_error *err)
{
    if (d->pos == d->P && d->base + d->pos < s->n)
        d->pos = 0, d->base = s->n - d->P / 2;
    if (d->pos == 0) {
        d->base = s->n > d->P ? s->n - d->P : d->base;
        d->window->decode.position0 = 0;
        d->pos = s->n - d->base;
        return dl_sample_window_scores(d->window, (int)d->P, s->id + d->base, d->pos, x, labels, scores, err);
    }
    int label = 0;
    while (d->base + d->pos < s->n) {
        d->e.decode.position0 = d->pos;
        dl_exec_forward(&d->e, &s->id[d->base + d->pos], &label, 1, 0); /* the executor's input: one i32 */
        if (d->e.status)
            return dl_errorf(err, d->e.status, "%s", d->e.err.msg);
        d->pos++;
    }
    return dl_exec_scores_at(&d->e, 0, 0, scores, err);
}

/* Everything the command line asks for. */
struct generate_command {
    struct dl_net_options net_options;
    const char *checkpoint, *init_from, *prompt, *vocab;
    int max_tokens, use_cache, verbose, top_k;
    double temperature;
};

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct generate_command *cmd)
{
    static const struct dl_option options[] = {
        DL_OPTION_STRING("checkpoint", struct generate_command, checkpoint),
        DL_OPTION_STRING("init-from", struct generate_command, init_from),
        DL_OPTION_FLAG("no-cache", struct generate_command, use_cache, 0),
        DL_OPTION_STRING("prompt", struct generate_command, prompt),
        DL_OPTION_INT("max-tokens", struct generate_command, max_tokens, 0, 1 << 24),
        DL_OPTION_DOUBLE("temperature", struct generate_command, temperature, 0, 1e6),
        DL_OPTION_INT("top-k", struct generate_command, top_k, 0, 1 << 30),
        DL_OPTION_STRING("vocab", struct generate_command, vocab),
        DL_OPTION_STRING("tokenizer", struct generate_command, vocab),
        DL_OPTION_FLAG("verbose", struct generate_command, verbose, 1), DL_OPTION_END};
    struct dl_command_line line = {PROG, options, cmd, &cmd->net_options, help, .repeat_try = 1};
    int first_argument, status = dl_options_parse(&line, argc, argv, &first_argument);
    if (status >= 0)
        return status;
    if (!cmd->checkpoint == !cmd->init_from) {
        fprintf(stderr, PROG ": %s\n", cmd->checkpoint ? "--checkpoint and --init-from: give one"
                : "no weights given: --checkpoint FILE or DIR (a run's --checkpoint-dir), or --init-from FILE "
                  "(Hugging Face's GPT-2 safetensors)");
        return 2;
    }
    return -1;
}

/* What a generation holds. */
struct generation {
    struct dl_bpe *b;          /* NULL: the tokens are bytes */
    struct dl_token_stream s;  /* the prompt's tokens, then the drawn ones */
    struct dl_exec e;          /* the window's executor */
    int have_exec, have_sampler;
    int32_t *x;
    float *scores;
    int *labels;
    struct dl_sampler z;
    struct cached dec;
};

/* The network reads token ids with a loss at every position; its vocabulary
 * (BPE unless the classes are bytes) fits its classes. */
static int open_vocabulary(const struct generate_command *cmd, const struct dl_graph *g, struct dl_bpe **b,
                           struct dl_error *err)
{
    int T = g->input.h, C = g->classes;
    if (g->input.dtype != DL_I32 || g->positions != T || T < 1)
        return dl_errorf(err, DL_ERR_SPEC, "%s reads no token ids with a loss at every position (input [T], dtype "
                         "i32): nothing to generate from", cmd->net_options.net_path);
    if (C == 256)
        return DL_OK;
    int rc = dl_bpe_open(cmd->vocab, b, err);
    if (!rc && dl_bpe_vocab(*b) > C)
        rc = dl_errorf(err, DL_ERR_SPEC, "the vocabulary '%s' has %d tokens, the network only %d classes",
                       cmd->vocab, dl_bpe_vocab(*b), C);
    return rc;
}

/* The prompt's tokens (its UTF-8 repaired) into s: BPE's after the
 * template's (a tokenizer.json's), with <|endoftext|> for an empty prompt
 * where there are none; or its bytes, a newline for an empty one. */
static int prompt_tokens(struct dl_bpe *b, const char *prompt, struct dl_token_stream *s, struct dl_error *err)
{
    const char *text = prompt ? prompt : "";
    size_t n = strlen(text), len = 0;
    unsigned char *fixed = malloc(3 * n + 1);
    if (!fixed)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    dl_utf8_repair((const unsigned char *)text, n, fixed, &len);
    int rc = DL_OK, n_prefix = 0;
    const int32_t *prefix = b ? dl_bpe_template_prefix(b, &n_prefix) : NULL;
    if (b && !(rc = dl_token_stream_reserve(s, n_prefix + 1, err))) {
        for (int i = 0; i < n_prefix; i++)
            s->id[s->n++] = prefix[i];
        if (len)
            rc = dl_bpe_encode(b, (const char *)fixed, len, s, err);
        else if (!n_prefix && dl_bpe_end_of_text(b) >= 0)
            s->id[s->n++] = dl_bpe_end_of_text(b);
        else if (!n_prefix)
            rc = dl_errorf(err, DL_ERR_SPEC, "an empty prompt, and the vocabulary has no token to start from: "
                           "give --prompt");
    } else if (!rc && !(rc = dl_token_stream_reserve(s, (long)len + 1, err))) {
        for (size_t i = 0; i < len; i++)
            s->id[s->n++] = fixed[i];
        if (!len)
            s->id[s->n++] = '\n';
    }
    free(fixed);
    return rc;
}

/* The window's executor with the weights, its buffers and the sampler. */
static int start(struct generate_command *cmd, const struct dl_net *net, struct generation *gen,
                 struct dl_error *err)
{
    const struct dl_graph *g = &net->graph;
    int T = g->input.h, C = g->classes;
    struct dl_exec_options eo;
    dl_net_exec_options(&cmd->net_options, &eo);
    if (cmd->use_cache) /* the window's attention layers keep caches for the one-position executor */
        eo.decode_positions = T;
    int rc = dl_exec_init(&gen->e, g, 1, net->train.seed, &eo, err);
    gen->have_exec = !rc;
    if (!rc)
        rc = dl_load_weights(cmd->checkpoint, cmd->init_from, &gen->e, g, err);
    gen->x = rc ? NULL : calloc((size_t)T, sizeof *gen->x);
    gen->scores = rc ? NULL : calloc((size_t)C, sizeof *gen->scores);
    gen->labels = rc ? NULL : calloc((size_t)T, sizeof *gen->labels);
    if (!rc && (!gen->x || !gen->scores || !gen->labels))
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    if (!rc && !(rc = dl_sampler_init(&gen->z, C, cmd->temperature, cmd->top_k, net->train.seed, err)))
        gen->have_sampler = 1;
    return rc;
}

/* Draws and prints the tokens; t1: when the prompt's tokens were in. */
static int draw_tokens(const struct generate_command *cmd, struct generation *gen, int T, double *t1,
                       struct dl_error *err)
{
    int rc = DL_OK;
    for (int i = 0; !rc && i < cmd->max_tokens; i++) {
        rc = gen->dec.on ? cached_scores(&gen->dec, &gen->s, gen->x, gen->labels, gen->scores, err)
                         : dl_sample_window_scores(&gen->e, T, gen->s.id, gen->s.n, gen->x, gen->labels,
                                                   gen->scores, err);
        if (i == 0)
            *t1 = dl_clock_now(); /* the prompt's tokens are in */
        if (!rc)
            rc = dl_token_stream_reserve(&gen->s, 1, err);
        if (!rc) {
            int id = dl_sampler_draw(&gen->z, gen->scores);
            gen->s.id[gen->s.n++] = id;
            dl_sample_emit(stdout, gen->b, id);
            fflush(stdout);
        }
    }
    return rc;
}

static void finish(struct generation *gen)
{
    close_cached(&gen->dec);
    free(gen->x), free(gen->scores), free(gen->labels);
    if (gen->have_sampler)
        dl_sampler_free(&gen->z);
    dl_token_stream_free(&gen->s);
    dl_bpe_free(gen->b);
    if (gen->have_exec)
        dl_exec_free(&gen->e);
}

int dl_cli_generate(int argc, char **argv)
{
    struct generate_command cmd = {.vocab = "gpt2", .max_tokens = 64, .use_cache = 1, .temperature = 1};
    dl_net_options_init(&cmd.net_options);
    int status = parse_args(argc, argv, &cmd);
    if (status >= 0)
        return status;
    struct dl_net net;
    status = dl_net_options_load(&cmd.net_options, &net, PROG);
    if (status)
        return status;
    struct dl_error err = {0};
    struct generation gen = {0};
    int T = net.graph.input.h;
    int rc = open_vocabulary(&cmd, &net.graph, &gen.b, &err);
    if (!rc)
        rc = prompt_tokens(gen.b, cmd.prompt, &gen.s, &err);
    if (!rc)
        rc = start(&cmd, &net, &gen, &err);
    if (!rc)
        fwrite(cmd.prompt ? cmd.prompt : "", 1, cmd.prompt ? strlen(cmd.prompt) : 0, stdout);
    if (!rc && cmd.use_cache)
        open_cached(&cmd.net_options, cmd.checkpoint, cmd.init_from, &gen.e, T, &gen.dec);
    double t0 = dl_clock_now(), t1 = t0;
    long prompt_tokens_n = gen.s.n;
    if (!rc)
        rc = draw_tokens(&cmd, &gen, T, &t1, &err);
    int n = cmd.max_tokens;
    if (!rc && cmd.verbose)
        fprintf(stderr, "\n" PROG ": %d tokens in %.2f s (%.1f ms a token after the first, which took %.1f ms with "
                "the prompt's %ld; a window of %d, %s)\n", n, dl_clock_now() - t0,
                n > 1 ? 1e3 * (dl_clock_now() - t1) / (n - 1) : 0.0, 1e3 * (t1 - t0), prompt_tokens_n,
                T, gen.dec.on ? "key/value cache" : "no cache: every token runs the window");
    finish(&gen);
    dl_net_free(&net);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}
