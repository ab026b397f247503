/* tiktoken_file.c: .tiktoken vocabularies (one "BASE64-BYTES RANK" line a
 * token, ranks from 0) as GPT-2's tokenizer (see bpe.h): GPT-2's
 * pre-tokenizer, ranks that merge, <|endoftext|> the id after the last
 * rank, before each document and never found in text (tiktoken's
 * encode_ordinary). */
#include "data/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/shipped.h"
#include "data/hf_tokenizer.h"
#include "data/imagefolder.h"

/* GPT-2's pre-tokenizer, as tiktoken writes it for r50k_base: `$` is the end
 * of the text only (PCRE2_DOLLAR_ENDONLY), \s and \p{..} are Unicode's
 * (PCRE2_UCP). */
static const char pattern[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s";

static const char end_of_text[] = "<|endoftext|>";

/* GPT-2's vocabulary of n ranks: bytes[r][0..len[r]) has rank r. */
static int gpt2(const char *name, const unsigned char *const *bytes, const size_t *len, int32_t n, struct dl_bpe **out,
                struct dl_error *err)
{
    struct dl_pretokenizer *pre = dl_pretokenizer_new();
    if (!pre)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", name);
    int rc = dl_pretokenizer_add(pre, pattern, 0, DL_SPLIT_ISOLATED, 0, err);
    if (rc) {
        dl_pretokenizer_free(pre);
        return rc;
    }
    struct dl_bpe_added eot = {n, end_of_text, sizeof end_of_text - 1, 0};
    struct dl_bpe_recipe r = {.name = name, .n = n, .bytes = bytes, .len = len, .whole_first = 1, .pre = pre,
                              .added = &eot, .n_added = 1, .separator = n};
    return dl_bpe_build(&r, out, err);
}

static int b64(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 text[0..n) into out; returns the length or -1. */
static long unbase64(const char *text, size_t n, unsigned char *out)
{
    long o = 0;
    unsigned bits = 0, have = 0;
    size_t i = 0;
    for (; i < n && text[i] != '='; i++) {
        int v = b64((unsigned char)text[i]);
        if (v < 0)
            return -1;
        bits = bits << 6 | (unsigned)v;
        have += 6;
        if (have >= 8) {
            have -= 8;
            out[o++] = (unsigned char)(bits >> have);
            bits &= (1u << have) - 1;
        }
    }
    for (; i < n; i++)
        if (text[i] != '=')
            return -1;
    return n % 4 == 0 && o > 0 ? o : -1;
}

/* path's bytes, terminated (strtol reads the last rank). */
static int read_text(const char *path, char **text, size_t *n, struct dl_error *err)
{
    unsigned char *buf;
    int rc = dl_read_file(path, &buf, n, err);
    if (rc)
        return rc;
    char *t = realloc(buf, *n + 1);
    if (!t) {
        free(buf);
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    }
    t[*n] = '\0';
    *text = t;
    return DL_OK;
}

int dl_bpe_load(const char *path, struct dl_bpe **out, struct dl_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t n = 0;
    int rc = read_text(path, &text, &n, err);
    if (rc)
        return rc;
    long lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    lines += n && text[n - 1] != '\n';
    unsigned char *pool = malloc(n + 1);
    const unsigned char **bytes = malloc(sizeof *bytes * (size_t)(lines + 1));
    size_t *len = malloc(sizeof *len * (size_t)(lines + 1)), used = 0;
    if (!pool || !bytes || !len)
        rc = dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    long line = 0;
    for (char *p = text, *end = text + n; !rc && p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end, *space = memchr(p, ' ', (size_t)(stop - p));
        char *tail;
        long rank = space ? strtol(space + 1, &tail, 10) : -1;
        long got = space ? unbase64(p, (size_t)(space - p), pool + used) : -1;
        if (got < 0 || space + 1 == tail || (tail != stop && !(tail + 1 == stop && *tail == '\r')))
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%ld: expected \"BASE64 RANK\" (a .tiktoken vocabulary)", path,
                           line + 1);
        else if (rank != line)
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%ld: rank %ld, expected %ld (ranks count up from 0, one per line)",
                           path, line + 1, rank, line);
        else {
            bytes[line] = pool + used, len[line] = (size_t)got;
            used += (size_t)got;
        }
        p = stop + 1;
    }
    free(text);
    if (!rc)
        rc = gpt2(path, bytes, len, (int32_t)line, out, err);
    free(pool);
    free(bytes);
    free(len);
    return rc;
}

int dl_bpe_make(const unsigned char *const *bytes, const size_t *len, int32_t n, struct dl_bpe **out,
                struct dl_error *err)
{
    return gpt2("the vocabulary", bytes, len, n, out, err);
}

int dl_bpe_open(const char *name, struct dl_bpe **out, struct dl_error *err)
{
    char rel[1024], path[4096], looked[4096] = "";
    size_t len = strlen(name);
    if (len > 5 && strcmp(name + len - 5, ".json") == 0)
        return dl_hf_tokenizer_load(name, out, err);
    if (strchr(name, '/') || access(name, R_OK) == 0)
        return dl_bpe_load(name, out, err);
    snprintf(rel, sizeof rel, "vocab/%s.tiktoken", name);
    if (dl_shipped_find(rel, path, sizeof path, looked, sizeof looked))
        return dl_bpe_load(path, out, err);
    *out = NULL;
    return dl_errorf(err, DL_ERR_IO, "vocabulary '%s': no %s.tiktoken (looked in %s): tools/deps fetches gpt2.tiktoken "
                     "(from the openai-whisper source distribution on PyPI) into vocab/; or give a .tiktoken file's "
                     "path or a Hugging Face tokenizer.json", name, name, looked[0] ? looked : "nowhere");
}
