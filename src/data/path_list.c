/* path_list.c: the files below a path (see path_list.h). */
#include "data/path_list.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int add_path(struct dl_path_list *l, const char *p, struct dl_error *err)
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

static int list_files(const char *p, struct dl_path_list *l, int depth, struct dl_error *err)
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

int dl_path_list_add(struct dl_path_list *l, const char *p, struct dl_error *err)
{
    int first = l->n, rc = list_files(p, l, 0, err);
    if (!rc)
        qsort(l->path + first, (size_t)(l->n - first), sizeof *l->path, by_path);
    return rc;
}

void dl_path_list_free(struct dl_path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->path[i]);
    free(l->path);
    memset(l, 0, sizeof *l);
}
