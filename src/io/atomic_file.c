/* atomic_file.c: temporary file + fsync + rename + directory fsync, or a
 * device or FIFO written through (see atomic_file.h).  The temporary file is
 * created with O_EXCL and mode 0666 (less the umask), so the final file gets
 * the same permissions a plain fopen() would have given it. */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int io_error(struct dl_error *err, const char *what, const char *path, int e)
{
    return dl_errorf(err, DL_ERR_IO, "%s: %s: %s", path, what, strerror(e));
}

/* What the destination is: after any symbolic links (followed here, a
 * dangling one to the file it names), a regular file or nothing yet (written
 * atomically), a character device or a FIFO (written through), or something
 * that cannot be written (refused).  out gets the path to write. */
enum dest_kind { DEST_FILE, DEST_STREAM, DEST_FD };

/* The descriptor that /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N
 * names, or -1: written through a copy of it, as the shell does, so that
 * `--metrics /dev/stdout > log` adds to the log instead of replacing it. */
static int fd_name(const char *path)
{
    if (strcmp(path, "/dev/stdout") == 0)
        return 1;
    if (strcmp(path, "/dev/stderr") == 0)
        return 2;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0 ? path + 8
                    : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14 : NULL;
    if (!n || *n < '0' || *n > '9' || strlen(n) > 6 || strspn(n, "0123456789") != strlen(n))
        return -1;
    return atoi(n);
}

static int resolve(const char *path, char *out, size_t size, enum dest_kind *kind, struct dl_error *err)
{
    if (strlen(path) >= size)
        return dl_errorf(err, DL_ERR_IO, "%.100s...: path longer than %zu characters", path, size - 1);
    snprintf(out, size, "%s", path);
    if (fd_name(path) >= 0) {
        *kind = DEST_FD;
        return fcntl(fd_name(path), F_GETFL) < 0 ? io_error(err, "cannot write it", path, errno) : DL_OK;
    }
    struct stat st;
    for (int links = 0;; links++) {
        if (lstat(out, &st) != 0) {
            if (errno != ENOENT)
                return io_error(err, "cannot look at it", path, errno);
            *kind = DEST_FILE; /* a new file */
            return DL_OK;
        }
        if (!S_ISLNK(st.st_mode))
            break;
        char link[4096];
        ssize_t n = links < 40 ? readlink(out, link, sizeof link - 1) : -1;
        if (n < 0)
            return io_error(err, "cannot follow the symbolic link", path, links < 40 ? errno : ELOOP);
        link[n] = 0;
        const char *slash = strrchr(out, '/');
        int dir = link[0] == '/' || !slash ? 0 : (int)(slash - out) + 1; /* relative to the link's folder */
        char next[4096];
        if ((size_t)snprintf(next, sizeof next, "%.*s%s", dir, out, link) >= size)
            return dl_errorf(err, DL_ERR_IO, "%s: the file its link names has a path longer than %zu characters",
                             path, size - 1);
        snprintf(out, size, "%s", next);
    }
    if (S_ISREG(st.st_mode)) {
        *kind = DEST_FILE;
        return DL_OK;
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
        *kind = DEST_STREAM;
        return DL_OK;
    }
    const char *what = S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket" : "something else";
    return dl_errorf(err, DL_ERR_IO, "%s: cannot write it: it is %s, not a file", path, what);
}

/* Opens a device or FIFO for writing through.  A FIFO that no process reads
 * yet is waited for (its reader may start just after us) for 10 s at most,
 * polling, so that no signal is ignored while a blocking open waits. */
static int open_stream(const char *path, struct dl_error *err)
{
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 500; tries++) {
        fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno != ENXIO)
            return io_error(err, "cannot open it for writing", path, errno), -1;
        if (fd < 0)
            nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    if (fd < 0)
        return dl_errorf(err, DL_ERR_IO, "%s: a FIFO that no process reads (start its reader first)", path), -1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); /* writes wait for a slow reader */
    return fd;
}

