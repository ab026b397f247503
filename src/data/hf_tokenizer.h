/* hf_tokenizer.h: Hugging Face's tokenizer.json of a byte-level BPE (GPT-2,
 * Llama 3, SmolLM2, Qwen without a normalizer), read into data/bpe.h's
 * vocabulary: the model's vocabulary (strings in GPT-2's byte-to-character
 * map) and merges (a rank a pair, "a b" strings or [a, b] pairs),
 * ignore_merges; the pre-tokenizer (ByteLevel, Split with a Regex or String
 * pattern and any behavior, Digits, in a Sequence); the added tokens (found
 * in text as the library finds them); the post-processor's template for
 * one text (TemplateProcessing's `single`, alone or in a Sequence with
 * ByteLevel).  Anything else the file asks for (a normalizer, another model
 * or pre-tokenizer, BPE dropout, add_prefix_space, added tokens that strip
 * spaces or match single words) is refused, naming the key, rather than
 * encoded differently from the library. */
#ifndef DL_DATA_HF_TOKENIZER_H
#define DL_DATA_HF_TOKENIZER_H

#include "core/error.h"
#include "data/bpe.h"

/* Reads path.  Malformed JSON is DL_ERR_DATA at path:line:column; what the
 * file asks for that is not byte-level BPE, or not supported, is DL_ERR_DATA
 * naming the key (model.merges[12]) and what was expected against what
 * was found. */
int dl_hf_tokenizer_load(const char *path, struct dl_bpe **out, struct dl_error *err);

/* dl_hf_tokenizer_load of a tokenizer.json held in memory (the fuzz target);
 * name stands for its path in messages. */
int dl_hf_tokenizer_parse(const char *name, const char *json, size_t len, struct dl_bpe **out, struct dl_error *err);

#endif
