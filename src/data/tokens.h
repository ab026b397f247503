/* tokens.h: a token-file dataset (`format: tokens`, dltrain-data(5)): llm.c's
 * token files (data/token_file.h), mapped and cut into the same windows of
 * T + 1 ids as a text dataset (data/text.h, data/token_windows.h): a
 * window is read from the files when the batcher asks for it.  --data names a folder or a
 * file.  In a folder, the training split is the concatenation of the files
 * that match train_files (default "*train*.bin") in the order of their names,
 * the test split that of val_files (default "*val*.bin"): llm.c's
 * tiny_shakespeare_train.bin, fineweb_train_000001.bin ... and dltrain
 * tokenize's train.bin, val.bin all match.  A single file, or a folder with
 * no validation file, gives its last `validation` fraction as the test
 * split. */
#ifndef DL_DATA_TOKENS_H
#define DL_DATA_TOKENS_H

#include "data/dataset.h"

#define DL_TOKENS_TRAIN_FILES "*train*.bin"
#define DL_TOKENS_VAL_FILES "*val*.bin"

/* Fills ds (named by its caller) with split train of spec's token files for
 * windows of T positions, as dl_text_load does; an id that is not below
 * id_limit (the network's vocabulary; 0: no limit) or classes is DL_ERR_DATA
 * naming the file and the token's index. */
int dl_tokens_load(const struct dl_data_spec *spec, int train, int T, int id_limit, int classes, long limit,
                   struct dl_dataset *ds, struct dl_error *err);

/* Whether spec's files can be found (their headers read), without loading
 * the tokens: DL_ERR_IO or DL_ERR_DATA naming what is missing or wrong. */
int dl_tokens_check(const struct dl_data_spec *spec, struct dl_error *err);

#endif
