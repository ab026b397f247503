/* pretokenize.h: a byte-level BPE's pre-tokenizer, the steps that cut text
 * into the pieces its merges never cross.  Each step is a regular
 * expression (PCRE2 with Unicode properties) and what becomes of its
 * matches, as Hugging Face tokenizers' `Split` says (Isolated: matches and
 * the text between them are pieces; Removed: the text between only;
 * MergedWithPrevious / MergedWithNext: a match joins the text before /
 * after it; Contiguous: runs of matches and runs of the rest; inverted:
 * the text between matches is taken for the matches).  Steps apply in order
 * to every piece of the step before; empty pieces are dropped.  tiktoken's
 * encodings are one Isolated step of their pattern (its matches cover all
 * text), GPT-2's tokenizer.json too (the ByteLevel pre-tokenizer's), Llama
 * 3's its Split pattern, SmolLM2's single digits then GPT-2's pattern.
 * \s and \S in a pattern are Unicode's White_Space and its complement, as
 * tiktoken's Rust regex and the tokenizers library's Oniguruma read them
 * (PCRE2's own \s takes U+180E too). */
#ifndef DL_DATA_PRETOKENIZE_H
#define DL_DATA_PRETOKENIZE_H

#include <stddef.h>

#include "core/error.h"

enum dl_split_behavior {
    DL_SPLIT_ISOLATED,
    DL_SPLIT_REMOVED,
    DL_SPLIT_MERGED_WITH_PREVIOUS,
    DL_SPLIT_MERGED_WITH_NEXT,
    DL_SPLIT_CONTIGUOUS
};

/* GPT-2's pattern as Hugging Face's ByteLevel pre-tokenizer writes it. */
extern const char dl_pretokenize_gpt2_pattern[];

struct dl_pretokenizer;

struct dl_pretokenizer *dl_pretokenizer_new(void);

/* Appends a step: pattern (a regular expression, or text matched as it is
 * when literal) and what becomes of its matches.  A pattern PCRE2 cannot
 * compile is DL_ERR_DATA naming where in it. */
int dl_pretokenizer_add(struct dl_pretokenizer *p, const char *pattern, int literal, enum dl_split_behavior behavior,
                        int invert, struct dl_error *err);

/* Calls piece(ctx, at, len) on each piece of text[0..n) (valid UTF-8), in
 * order, with at its offset in text; stops at the first nonzero return and
 * returns it.  A matching error (PCRE2's limits) is DL_ERR_DATA. */
int dl_pretokenize(const struct dl_pretokenizer *p, const char *text, size_t n,
                   int (*piece)(void *ctx, size_t at, size_t len, struct dl_error *err), void *ctx,
                   struct dl_error *err);

void dl_pretokenizer_free(struct dl_pretokenizer *p);

#endif
