/* shipped.c: shipped files found from any folder (see shipped.h). */
#include "core/shipped.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 when this program is the binary (or a test program) of the build tree
 * it was compiled in. */
static int in_build_tree(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = '\0';
    size_t len = strlen(DL_BUILDDIR);
    return strncmp(exe, DL_BUILDDIR, len) == 0 && exe[len] == '/';
}

int dl_shipped_find(const char *rel, char *path, size_t size, char *looked, size_t looked_size)
{
    char src[4096];
    const char *dirs[] = {getenv("DLTRAIN_DATADIR"), in_build_tree() && realpath(DL_SRCDIR, src) ? src : NULL,
                          DL_DATADIR, "."};
    const char *slash = strrchr(rel, '/');
    int folder = slash ? (int)(slash - rel) : 0;
    if (looked && looked_size)
        looked[0] = '\0';
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        if ((size_t)snprintf(path, size, "%s/%s", dirs[i], rel) >= size)
            continue;
        if (access(path, R_OK) == 0)
            return 1;
        if (looked && looked_size) {
            size_t used = strlen(looked);
            snprintf(looked + used, looked_size - used, "%s%s%s%.*s", used ? ", " : "", dirs[i], folder ? "/" : "",
                     folder, rel);
        }
    }
    return 0;
}
