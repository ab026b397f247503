/* token_windows.h: the ids of a text or token dataset read where they lie.
 * Each file stays open and is read (pread) a window at a time instead of
 * into memory: the bytes of a text file (ids 0-255, data/text.h) or the
 * uint16 / uint32 ids after an llm.c token file's header
 * (data/token_file.h).  The files make one stream of ids in their order; a
 * split is a range [lo, hi) of it, and its sample i is the window of T + 1
 * ids from lo + i*T (the ids at T positions and, as labels, the next id at
 * each), which may run from one file into the next.  A window is read when
 * the batcher asks for it, so a corpus of any size costs its pages in the
 * page cache, never the process's memory (FineWeb's shards of 100M tokens
 * each, as llm.c streams them; a mapping, which this was, grew the
 * process's resident memory by 64 KiB of pages for each window drawn:
 * 350 MB in 10 s on a 2 GB corpus). */
#ifndef DL_DATA_TOKEN_WINDOWS_H
#define DL_DATA_TOKEN_WINDOWS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct dl_token_windows_file {
    char *path;
    int fd;                   /* open for reading (-1: none) */
    size_t header_bytes;      /* where the ids start */
    long count;               /* ids of width bytes, little-endian */
    int width;                /* 1 (text bytes), 2 or 4 */
};

struct dl_token_windows {
    int n_files;
    struct dl_token_windows_file *file;
    long *start;   /* [n_files + 1]: file f's first id in the stream; start[n_files] = every id */
    long lo, hi;   /* the split's range of the stream */
    int T;         /* positions per window */
    long n;        /* windows in the split */
    /* Document masking (doc_mask 1): a position whose id is doc_separator
     * ends its document, and its label (the next document's first id) is
     * doc_ignored, the loss's ignored label. */
    int doc_mask, doc_separator, doc_ignored;
};

/* Opens path and appends its ids to the stream: a text file's every byte
 * (width 1, no header), or a token file's ids after its header
 * (header_bytes, then count ids of width 2 or 4, as dl_token_file_header
 * read them).  DL_ERR_IO naming the file when it cannot be opened;
 * DL_ERR_DATA when it is shorter than that; DL_ERR_NOMEM. */
int dl_token_windows_add(struct dl_token_windows *w, const char *path, size_t header_bytes, int width, long count,
                         struct dl_error *err);

/* Every id of the stream is below `below` (one pass over the files, read a
 * chunk at a time):
 * otherwise DL_ERR_DATA naming the file and the id's place in it, a byte's
 * offset for a text file, a token's index for a token file, and what the
 * limit is (`limit_is`: "the network's vocabulary: ...").  A uint32 id
 * above INT32_MAX is refused too. */
int dl_token_windows_check(const struct dl_token_windows *w, int below, const char *limit_is, struct dl_error *err);

/* Makes [lo, hi) of the stream the split, cut into windows of T + 1
 * (limit > 0 keeps the first limit): fewer than T + 1 ids is DL_ERR_DATA
 * naming `what` (the dataset), the split ("training", "validation") and
 * `path`. */
int dl_token_windows_split(struct dl_token_windows *w, long lo, long hi, int T, long limit, const char *what,
                           const char *split, const char *path, struct dl_error *err);

/* Window i of the split: its T ids into ids (NULL: not wanted) and the
 * next id at each position into y (doc_ignored after a separator under
 * document masking).  A file that can no longer be read
 * (removed, cut short) gives ids 0 and a message on stderr, once. */
void dl_token_windows_get(const struct dl_token_windows *w, long i, int32_t *ids, int *y);

/* Closes the files and frees w's memory (w itself too); NULL is ignored. */
void dl_token_windows_free(struct dl_token_windows *w);

#endif
