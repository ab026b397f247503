/* bpe.h: byte-level byte-pair encoding, as tiktoken and Hugging Face
 * tokenizers do it.  A vocabulary maps byte strings to ids; text is cut into
 * pieces by a pre-tokenizer (data/pretokenize.h), and each piece's bytes
 * are merged pairwise, the pair of lowest rank first (the leftmost of equal
 * ranks), until no adjacent pair has a rank.  tiktoken ranks a pair by the
 * id of its joined bytes (the id is the rank: GPT-2's gpt2.tiktoken, equal
 * to tiktoken's `gpt2` encoding token for token); Hugging Face's BPE by
 * the pair's place in its merges list (data/hf_tokenizer.h reads
 * tokenizer.json).  Long pieces (a run of base64, digits or one letter) are
 * merged through a min-heap of the pairs, in O(n log n).  Added tokens
 * (Hugging Face's special tokens) are found in the text first, the longest
 * at the leftmost place, where the vocabulary says so. */
#ifndef DL_DATA_BPE_H
#define DL_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/pretokenize.h"
#include "data/token_file.h"

struct dl_bpe;

/* A token matched in text before the pre-tokenizer, as Hugging Face's added
 * vocabulary does: content[0..len), those with normalized 0 first. */
struct dl_bpe_added {
    int32_t id;
    const char *content;
    size_t len;
    int normalized;
};

/* What dl_bpe_build makes a vocabulary of. */
struct dl_bpe_recipe {
    const char *name;                   /* for messages */
    int32_t n;                          /* the model's ids: 0..n-1, each a byte string */
    const unsigned char *const *bytes;  /* by id */
    const size_t *len;
    const int32_t (*merges)[2];         /* pairs of ids, by rank; NULL: the id of the joined bytes ranks */
    long n_merges;
    int whole_first;                    /* a piece that is a token is that token (tiktoken; ignore_merges) */
    struct dl_pretokenizer *pre;        /* taken, freed with the vocabulary (or on an error) */
    const struct dl_bpe_added *added;   /* ids from 0 up, past n too */
    int n_added;
    int match_added;                    /* found in text (Hugging Face) or encoded as text (tiktoken's
                                         * encode_ordinary) */
    const int32_t *prefix, *suffix;     /* the ids a text gets before and after (the post-processor's template) */
    int n_prefix, n_suffix;
    int32_t separator;                  /* the id before each document when the template adds none: -1 none */
};

/* A vocabulary as r says.  Ids that are neither the model's nor added, a
 * byte string given twice, a byte without a token, a merge of an id out of
 * range or whose joined bytes are no token, are DL_ERR_DATA naming r->name. */
int dl_bpe_build(const struct dl_bpe_recipe *r, struct dl_bpe **out, struct dl_error *err);

/* Loads the ranks of path.  A line that is not base64 and a rank, a rank out
 * of order or a repeated sequence is DL_ERR_DATA naming path:line. */
int dl_bpe_load(const char *path, struct dl_bpe **out, struct dl_error *err);

/* A vocabulary from memory: rank r is bytes[r][0..len[r]) (the tests' and
 * the fuzz target's small vocabularies).  Errors as dl_bpe_load's. */
int dl_bpe_make(const unsigned char *const *bytes, const size_t *len, int32_t n, struct dl_bpe **out,
                struct dl_error *err);

/* dl_bpe_load of a vocabulary by name or path: a path ending in .json is a
 * Hugging Face tokenizer.json (dl_hf_tokenizer_load); a name without a slash
 * that is not a file here is vocab/NAME.tiktoken among the shipped files
 * (core/shipped.h; tools/deps fetches vocab/gpt2.tiktoken), and the message
 * when it is missing says where it looked and how to fetch it. */
int dl_bpe_open(const char *name, struct dl_bpe **out, struct dl_error *err);

void dl_bpe_free(struct dl_bpe *b);

/* Appends the tokens of text[0..n), which must be valid UTF-8 (data/utf8.h
 * repairs it), to out: added tokens where the vocabulary matches them,
 * else their text is encoded as ordinary text (tiktoken's encode_ordinary);
 * no template. */
int dl_bpe_encode(const struct dl_bpe *b, const char *text, size_t n, struct dl_token_stream *out,
                  struct dl_error *err);

/* How dl_bpe_encode_with merges a piece's bytes: by a scan of every pair
 * after each merge (the plain reference, O(n^2) in the piece's bytes), or
 * through a min-heap of the pairs (O(n log n)); AUTO (dl_bpe_encode) scans
 * pieces of up to DL_BPE_SCAN_MAX bytes, on the stack, and uses the heap
 * beyond.  All three give the same tokens (tests/test_bpe.c). */
enum dl_bpe_merge { DL_BPE_MERGE_AUTO, DL_BPE_MERGE_SCAN, DL_BPE_MERGE_HEAP };
#define DL_BPE_SCAN_MAX 63

/* dl_bpe_encode, merging as how says. */
int dl_bpe_encode_with(const struct dl_bpe *b, const char *text, size_t n, enum dl_bpe_merge how,
                       struct dl_token_stream *out, struct dl_error *err);

/* The bytes of token id (NULL with *len 0 for an id out of range). */
const unsigned char *dl_bpe_bytes(const struct dl_bpe *b, int32_t id, size_t *len);

/* dl_bpe_encode of one document as a training corpus holds it: the
 * template's ids around it (Llama 3's <|begin_of_text|> before), or the
 * separator before it where the template has none (GPT-2's <|endoftext|>). */
int dl_bpe_encode_document(const struct dl_bpe *b, const char *text, size_t n, struct dl_token_stream *out,
                           struct dl_error *err);

/* The ids the template puts before a text (*n of them; Hugging Face's
 * encode with add_special_tokens). */
const int32_t *dl_bpe_template_prefix(const struct dl_bpe *b, int *n);

/* Tokens in the vocabulary, added ones included (50257 for GPT-2). */
int dl_bpe_vocab(const struct dl_bpe *b);

/* The separator of documents (GPT-2's <|endoftext|>, the one after the last
 * rank), or -1 when the vocabulary has none. */
int32_t dl_bpe_end_of_text(const struct dl_bpe *b);

#endif
