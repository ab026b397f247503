/* folders.h: creating the folders a file will go in (mkdir -p of the part of
 * a path before its last '/'), for the files the tool writes under folders
 * that may not exist yet: the tuning database, the cost-model cache,
 * TensorBoard's log folder. */
#ifndef DL_FOLDERS_H
#define DL_FOLDERS_H

#include "core/error.h"

/* Creates every folder above path's last component ("a/b/c" creates a and
 * a/b; "a/b/" creates a and a/b), leaving existing ones.  An error
 * (DL_ERR_IO) names the folder and the system's reason. */
int dl_make_parents(const char *path, struct dl_error *err);

#endif
