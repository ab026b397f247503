/* atomic_file.h: files that appear whole or not at all.  Data go to a
 * temporary file in the destination's directory; commit flushes it to disk
 * (fsync), renames it over the destination and fsyncs the directory, so a
 * crash, a SIGKILL or a full disk at any moment leaves either the old file or
 * the new one, never a mix.  Every file the tool writes goes through here. */
#ifndef DL_ATOMIC_FILE_H
#define DL_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

struct dl_atomic_file {
    FILE *f;            /* buffered stream on the temporary file */
    char path[1024];    /* destination */
    char tmp[1100];     /* temporary name, same directory */
    int err_no;         /* first write error (errno), 0 when none */
};

/* Creates the temporary file for path.  With suffix NULL the temporary name is
 * unique (PATH.tmp.XXXXXX, for files written in one go); with a suffix it is
 * PATH+suffix (e.g. ".partial" for a log that readers may follow while it
 * grows), truncated if it exists.  Errors (DL_ERR_IO) name the path and the
 * system's reason, e.g. "No space left on device" or "Permission denied". */
int dl_atomic_open(struct dl_atomic_file *a, const char *path, const char *suffix,
                   struct dl_error *err);

/* Appends n bytes.  A failure is remembered and reported (again) by commit,
 * so callers that stream many small pieces may check only the commit. */
int dl_atomic_write(struct dl_atomic_file *a, const void *buf, size_t n, struct dl_error *err);

/* Pushes buffered data to the kernel (not to disk): for logs that readers
 * follow while they grow. */
int dl_atomic_flush(struct dl_atomic_file *a, struct dl_error *err);

/* fflush + fsync + close + rename over path + fsync of the directory.  On any
 * failure the temporary file is removed, the destination is left exactly as
 * it was, and the error names the file and the reason. */
int dl_atomic_commit(struct dl_atomic_file *a, struct dl_error *err);

/* Closes and removes the temporary file; the destination is untouched.  Safe
 * to call on a committed, aborted or zeroed struct. */
void dl_atomic_abort(struct dl_atomic_file *a);

/* Writes a whole buffer to path atomically (open + write + commit). */
int dl_atomic_write_file(const char *path, const void *buf, size_t n, struct dl_error *err);

#endif
