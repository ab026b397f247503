/* folders.c: mkdir -p of a path's folders (see folders.h). */
#include "core/folders.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int dl_make_parents(const char *path, struct dl_error *err)
{
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return dl_errorf(err, DL_ERR_IO, "path too long (%zu bytes): %.64s...", strlen(path), path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return dl_errorf(err, DL_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
        *p = '/';
    }
    return DL_OK;
}
