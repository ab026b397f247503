/* pretokenize.c: the pre-tokenizer's steps (see pretokenize.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretokenize.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char dl_pretokenize_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define MAX_STEPS 8

struct step {
    pcre2_code *re;
    enum dl_split_behavior behavior;
    int invert;
};

struct dl_pretokenizer {
    struct step step[MAX_STEPS];
    int n;
};

struct dl_pretokenizer *dl_pretokenizer_new(void)
{
    return calloc(1, sizeof(struct dl_pretokenizer));
}

/* pattern with \s and \S as Unicode's White_Space and its complement:
 * what Rust's regex (tiktoken) and Oniguruma (tokenizers) match, where
 * PCRE2's \s also takes U+180E; NULL when out of memory. */
static char *white_space_as_unicode(const char *pattern)
{
    size_t n = strlen(pattern);
    char *out = malloc(5 * n + 1), *o = out;
    for (size_t i = 0; out && i < n; i++) {
        if (pattern[i] == '\\' && (pattern[i + 1] == 's' || pattern[i + 1] == 'S')) {
            o += sprintf(o, "\\%c{WSpace}", pattern[i + 1] == 's' ? 'p' : 'P');
            i++;
        } else {
            *o++ = pattern[i];
            if (pattern[i] == '\\' && i + 1 < n)
                *o++ = pattern[++i];
        }
    }
    if (out)
        *o = '\0';
    return out;
}

int dl_pretokenizer_add(struct dl_pretokenizer *p, const char *pattern, int literal, enum dl_split_behavior behavior,
                        int invert, struct dl_error *err)
{
    if (p->n == MAX_STEPS)
        return dl_errorf(err, DL_ERR_DATA, "more than %d pre-tokenizer steps", MAX_STEPS);
    int code;
    PCRE2_SIZE at;
    uint32_t flags = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
    char *unicode = literal ? NULL : white_space_as_unicode(pattern);
    if (!literal && !unicode)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for the pre-tokenizer");
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pattern : unicode), PCRE2_ZERO_TERMINATED, flags, &code,
                                   &at, NULL);
    free(unicode);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return dl_errorf(err, DL_ERR_DATA, "the pre-tokenizer pattern \"%.200s\" at character %zu: %s", pattern,
                         (size_t)at, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT it still matches, slower */
    p->step[p->n++] = (struct step){re, behavior, invert};
    return DL_OK;
}

void dl_pretokenizer_free(struct dl_pretokenizer *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        pcre2_code_free(p->step[i].re);
    free(p);
}

/* One step's pass over a piece: the segments (matches and the text between
 * them) come in order to fold(), which keeps at most one piece pending and
 * hands finished pieces to the next step. */
struct pass {
    const struct dl_pretokenizer *p;
    int step;
    const char *text;
    int (*piece)(void *ctx, size_t at, size_t len, struct dl_error *err);
    void *ctx;
    pcre2_match_data **md; /* one a step */
    size_t start, end;     /* the pending piece */
    int pending, pending_match, previous_match;
};

static int run(const struct pass *outer, int step, size_t at, size_t len, struct dl_error *err);

static int emit(struct pass *s, size_t start, size_t end, struct dl_error *err)
{
    return run(s, s->step + 1, start, end - start, err);
}

static int flush(struct pass *s, struct dl_error *err)
{
    if (!s->pending)
        return 0;
    s->pending = 0;
    return emit(s, s->start, s->end, err);
}

static int hold(struct pass *s, size_t start, size_t end, int match)
{
    s->pending = 1, s->start = start, s->end = end, s->pending_match = match;
    return 0;
}

/* The next segment [start, end), a match or not, as Hugging Face's
 * SplitDelimiterBehavior folds it. */
static int fold(struct pass *s, size_t start, size_t end, int match, struct dl_error *err)
{
    int rc = 0;
    match ^= s->p->step[s->step].invert;
    switch (s->p->step[s->step].behavior) {
    case DL_SPLIT_ISOLATED:
        rc = emit(s, start, end, err);
        break;
    case DL_SPLIT_REMOVED:
        rc = match ? 0 : emit(s, start, end, err);
        break;
    case DL_SPLIT_MERGED_WITH_PREVIOUS:
        if (match && !s->previous_match && s->pending)
            s->end = end;
        else if (!(rc = flush(s, err)))
            hold(s, start, end, match);
        break;
    case DL_SPLIT_CONTIGUOUS:
        if (match == s->previous_match && s->pending)
            s->end = end;
        else if (!(rc = flush(s, err)))
            hold(s, start, end, match);
        break;
    case DL_SPLIT_MERGED_WITH_NEXT:
        if (s->pending && s->pending_match && !match) {
            s->pending = 0;
            rc = emit(s, s->start, end, err);
        } else if (!(rc = flush(s, err)))
            rc = match ? hold(s, start, end, match) : emit(s, start, end, err);
        break;
    }
    s->previous_match = match;
    return rc;
}

/* Step `step` over the piece [at, at + len) of outer's text. */
static int run(const struct pass *outer, int step, size_t at, size_t len, struct dl_error *err)
{
    const struct dl_pretokenizer *p = outer->p;
    if (len == 0)
        return 0;
    if (step == p->n)
        return outer->piece(outer->ctx, at, len, err);
    struct pass s = *outer;
    s.step = step, s.pending = 0, s.previous_match = 0;
    pcre2_match_data *md = s.md[step];
    const char *subject = s.text + at;
    size_t prev = 0, from = 0;
    int rc = 0;
    while (!rc && from <= len) {
        int got = pcre2_match(p->step[step].re, (PCRE2_SPTR)subject, len, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (got == PCRE2_ERROR_NOMATCH)
            break;
        if (got < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(got, msg, sizeof msg);
            rc = dl_errorf(err, DL_ERR_DATA, "the pre-tokenizer at byte %zu: %s", at + from, (char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[0] > prev)
            rc = fold(&s, at + prev, at + ov[0], 0, err);
        if (!rc)
            rc = fold(&s, at + ov[0], at + ov[1], 1, err);
        prev = ov[1];
        from = ov[1];
        if (ov[1] == ov[0]) /* an empty match: on past one character */
            for (from++; from < len && ((unsigned char)subject[from] & 0xc0) == 0x80; from++)
                ;
    }
    if (!rc && prev < len)
        rc = fold(&s, at + prev, at + len, 0, err);
    if (!rc)
        rc = flush(&s, err);
    return rc;
}

int dl_pretokenize(const struct dl_pretokenizer *p, const char *text, size_t n,
                   int (*piece)(void *ctx, size_t at, size_t len, struct dl_error *err), void *ctx,
                   struct dl_error *err)
{
    pcre2_match_data *md[MAX_STEPS] = {0};
    struct pass s = {.p = p, .text = text, .piece = piece, .ctx = ctx, .md = md};
    int rc = 0;
    for (int i = 0; !rc && i < p->n; i++)
        if (!(md[i] = pcre2_match_data_create_from_pattern(p->step[i].re, NULL)))
            rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory for the pre-tokenizer");
    if (!rc)
        rc = run(&s, 0, 0, n, err);
    for (int i = 0; i < p->n; i++)
        pcre2_match_data_free(md[i]);
    return rc;
}
