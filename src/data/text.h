/* text.h: a text dataset (`dataset: text`, dltrain-data(5)): the bytes of a
 * file, or of every regular file below a folder in the order of their
 * paths, read as token ids 0-255 (UTF-8 byte by byte).  The first
 * 1 - validation of the bytes make the training split, the rest the test
 * split.  Sample i of a split is the window of T + 1 of its bytes starting
 * at i * T: the ids are its first T bytes and the labels its last T (the
 * next byte at every position), so an epoch reads each byte of the split
 * once; the batcher's seeded shuffle of the windows is the same on any
 * number of ranks.  The files are mapped, not read (data/token_windows.h). */
#ifndef DL_DATA_TEXT_H
#define DL_DATA_TEXT_H

#include "data/dataset.h"
#include "data/token_windows.h"

/* Fills ds (named by its caller) with split train of path's text for
 * windows of T positions, read from the mapped files when the batcher asks
 * (data/token_windows.h: ds->windows; ds->positions is T).  A byte that is
 * not below id_limit (the network's vocabulary; 0: no limit) or classes is
 * DL_ERR_DATA naming the file and its offset; a split too short for one
 * window is DL_ERR_DATA too.  limit > 0 keeps the first limit windows. */
int dl_text_load(const char *path, double validation, int train, int T, int id_limit, int classes, long limit,
                 struct dl_dataset *ds, struct dl_error *err);

/* Gives ds the windows of [lo, hi) of w's stream (w then belongs to ds, or
 * is freed on error): every id of w checked below id_limit (0: no limit)
 * and classes, and the split cut into windows of T + 1 (limit > 0 keeps
 * the first limit), as dl_token_windows_check and _split say, naming the
 * split ("training", "validation") and path. */
int dl_text_windows(struct dl_token_windows *w, long lo, long hi, int T, int id_limit, int classes, long limit,
                    const char *split, const char *path, struct dl_dataset *ds, struct dl_error *err);

#endif
