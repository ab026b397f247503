/* text.c: text datasets (see text.h). */
#include "data/text.h"

#include "data/path_list.h"

int dl_text_windows(struct dl_token_windows *w, long lo, long hi, int T, int id_limit, int classes, long limit,
                    const char *split, const char *path, struct dl_dataset *ds, struct dl_error *err)
{
    /* Every id must be a valid id (the vocabulary) and label (the classes). */
    int below = id_limit > 0 && id_limit < classes ? id_limit : classes;
    int rc = dl_token_windows_check(w, below,
                                    below == id_limit ? "the network's vocabulary: its embedding's vocab"
                                                      : "the network's input.classes",
                                    err);
    if (!rc)
        rc = dl_token_windows_split(w, lo, hi, T, limit, ds->name, split, path, err);
    if (rc) {
        dl_token_windows_free(w);
        return rc;
    }
    ds->windows = w;
    ds->n = w->n;
    ds->positions = T;
    return DL_OK;
}

int dl_text_load(const char *path, double validation, int train, int T, int id_limit, int classes, long limit,
                 struct dl_dataset *ds, struct dl_error *err)
{
    if (!path || !*path)
        return dl_errorf(err, DL_ERR_SPEC, "%s: no text given: pass --data FILE or --data DIR (its files are "
                         "read in the order of their paths)", ds->name);
    struct dl_path_list files = {0};
    int rc = dl_path_list_add(&files, path, err);
    if (!rc && files.n == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no file below %s", ds->name, path);
    struct dl_token_windows *w = rc ? NULL : dl_calloc(1, sizeof *w, err);
    if (!rc && !w)
        rc = DL_ERR_NOMEM;
    for (int i = 0; !rc && i < files.n; i++)
        rc = dl_token_windows_add(w, files.path[i], 0, 1, -1, err);
    dl_path_list_free(&files);
    if (rc) {
        dl_token_windows_free(w);
        return rc;
    }
    long len = w->start[w->n_files], cut = len - (long)((double)len * validation);
    return dl_text_windows(w, train ? 0 : cut, train ? cut : len, T, id_limit, classes, limit,
                           train ? "training" : "validation", path, ds, err);
}
