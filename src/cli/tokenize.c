/* tokenize.c: `dltrain tokenize [--vocab gpt2 | --tokenizer tokenizer.json]
 * -o OUT FILE|DIR...`: a byte-level BPE (data/bpe.h: GPT-2's, or a Hugging
 * Face tokenizer.json's, data/hf_tokenizer.h) over a corpus, written as
 * llm.c's token files (data/token_file.h) that the `tokens` dataset reads.
 * Every file is a document: the tokenizer's template around it (Llama 3's
 * <|begin_of_text|> before), or where it has none <|endoftext|> before it
 * (llm.c's data scripts do the same); folders give their files in path
 * order.  Bytes that are not UTF-8
 * are replaced by U+FFFD first, as Python's decode(errors='replace'), and
 * counted.  OUT is a folder (train.bin and val.bin, the last --validation
 * of the tokens) or one .bin file.  --decode FILE prints a token file's
 * text. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "data/bpe.h"
#include "data/path_list.h"
#include "data/token_file.h"
#include "data/utf8.h"

#define PROG "dltrain tokenize"

static void help(void)
{
    fputs("Usage: dltrain tokenize [--vocab gpt2 | --tokenizer tokenizer.json] -o OUT FILE|DIR...\n"
          "       dltrain tokenize [--vocab gpt2 | --tokenizer tokenizer.json] --decode FILE.bin\n"
          "Encodes text with a byte-level BPE (GPT-2's, the same tokens as tiktoken's gpt2 encoding; or a\n"
          "Hugging Face tokenizer.json's, the same tokens as the tokenizers library) into llm.c's token\n"
          "files, which `--dataset tokens --data OUT` trains on.  Each file is a document: the tokenizer's\n"
          "template around it (Llama 3's <|begin_of_text|> before), or <|endoftext|> before it where the\n"
          "template adds none; a folder gives its files in path order; bytes that are not UTF-8 become\n"
          "U+FFFD.\n\n"
          "  -o, --output OUT      a folder: OUT/train.bin and OUT/val.bin; or a file name ending in .bin\n"
          "  --validation F        the fraction of the tokens (the last) that val.bin gets (default 0.1;\n"
          "                        0: train.bin only)\n"
          "  --vocab NAME|FILE     a .tiktoken vocabulary (default gpt2: vocab/gpt2.tiktoken, which\n"
          "                        tools/deps fetches) or a tokenizer.json\n"
          "  --tokenizer FILE      a Hugging Face tokenizer.json (byte-level BPE; its added tokens are found\n"
          "                        in the text, as the library does)\n"
          "  --no-eot              nothing around each file (no template, no <|endoftext|>)\n"
          "  --decode FILE.bin     write the text of a token file to stdout instead\n",
          stdout);
}

static int read_file(const char *path, unsigned char **buf, size_t *n, struct dl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    for (size_t got = 1; b && got;) {
        if (len == cap) {
            unsigned char *grown = realloc(b, cap * 2);
            if (!grown) {
                free(b);
                b = NULL;
                break;
            }
            b = grown, cap *= 2;
        }
        got = fread(b + len, 1, cap - len, f);
        len += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    if (bad) {
        free(b);
        return dl_errorf(err, DL_ERR_IO, "%s: read error", path);
    }
    *buf = b, *n = len;
    return DL_OK;
}

static int decode(const struct dl_bpe *b, const char *path, struct dl_error *err)
{
    struct dl_token_stream s = {0};
    int rc = dl_token_file_read(path, &s, NULL, err);
    for (long i = 0; !rc && i < s.n; i++) {
        size_t len;
        const unsigned char *bytes = dl_bpe_bytes(b, s.id[i], &len);
        if (!bytes)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: token %ld is %d, not in the vocabulary (%d tokens)", path, i,
                           s.id[i], dl_bpe_vocab(b));
        else
            fwrite(bytes, 1, len, stdout);
    }
    dl_token_stream_free(&s);
    return rc;
}

/* The token ids of every file of l. */
static int encode_files(const struct dl_bpe *b, const struct dl_path_list *l, int eot, struct dl_token_stream *s,
                        size_t *bytes, size_t *replaced, struct dl_error *err)
{
    int rc = DL_OK;
    for (int i = 0; !rc && i < l->n; i++) {
        unsigned char *raw = NULL, *fixed = NULL;
        size_t n = 0, len = 0;
        rc = read_file(l->path[i], &raw, &n, err);
        if (rc)
            break;
        fixed = malloc(3 * n + 1);
        if (!fixed)
            rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", l->path[i]);
        if (!rc) {
            *replaced += dl_utf8_repair(raw, n, fixed, &len);
            *bytes += n;
        }
        if (!rc)
            rc = eot ? dl_bpe_encode_document(b, (const char *)fixed, len, s, err)
                     : dl_bpe_encode(b, (const char *)fixed, len, s, err);
        if (rc)
            dl_error_prefix(err, "%s", l->path[i]);
        free(raw);
        free(fixed);
    }
    return rc;
}

