/* text.h: a text dataset (`dataset: text`, dltrain-data(5)): the bytes of a
 * file, or of every regular file below a folder in the order of their
 * paths, read as token ids 0-255 (UTF-8 byte by byte).  The first
 * 1 - validation of the bytes make the training split, the rest the test
 * split.  Sample i of a split is the window of T + 1 of its bytes starting
 * at i * T: the ids are its first T bytes and the labels its last T (the
 * next byte at every position), so an epoch reads each byte of the split
 * once; the batcher's seeded shuffle of the windows is the same on any
 * number of ranks. */
#ifndef DL_DATA_TEXT_H
#define DL_DATA_TEXT_H

#include "data/dataset.h"

/* Fills ds (named by its caller) with split train of path's text for
 * windows of T positions: ds->x holds the ids as i32 in 4-byte elements
 * (core/shape.h), ds->y the labels, T per sample (ds->positions).  A byte
 * that is not below id_limit (the network's vocabulary; 0: no limit) or
 * classes is DL_ERR_DATA naming the file and its offset; a split too short
 * for one window is DL_ERR_DATA too.  limit > 0 keeps the first limit
 * windows. */
int dl_text_load(const char *path, double validation, int train, int T, int id_limit, int classes, long limit,
                 struct dl_dataset *ds, struct dl_error *err);

/* The windows of ids[0..len) into ds (x and y, n, positions): sample i
 * is ids[i*T .. i*T+T] (ids in x, the next ids in y); limit > 0 keeps the
 * first limit.  Fewer than T + 1 ids is DL_ERR_DATA naming ds, the split
 * ("training", "validation") and path. */
int dl_text_windows(const int32_t *ids, long len, int T, long limit, const char *split, const char *path,
                    struct dl_dataset *ds, struct dl_error *err);

#endif
