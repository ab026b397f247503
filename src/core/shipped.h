/* shipped.h: the files dltrain ships (nets/, datasets/, machines/,
 * bench/data/) found by name from any folder.  The folders searched, in
 * order: $DLTRAIN_DATADIR; the source tree of a binary run from its build
 * tree (configure's abs_top_srcdir, when /proc/self/exe lies under
 * abs_top_builddir); the installed data folder (pkgdatadir); the current
 * folder. */
#ifndef DL_SHIPPED_H
#define DL_SHIPPED_H

#include <stddef.h>

/* Finds rel, a path below a shipped folder ("nets/lenet5.yaml"): 1 with
 * its path in path when found.  looked (may be NULL) receives the folders
 * searched, each with rel's folder ("/usr/share/dltrain/nets, ./nets"). */
int dl_shipped_find(const char *rel, char *path, size_t size, char *looked, size_t looked_size);

#endif
