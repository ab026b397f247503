/* text.c: text datasets (see text.h). */
#include "data/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/path_list.h"

/* The bytes of every file of l, concatenated; starts[i] the offset of file i. */
static int read_all(const struct dl_path_list *l, unsigned char **out, long *len, long *starts, struct dl_error *err)
{
    long total = 0;
    unsigned char *buf = NULL;
    for (int i = 0; i < l->n; i++) {
        FILE *f = fopen(l->path[i], "rb");
        if (!f) {
            free(buf);
            return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", l->path[i], strerror(errno));
        }
        starts[i] = total;
        for (;;) {
            unsigned char *grown = realloc(buf, (size_t)total + 65536);
            if (!grown) {
                fclose(f);
                free(buf);
                return dl_errorf(err, DL_ERR_NOMEM, "out of memory reading %s", l->path[i]);
            }
            buf = grown;
            size_t got = fread(buf + total, 1, 65536, f);
            total += (long)got;
            if (got < 65536)
                break;
        }
        int bad = ferror(f);
        fclose(f);
        if (bad) {
            free(buf);
            return dl_errorf(err, DL_ERR_IO, "%s: read error", l->path[i]);
        }
    }
    *out = buf;
    *len = total;
    return DL_OK;
}

int dl_text_windows(const int32_t *ids, long len, int T, long limit, const char *split, const char *path,
                    struct dl_dataset *ds, struct dl_error *err)
{
    long n = len > T ? (len - 1) / T : 0;
    if (n == 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: the %s split of %s has %ld tokens, fewer than one window of %d + 1",
                         ds->name, split, path, len, T);
    if (limit > 0 && limit < n)
        n = limit;
    ds->n = n;
    ds->positions = T;
    ds->x = dl_calloc((size_t)n * (size_t)T, sizeof *ds->x, err);
    ds->y = ds->x ? dl_calloc((size_t)n * (size_t)T, sizeof *ds->y, err) : NULL;
    if (!ds->y)
        return DL_ERR_NOMEM;
    for (long i = 0; i < n; i++)
        for (int t = 0; t < T; t++) {
            memcpy(&ds->x[i * T + t], &ids[i * T + t], sizeof *ids); /* i32 in a 4-byte element */
            ds->y[i * T + t] = ids[i * T + t + 1];
        }
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
    unsigned char *text = NULL;
    long len = 0, *starts = files.n ? calloc((size_t)files.n, sizeof *starts) : NULL;
    if (!rc && !starts)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = read_all(&files, &text, &len, starts, err);
    /* Every byte must be a valid id (the vocabulary) and label (the classes). */
    int below = id_limit > 0 && id_limit < classes ? id_limit : classes;
    for (long i = 0; !rc && i < len; i++)
        if (text[i] >= below) {
            int f = 0;
            while (f + 1 < files.n && starts[f + 1] <= i)
                f++;
            rc = dl_errorf(err, DL_ERR_DATA, "%s: byte %u at offset %ld is not a token id below %d (the network's "
                           "%s)", files.path[f], text[i], i - starts[f], below,
                           below == id_limit ? "vocabulary: its embedding's vocab" : "input.classes");
        }
    long cut = len - (long)((double)len * validation);
    long lo = train ? 0 : cut, hi = train ? cut : len;
    int32_t *ids = rc ? NULL : dl_calloc((size_t)(hi - lo) + 1, sizeof *ids, err);
    if (!rc && !ids)
        rc = DL_ERR_NOMEM;
    for (long i = lo; !rc && i < hi; i++)
        ids[i - lo] = text[i];
    if (!rc)
        rc = dl_text_windows(ids, hi - lo, T, limit, train ? "training" : "validation", path, ds, err);
    free(ids);
    free(text);
    free(starts);
    dl_path_list_free(&files);
    return rc;
}
