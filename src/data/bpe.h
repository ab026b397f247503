/* bpe.h: GPT-2's byte-level byte-pair encoding, equal to tiktoken's `gpt2`
 * (r50k_base) encoding token for token.  The ranks come from a .tiktoken
 * file (one "BASE64-BYTES RANK" line per token; gpt2.tiktoken has 50,256, and
 * <|endoftext|> is the next id, 50256).  Text is cut into pieces by GPT-2's
 * pre-tokenizer pattern (letters, numbers, other symbols each with an
 * optional leading space, contractions, runs of white space; through PCRE2
 * with Unicode properties), and each piece's bytes are merged pairwise,
 * lowest rank first (the leftmost of equal ranks), until no adjacent pair
 * has a rank: tiktoken's order.  Long pieces (a run of base64, digits or
 * one letter) are merged through a min-heap of the pairs, in O(n log n). */
#ifndef DL_DATA_BPE_H
#define DL_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/token_file.h"

struct dl_bpe;

/* Loads the ranks of path.  A line that is not base64 and a rank, a rank out
 * of order or a repeated sequence is DL_ERR_DATA naming path:line. */
int dl_bpe_load(const char *path, struct dl_bpe **out, struct dl_error *err);

/* A vocabulary from memory: rank r is bytes[r][0..len[r]) (the tests' and
 * the fuzz target's small vocabularies).  Errors as dl_bpe_load's. */
int dl_bpe_make(const unsigned char *const *bytes, const size_t *len, int32_t n, struct dl_bpe **out,
                struct dl_error *err);

/* dl_bpe_load of a vocabulary by name or path: a name without a slash that
 * is not a file here is vocab/NAME.tiktoken among the shipped files
 * (core/shipped.h; tools/deps fetches vocab/gpt2.tiktoken), and the message
 * when it is missing says where it looked and how to fetch it. */
int dl_bpe_open(const char *name, struct dl_bpe **out, struct dl_error *err);

void dl_bpe_free(struct dl_bpe *b);

/* Appends the tokens of text[0..n), which must be valid UTF-8 (data/utf8.h
 * repairs it), to out; special tokens' text is encoded as ordinary text
 * (tiktoken's encode_ordinary). */
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

/* Tokens in the vocabulary, <|endoftext|> included (50257 for GPT-2). */
int dl_bpe_vocab(const struct dl_bpe *b);

/* The id of <|endoftext|>: the one after the last rank. */
int32_t dl_bpe_end_of_text(const struct dl_bpe *b);

#endif
