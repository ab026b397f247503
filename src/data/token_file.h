/* token_file.h: llm.c's token files, the format its data scripts and
 * nanoGPT-style tokenizers write: a header of 256 little-endian int32
 * (magic, version, token count, the rest zero) and then the tokens, uint16
 * for GPT-2 (magic 20240520, version 1) or uint32 for LLaMA 3 (magic
 * 20240801, version 7).  dltrain tokenize writes them and the `tokens`
 * dataset reads them (dltrain-data(5)). */
#ifndef DL_DATA_TOKEN_FILE_H
#define DL_DATA_TOKEN_FILE_H

#include <stdint.h>

#include "core/error.h"

#define DL_TOKEN_FILE_HEADER_INTS 256
#define DL_TOKEN_FILE_MAGIC16 20240520
#define DL_TOKEN_FILE_VERSION16 1
#define DL_TOKEN_FILE_MAGIC32 20240801
#define DL_TOKEN_FILE_VERSION32 7

/* A growing array of token ids. */
struct dl_token_stream {
    int32_t *id;
    long n, cap;
};

/* Appends the tokens of path to s.  A file that is not a token file (its
 * magic), of an unknown version, shorter or longer than its header's count
 * says, or with an id above INT32_MAX, is DL_ERR_DATA naming the file and
 * what was expected against what was found; *width gets 2 or 4 (bytes per
 * token) when not NULL. */
int dl_token_file_read(const char *path, struct dl_token_stream *s, int *width, struct dl_error *err);

/* Writes ids[0..n) to path (through a temporary file and a rename): uint16
 * when every id is below 65536, uint32 (LLaMA 3's header) otherwise.  An id
 * below 0 is DL_ERR_INTERNAL. */
int dl_token_file_write(const char *path, const int32_t *ids, long n, struct dl_error *err);

/* Checks path's header against its size without reading the tokens:
 * *count tokens of *width bytes, or the errors of dl_token_file_read. */
int dl_token_file_header(const char *path, long *count, int *width, struct dl_error *err);

/* Makes room for more ids after s->n (DL_ERR_NOMEM). */
int dl_token_stream_reserve(struct dl_token_stream *s, long more, struct dl_error *err);

void dl_token_stream_free(struct dl_token_stream *s);

#endif