static int write_split(const char *out, const struct dl_token_stream *s, double validation, char *said, size_t size,
                       struct dl_error *err)
{
    size_t len = strlen(out);
    if (len > 4 && strcmp(out + len - 4, ".bin") == 0) {
        snprintf(said, size, "%s (%ld tokens)", out, s->n);
        return dl_token_file_write(out, s->id, s->n, err);
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot make the folder: %s", out, strerror(errno));
    char train[4200], val[4200];
    snprintf(train, sizeof train, "%s/train.bin", out);
    snprintf(val, sizeof val, "%s/val.bin", out);
    long cut = s->n - (long)((double)s->n * validation);
    int rc = dl_token_file_write(train, s->id, cut, err);
    if (!rc && validation > 0)
        rc = dl_token_file_write(val, s->id + cut, s->n - cut, err);
    snprintf(said, size, "%s (%ld tokens)%s%s (%ld tokens)", train, cut, validation > 0 ? ", " : "",
             validation > 0 ? val : "", s->n - cut);
    return rc;
}

/* The command line. */
struct tokenize_command {
    const char *out, *vocab, *decode_path;
    double validation; /* the share of the tokens in val.bin */
    int eot;           /* the template (or <|endoftext|>) around each file */
};

static const struct dl_option options[] = {
    DL_OPTION_OUTPUT(struct tokenize_command, out),
    DL_OPTION_DOUBLE("validation", struct tokenize_command, validation, 0, 0.999),
    DL_OPTION_STRING("vocab", struct tokenize_command, vocab),
    DL_OPTION_STRING("tokenizer", struct tokenize_command, vocab),
    DL_OPTION_FLAG("no-eot", struct tokenize_command, eot, 0),
    DL_OPTION_STRING("decode", struct tokenize_command, decode_path),
    DL_OPTION_HELP,
    DL_OPTION_END};

/* Parses argv into cmd (an output and texts, or --decode); -1 to go on with
 * *first the first text, else the exit status. */
static int parse_args(struct tokenize_command *cmd, int argc, char **argv, int *first)
{
    struct dl_command_line line = {PROG, options, cmd, NULL, help, .repeat_try = 1};
    int status = dl_options_parse(&line, argc, argv, first);
    if (status >= 0)
        return status;
    if (!cmd->decode_path && (!cmd->out || *first >= argc)) {
        fprintf(stderr, PROG ": %s\nTry '" PROG " --help'.\n",
                !cmd->out ? "no output given: -o DIR (train.bin, val.bin) or -o FILE.bin" : "no text given: FILE or DIR");
        return 2;
    }
    return -1;
}

int dl_cli_tokenize(int argc, char **argv)
{
    struct tokenize_command cmd = {.vocab = "gpt2", .validation = 0.1, .eot = 1};
    int first, status = parse_args(&cmd, argc, argv, &first);
    if (status >= 0)
        return status;
    struct dl_error err = {0};
    struct dl_bpe *b;
    if (dl_option_refused(PROG, dl_bpe_open(cmd.vocab, &b, &err), &err))
        return 2;
    if (cmd.decode_path) {
        int rc = decode(b, cmd.decode_path, &err);
        dl_bpe_free(b);
        /* a malformed or unreadable token file fails as in training: 1 */
        return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
    }
    double t0 = dl_clock_now();
    struct dl_path_list files = {0};
    struct dl_token_stream s = {0};
    size_t bytes = 0, replaced = 0;
    int rc = DL_OK;
    for (int i = first; !rc && i < argc; i++)
        rc = dl_path_list_add(&files, argv[i], &err);
    if (!rc && files.n == 0)
        rc = dl_errorf(&err, DL_ERR_DATA, "no file below %s", argv[first]);
    if (!rc)
        rc = encode_files(b, &files, cmd.eot, &s, &bytes, &replaced, &err);
    char said[9000] = "";
    if (!rc)
        rc = write_split(cmd.out, &s, cmd.validation, said, sizeof said, &err);
    if (!rc)
        printf("tokenize: %d file%s, %zu bytes (%zu ill-formed UTF-8 sequence%s replaced by U+FFFD), %ld tokens, "
               "%.2f bytes per token, in %.1f s -> %s\n", files.n, files.n == 1 ? "" : "s", bytes, replaced,
               replaced == 1 ? "" : "s", s.n, s.n ? (double)bytes / (double)s.n : 0.0, dl_clock_now() - t0, said);
    dl_path_list_free(&files);
    dl_token_stream_free(&s);
    dl_bpe_free(b);
    return dl_option_refused(PROG, rc, &err) ? (rc == DL_ERR_SPEC ? 2 : 1) : 0; /* a file not written: 1 */
}
