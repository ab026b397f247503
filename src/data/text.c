/* text.c: text datasets (see text.h). */
#include "data/text.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The regular files below dir (or dir itself when it is a file), sorted. */
struct file_list {
    char **path;
    int n, cap;
};

static int add_path(struct file_list *l, const char *p, struct dl_error *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **grown = realloc(l->path, sizeof *grown * (size_t)cap);
        if (!grown)
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory listing %s", p);
        l->path = grown, l->cap = cap;
    }
    if (!(l->path[l->n] = dl_strdup(p, err)))
        return DL_ERR_NOMEM;
    l->n++;
    return DL_OK;
}

static int list_files(const char *p, struct file_list *l, int depth, struct dl_error *err)
{
    struct stat st;
    if (stat(p, &st) != 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot read: %s", p, strerror(errno));
    if (S_ISREG(st.st_mode))
        return add_path(l, p, err);
    if (!S_ISDIR(st.st_mode) || depth > 16)
        return DL_OK;
    DIR *d = opendir(p);
    if (!d)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open the folder: %s", p, strerror(errno));
    int rc = DL_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(p) + strlen(e->d_name) + 2;
        char *child = malloc(len);
        if (!child) {
            rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory listing %s", p);
            break;
        }
        snprintf(child, len, "%s/%s", p, e->d_name);
        rc = list_files(child, l, depth + 1, err);
        free(child);
    }
    closedir(d);
    return rc;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The bytes of every file of l, concatenated; starts[i] the offset of file i. */
static int read_all(const struct file_list *l, unsigned char **out, long *len, long *starts, struct dl_error *err)
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

int dl_text_load(const char *path, double validation, int train, int T, int id_limit, int classes, long limit,
                 struct dl_dataset *ds, struct dl_error *err)
{
    if (!path || !*path)
        return dl_errorf(err, DL_ERR_SPEC, "%s: no text given: pass --data FILE or --data DIR (its files are "
                         "read in the order of their paths)", ds->name);
    struct file_list files = {0};
    int rc = list_files(path, &files, 0, err);
    if (!rc && files.n == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no file below %s", ds->name, path);
    if (!rc)
        qsort(files.path, (size_t)files.n, sizeof *files.path, by_path);
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
    long n = hi - lo > T ? (hi - lo - 1) / T : 0;
    if (!rc && n == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: the %s split of %s has %ld bytes, fewer than one window of %d + 1",
                       ds->name, train ? "training" : "validation", path, hi - lo, T);
    if (!rc && limit > 0 && limit < n)
        n = limit;
    if (!rc) {
        ds->n = n;
        ds->positions = T;
        ds->x = dl_calloc((size_t)n * (size_t)T, sizeof *ds->x, err);
        ds->y = ds->x ? dl_calloc((size_t)n * (size_t)T, sizeof *ds->y, err) : NULL;
        rc = ds->y ? DL_OK : DL_ERR_NOMEM;
    }
    for (long i = 0; !rc && i < n; i++)
        for (int t = 0; t < T; t++) {
            int32_t id = text[lo + i * T + t];
            memcpy(&ds->x[i * T + t], &id, sizeof id); /* i32 in a 4-byte element */
            ds->y[i * T + t] = text[lo + i * T + t + 1];
        }
    free(text);
    free(starts);
    for (int i = 0; i < files.n; i++)
        free(files.path[i]);
    free(files.path);
    return rc;
}
