/* atomic_file.h: files that appear whole or not at all.  Data go to a
 * temporary file in the destination's directory; commit flushes it to disk
 * (fsync), renames it over the destination and fsyncs the directory, so a
 * crash, a SIGKILL or a full disk at any moment leaves either the old file or
 * the new one, never a mix.  Every file the tool writes goes through here.
 *
 * Only a regular file can be replaced so.  A symbolic link is followed (to
 * the file it names, even one that does not exist yet): the file it names is
 * written atomically and the link stays.  A character device or a FIFO
 * (a pipe made with mkfifo) is written through, and so is a descriptor named
 * /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N: no temporary
 * file, no rename, no fsync; commit flushes and closes it, and a write error
 * (ENOSPC from /dev/full) is an I/O error naming it.  A directory, a block
 * device or a socket is refused. */
#ifndef DL_ATOMIC_FILE_H
#define DL_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

struct dl_atomic_file {
    FILE *f;            /* buffered stream on the temporary file (or the device) */
    char path[1024];    /* destination, symbolic links followed */
    char tmp[1100];     /* temporary name, same directory; empty when direct */
    int err_no;         /* first write error (errno), 0 when none */
    int direct;         /* 1: a device or FIFO, written through */
};

/* Creates the temporary file for path.  With suffix NULL the temporary name is
 * unique (PATH.tmp.XXXXXX, for files written in one go); with a suffix it is
 * PATH+suffix (e.g. ".partial" for a log that readers may follow while it
 * grows), truncated if it exists.  A device or FIFO is opened instead (no
 * suffix: readers follow the stream); a FIFO that no process reads is waited
 * for 10 s at most.  Errors (DL_ERR_IO) name the path and the
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

/* Whether open would succeed, without writing anything or opening a device
 * or FIFO: for outputs written at the end of a run, checked at its start. */
int dl_atomic_check(const char *path, struct dl_error *err);

/* Writes a whole buffer to path atomically (open + write + commit). */
int dl_atomic_write_file(const char *path, const void *buf, size_t n, struct dl_error *err);

#endif
