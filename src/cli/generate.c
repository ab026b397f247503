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

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/rng.h"
#include "data/bpe.h"
#include "data/utf8.h"
#include "exec/exec.h"
#include "train/sample.h"

#define PROG "dltrain generate"

enum { OPT_CHECKPOINT = DL_OPT_FIRST_LOCAL, OPT_INIT_FROM, OPT_NO_CACHE, OPT_PROMPT, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_K, OPT_VOCAB, OPT_VERBOSE };

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
          "  --vocab NAME|FILE     the BPE vocabulary (default gpt2)\n"
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
        const void *one = &s->id[d->base + d->pos]; /* the executor's input: one i32 */
        d->e.decode.position0 = d->pos;
        dl_exec_forward(&d->e, one, &label, 1, 0);
        if (d->e.status)
            return dl_errorf(err, d->e.status, "%s", d->e.err.msg);
        d->pos++;
    }
    return dl_exec_scores_at(&d->e, 0, 0, scores, err);
}

int dl_cli_generate(int argc, char **argv)
{
    static const struct option opts[] = {DL_NET_OPTIONS,
                                         {"checkpoint", required_argument, 0, OPT_CHECKPOINT},
                                         {"init-from", required_argument, 0, OPT_INIT_FROM},
                                         {"no-cache", no_argument, 0, OPT_NO_CACHE},
                                         {"prompt", required_argument, 0, OPT_PROMPT},
                                         {"max-tokens", required_argument, 0, OPT_MAX_TOKENS},
                                         {"temperature", required_argument, 0, OPT_TEMPERATURE},
                                         {"top-k", required_argument, 0, OPT_TOP_K},
                                         {"vocab", required_argument, 0, OPT_VOCAB},
                                         {"verbose", no_argument, 0, OPT_VERBOSE},
                                         {0, 0, 0, 0}};
    struct dl_net_options no;
    dl_net_options_init(&no);
    const char *checkpoint = NULL, *init_from = NULL, *prompt = NULL, *vocab = "gpt2";
    int max_tokens = 64, opt, use_cache = 1, verbose = 0;
    struct dl_sampler z;
    double temperature = 1;
    int top_k = 0;
    struct dl_error err = {0};
    optind = 1;
    while ((opt = dl_getopt(argc, argv, opts, PROG)) != -1) {
        int r = dl_net_option(&no, opt, optarg, PROG);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        int rc = DL_OK;
        switch (opt) {
        case OPT_CHECKPOINT: checkpoint = optarg; break;
        case OPT_INIT_FROM: init_from = optarg; break;
        case OPT_NO_CACHE: use_cache = 0; break;
        case OPT_PROMPT: prompt = optarg; break;
        case OPT_MAX_TOKENS: rc = dl_parse_int("--max-tokens", optarg, 0, 1 << 24, &max_tokens, &err); break;
        case OPT_TEMPERATURE: rc = dl_parse_double("--temperature", optarg, 0, 1e6, &temperature, &err); break;
        case OPT_TOP_K: rc = dl_parse_int("--top-k", optarg, 0, 1 << 30, &top_k, &err); break;
        case OPT_VOCAB: vocab = optarg; break;
        case OPT_VERBOSE: verbose = 1; break;
        case DL_OPT_HELP: help(); return 0;
        default: fprintf(stderr, "Try '" PROG " --help'.\n"); return 2;
        }
        if (dl_option_refused(PROG, rc, &err))
            return 2;
    }
    if (!checkpoint == !init_from) {
        fprintf(stderr, PROG ": %s\n", checkpoint ? "--checkpoint and --init-from: give one"
                : "no weights given: --checkpoint FILE or DIR (a run's --checkpoint-dir), or --init-from FILE "
                  "(Hugging Face's GPT-2 safetensors)");
        return 2;
    }
    struct dl_net net;
    int status = dl_net_options_load(&no, &net, PROG);
    if (status)
        return status;
    const struct dl_graph *g = &net.graph;
    int T = g->input.h, C = g->classes, rc = DL_OK;
    if (g->input.dtype != DL_I32 || g->positions != T || T < 1)
        rc = dl_errorf(&err, DL_ERR_SPEC, "%s reads no token ids with a loss at every position (input [T], dtype "
                       "i32): nothing to generate from", no.net_path);
    struct dl_bpe *b = NULL;
    if (!rc && C != 256) {
        rc = dl_bpe_open(vocab, &b, &err);
        if (!rc && dl_bpe_vocab(b) > C)
            rc = dl_errorf(&err, DL_ERR_SPEC, "the vocabulary '%s' has %d tokens, the network only %d classes", vocab,
                           dl_bpe_vocab(b), C);
    }
    /* the prompt's tokens */
    struct dl_token_stream s = {0};
    const char *text = prompt ? prompt : "";
    size_t n = strlen(text), len = 0;
    unsigned char *fixed = rc ? NULL : malloc(3 * n + 1);
    if (!rc && !fixed)
        rc = dl_errorf(&err, DL_ERR_NOMEM, "out of memory");
    if (!rc)
        dl_utf8_repair((const unsigned char *)text, n, fixed, &len);
    if (!rc && b && (!prompt || !*prompt) && !(rc = dl_token_stream_reserve(&s, 1, &err)))
        s.id[s.n++] = dl_bpe_end_of_text(b);
    else if (!rc && b)
        rc = dl_bpe_encode(b, (const char *)fixed, len, &s, &err);
    else if (!rc && !(rc = dl_token_stream_reserve(&s, (long)len + 1, &err))) {
        for (size_t i = 0; i < len; i++)
            s.id[s.n++] = fixed[i];
        if (!len)
            s.id[s.n++] = '\n';
    }
    free(fixed);
    struct dl_exec e;
    struct dl_exec_options eo;
    dl_net_exec_options(&no, &eo);
    int have_exec = 0;
    if (use_cache) /* the window's attention layers keep caches for the one-position executor */
        eo.decode_positions = T;
    if (!rc && !(rc = dl_exec_init(&e, g, 1, net.train.seed, &eo, &err)))
        have_exec = 1;
    if (!rc)
        rc = dl_load_weights(checkpoint, init_from, &e, g, &err);
    int32_t *x = rc ? NULL : calloc((size_t)T, sizeof *x);
    float *scores = rc ? NULL : calloc((size_t)C, sizeof *scores);
    int *labels = rc ? NULL : calloc((size_t)T, sizeof *labels);
    int have_sampler = 0;
    if (!rc && (!x || !scores || !labels))
        rc = dl_errorf(&err, DL_ERR_NOMEM, "out of memory");
    if (!rc && !(rc = dl_sampler_init(&z, C, temperature, top_k, net.train.seed, &err)))
        have_sampler = 1;
    if (!rc)
        fwrite(prompt ? prompt : "", 1, prompt ? strlen(prompt) : 0, stdout);
    struct cached dec = {0};
    if (!rc && use_cache)
        open_cached(&no, checkpoint, init_from, &e, T, &dec);
    double t0 = dl_clock_now(), t1 = t0;
    long prompt_tokens = s.n;
    for (int i = 0; !rc && i < max_tokens; i++) {
        rc = dec.on ? cached_scores(&dec, &s, x, labels, scores, &err)
                    : dl_sample_window_scores(&e, T, s.id, s.n, x, labels, scores, &err);
        if (i == 0)
            t1 = dl_clock_now(); /* the prompt's tokens are in */
        if (!rc)
            rc = dl_token_stream_reserve(&s, 1, &err);
        if (!rc) {
            int id = dl_sampler_draw(&z, scores);
            s.id[s.n++] = id;
            dl_sample_emit(stdout, b, id);
            fflush(stdout);
        }
    }
    if (!rc && verbose)
        fprintf(stderr, "\n" PROG ": %d tokens in %.2f s (%.1f ms a token after the first, which took %.1f ms with "
                "the prompt's %ld; a window of %d, %s)\n", max_tokens, dl_clock_now() - t0,
                max_tokens > 1 ? 1e3 * (dl_clock_now() - t1) / (max_tokens - 1) : 0.0, 1e3 * (t1 - t0), prompt_tokens,
                T, dec.on ? "key/value cache" : "no cache: every token runs the window");
    close_cached(&dec);
    free(x), free(scores), free(labels);
    if (have_sampler)
        dl_sampler_free(&z);
    dl_token_stream_free(&s);
    dl_bpe_free(b);
    if (have_exec)
        dl_exec_free(&e);
    dl_net_free(&net);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}
