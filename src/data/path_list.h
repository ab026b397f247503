/* path_list.h: the regular files named by a path: the file itself, or every
 * regular file below a folder (hidden names skipped, 16 levels deep at
 * most), sorted by path, so that a corpus reads in the same order anywhere. */
#ifndef DL_DATA_PATH_LIST_H
#define DL_DATA_PATH_LIST_H

#include "core/error.h"

struct dl_path_list {
    char **path;
    int n, cap;
};

/* Appends the files of p to l (sorted among themselves): DL_ERR_IO when p
 * cannot be read. */
int dl_path_list_add(struct dl_path_list *l, const char *p, struct dl_error *err);

void dl_path_list_free(struct dl_path_list *l);

#endif