int dl_atomic_open(struct dl_atomic_file *a, const char *path, const char *suffix,
                   struct dl_error *err)
{
    static atomic_uint counter;
    memset(a, 0, sizeof *a);
    enum dest_kind kind;
    int rc = resolve(path, a->path, sizeof a->path, &kind, err);
    if (rc)
        return rc;
    int fd = -1;
    if (kind == DEST_FD) {
        a->direct = 1;
        if ((fd = fcntl(fd_name(path), F_DUPFD_CLOEXEC, 3)) < 0)
            return io_error(err, "cannot write it", path, errno);
    } else if (kind == DEST_STREAM) {
        a->direct = 1;
        if ((fd = open_stream(a->path, err)) < 0)
            return DL_ERR_IO;
    } else if (suffix) {
        snprintf(a->tmp, sizeof a->tmp, "%s%s", a->path, suffix);
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    } else {
        for (int tries = 0; fd < 0 && tries < 100; tries++) {
            snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld.%u", a->path, (long)getpid(),
                     atomic_fetch_add(&counter, 1u));
            fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST)
                break;
        }
    }
    if (fd < 0) {
        int e = errno;
        a->tmp[0] = 0;
        return io_error(err, "cannot create a file next to it", a->path, e);
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int e = errno;
        close(fd);
        if (a->tmp[0])
            unlink(a->tmp);
        a->tmp[0] = 0;
        return io_error(err, "cannot open a stream", a->path, e);
    }
    return DL_OK;
}

int dl_atomic_check(const char *path, struct dl_error *err)
{
    char dest[sizeof ((struct dl_atomic_file *)0)->path];
    enum dest_kind kind;
    int rc = resolve(path, dest, sizeof dest, &kind, err);
    if (rc)
        return rc;
    if (kind == DEST_FD)
        return DL_OK;
    if (kind == DEST_STREAM) /* not opened: a FIFO's reader would see the end of its data */
        return access(dest, W_OK) == 0 ? DL_OK : io_error(err, "cannot open it for writing", dest, errno);
    struct dl_atomic_file a;
    rc = dl_atomic_open(&a, path, NULL, err);
    dl_atomic_abort(&a);
    return rc;
}

int dl_atomic_write(struct dl_atomic_file *a, const void *buf, size_t n, struct dl_error *err)
{
    if (!a->f)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: write after commit or abort", a->path);
    if (!a->err_no && n && fwrite(buf, 1, n, a->f) != n)
        a->err_no = errno ? errno : EIO;
    return a->err_no ? io_error(err, "write failed", a->direct ? a->path : a->tmp, a->err_no) : DL_OK;
}

int dl_atomic_flush(struct dl_atomic_file *a, struct dl_error *err)
{
    if (!a->f)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: flush after commit or abort", a->path);
    if (!a->err_no && fflush(a->f) != 0)
        a->err_no = errno ? errno : EIO;
    return a->err_no ? io_error(err, "write failed", a->direct ? a->path : a->tmp, a->err_no) : DL_OK;
}

/* fsync of the folder holding path, so that the rename itself is durable.
 * File systems that cannot sync a directory (EINVAL) are accepted. */
static int sync_dir(const char *path, struct dl_error *err)
{
    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return io_error(err, "cannot open its folder to sync it", path, errno);
    int rc = fsync(fd) != 0 && errno != EINVAL ? errno : 0;
    close(fd);
    return rc ? io_error(err, "cannot sync its folder", path, rc) : DL_OK;
}

int dl_atomic_commit(struct dl_atomic_file *a, struct dl_error *err)
{
    if (!a->f)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: commit after commit or abort", a->path);
    if (!a->err_no && fflush(a->f) != 0)
        a->err_no = errno ? errno : EIO;
    if (!a->err_no && !a->direct && fsync(fileno(a->f)) != 0)
        a->err_no = errno;
    if (fclose(a->f) != 0 && !a->err_no)
        a->err_no = errno ? errno : EIO;
    a->f = NULL;
    if (a->direct)
        return a->err_no ? dl_errorf(err, DL_ERR_IO, "%s: cannot write: %s", a->path, strerror(a->err_no)) : DL_OK;
    if (a->err_no) {
        int rc = dl_errorf(err, DL_ERR_IO, "%s: cannot write: %s (the previous %s is unchanged)",
                           a->path, strerror(a->err_no), a->path);
        unlink(a->tmp);
        a->tmp[0] = 0;
        return rc;
    }
    if (rename(a->tmp, a->path) != 0) {
        int rc = io_error(err, "cannot rename the finished temporary file over it", a->path, errno);
        unlink(a->tmp);
        a->tmp[0] = 0;
        return rc;
    }
    a->tmp[0] = 0;
    return sync_dir(a->path, err);
}

void dl_atomic_abort(struct dl_atomic_file *a)
{
    if (a->f) {
        fclose(a->f);
        a->f = NULL;
    }
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = 0;
}

int dl_atomic_write_file(const char *path, const void *buf, size_t n, struct dl_error *err)
{
    struct dl_atomic_file a;
    int rc = dl_atomic_open(&a, path, NULL, err);
    if (!rc)
        rc = dl_atomic_write(&a, buf, n, err);
    if (!rc)
        return dl_atomic_commit(&a, err);
    dl_atomic_abort(&a);
    return rc;
}
