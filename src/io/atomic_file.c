/* atomic_file.c: temporary file + fsync + rename + directory fsync (see
 * atomic_file.h).  The temporary file is created with O_EXCL and mode 0666
 * (less the umask), so the final file gets the same permissions a plain
 * fopen() would have given it. */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static int io_error(struct dl_error *err, const char *what, const char *path, int e)
{
    return dl_errorf(err, DL_ERR_IO, "%s: %s: %s", path, what, strerror(e));
}

int dl_atomic_open(struct dl_atomic_file *a, const char *path, const char *suffix,
                   struct dl_error *err)
{
    static atomic_uint counter;
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path)
        return dl_errorf(err, DL_ERR_IO, "%.100s...: path longer than %zu characters", path,
                         sizeof a->path - 1);
    snprintf(a->path, sizeof a->path, "%s", path);
    int fd = -1;
    if (suffix) {
        snprintf(a->tmp, sizeof a->tmp, "%s%s", path, suffix);
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    } else {
        for (int tries = 0; fd < 0 && tries < 100; tries++) {
            snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                     atomic_fetch_add(&counter, 1u));
            fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST)
                break;
        }
    }
    if (fd < 0) {
        int e = errno;
        a->tmp[0] = 0;
        return io_error(err, "cannot create a file next to it", path, e);
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        a->tmp[0] = 0;
        return io_error(err, "cannot open a stream", path, e);
    }
    return DL_OK;
}

int dl_atomic_write(struct dl_atomic_file *a, const void *buf, size_t n, struct dl_error *err)
{
    if (!a->f)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: write after commit or abort", a->path);
    if (!a->err_no && n && fwrite(buf, 1, n, a->f) != n)
        a->err_no = errno ? errno : EIO;
    return a->err_no ? io_error(err, "write failed", a->tmp, a->err_no) : DL_OK;
}

int dl_atomic_flush(struct dl_atomic_file *a, struct dl_error *err)
{
    if (!a->f)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: flush after commit or abort", a->path);
    if (!a->err_no && fflush(a->f) != 0)
        a->err_no = errno ? errno : EIO;
    return a->err_no ? io_error(err, "write failed", a->tmp, a->err_no) : DL_OK;
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
    if (!a->err_no && fsync(fileno(a->f)) != 0)
        a->err_no = errno;
    if (fclose(a->f) != 0 && !a->err_no)
        a->err_no = errno ? errno : EIO;
    a->f = NULL;
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
