/* tensorboard.c: TensorBoard event files (see tensorboard.h).  The one
 * #ifdef on protobuf-c and ISA-L lives here: without them every call but
 * open does nothing, and open refuses. */
#include "io/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#ifdef DL_HAVE_TENSORBOARD
#include <isa-l.h>
#include <stdlib.h>
#include <time.h>

#include "core/folders.h"
#include "io/tfrecord.h"
#include "src/io/tensorboard_event.pb-c.h"

void dl_tensorboard_libraries(char *buf, size_t n)
{
    snprintf(buf, n, "protobuf-c %s, ISA-L %d.%d.%d", protobuf_c_version(), ISAL_MAJOR_VERSION, ISAL_MINOR_VERSION,
             ISAL_PATCH_VERSION);
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encodes ev (its wall time set here) and appends it as a record, whole
 * (one write; a failed one leaves the file as it was). */
static void write_event(struct dl_tensorboard *tb, Tensorboard__Event *ev)
{
    if (!tb->open || tb->err_no)
        return;
    ev->wall_time = wall_time();
    size_t n = tensorboard__event__get_packed_size(ev);
    unsigned char stack[4096], *buf = n + 16 <= sizeof stack ? stack : malloc(n + 16);
    if (!buf) {
        tb->err_no = ENOMEM;
        return;
    }
    tensorboard__event__pack(ev, buf + 12); /* the record's framing around it */
    if (dl_tfrecord_append(tb->fd, buf, n) != 0)
        tb->err_no = errno ? errno : EIO;
    if (buf != stack)
        free(buf);
}

int dl_tensorboard_open(struct dl_tensorboard *tb, const char *dir, struct dl_error *err)
{
    static int opened; /* files this process made: the name's last part */
    memset(tb, 0, sizeof *tb);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    char folder[4100];
    snprintf(folder, sizeof folder, "%s/", dir);
    int rc = dl_make_parents(folder, err);
    if (rc) {
        dl_error_prefix(err, "--tensorboard %s", dir);
        return rc;
    }
    if ((size_t)snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%ld.%s.%ld.%d", dir, (long)time(NULL), host,
                         (long)getpid(), opened++) >= sizeof tb->path)
        return dl_errorf(err, DL_ERR_SPEC, "--tensorboard %s: path too long", dir);
    tb->fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666); /* a new file, never another run's */
    if (tb->fd < 0)
        return dl_errorf(err, DL_ERR_IO, "--tensorboard: cannot create %s: %s", tb->path, strerror(errno));
    tb->open = 1;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    write_event(tb, &ev);
    return dl_tensorboard_flush(tb, err);
}

void dl_tensorboard_start(struct dl_tensorboard *tb, long step)
{
    Tensorboard__SessionLog log = TENSORBOARD__SESSION_LOG__INIT;
    log.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
    ev.session_log = &log;
    write_event(tb, &ev);
}

void dl_tensorboard_scalars(struct dl_tensorboard *tb, long step, int n, const char *const *tags,
                            const double *values)
{
    enum { MAX = 32 };
    Tensorboard__Summary__Value v[MAX], *pv[MAX];
    if (n > MAX)
        n = MAX;
    for (int i = 0; i < n; i++) {
        tensorboard__summary__value__init(&v[i]);
        v[i].tag = (char *)tags[i];
        v[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        v[i].simple_value = (float)values[i];
        pv[i] = &v[i];
    }
    Tensorboard__Summary summary = TENSORBOARD__SUMMARY__INIT;
    summary.n_value = (size_t)n;
    summary.value = pv;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &summary;
    write_event(tb, &ev);
}

void dl_tensorboard_push(struct dl_tensorboard *tb)
{
    /* each record was written whole when it was made */
}

int dl_tensorboard_flush(struct dl_tensorboard *tb, struct dl_error *err)
{
    if (!tb->open)
        return DL_OK;
    if (!tb->err_no && fsync(tb->fd) != 0)
        tb->err_no = errno ? errno : EIO;
    if (tb->err_no)
        return dl_errorf(err, DL_ERR_IO, "--tensorboard: cannot write %s: %s", tb->path, strerror(tb->err_no));
    return DL_OK;
}

int dl_tensorboard_close(struct dl_tensorboard *tb, struct dl_error *err)
{
    if (!tb->open)
        return DL_OK;
    int rc = dl_tensorboard_flush(tb, err);
    if (close(tb->fd) != 0 && !rc)
        rc = dl_errorf(err, DL_ERR_IO, "--tensorboard: cannot write %s: %s", tb->path, strerror(errno));
    tb->open = 0;
    return rc;
}

#else /* no protobuf-c or ISA-L in this build */

void dl_tensorboard_libraries(char *buf, size_t n)
{
    snprintf(buf, n, "no (configure found no protobuf-c and ISA-L)");
}

int dl_tensorboard_open(struct dl_tensorboard *tb, const char *dir, struct dl_error *err)
{
    memset(tb, 0, sizeof *tb);
    return dl_errorf(err, DL_ERR_SPEC, "--tensorboard %s: this dltrain was built without TensorBoard event files "
                     "(configure finds them with protobuf-c and ISA-L: Debian's libprotobuf-c-dev, "
                     "protobuf-c-compiler and libisal-dev)", dir);
}

void dl_tensorboard_start(struct dl_tensorboard *tb, long step)
{
}

void dl_tensorboard_scalars(struct dl_tensorboard *tb, long step, int n, const char *const *tags,
                            const double *values)
{
}

void dl_tensorboard_push(struct dl_tensorboard *tb)
{
}

int dl_tensorboard_flush(struct dl_tensorboard *tb, struct dl_error *err)
{
    return DL_OK;
}

int dl_tensorboard_close(struct dl_tensorboard *tb, struct dl_error *err)
{
    return DL_OK;
}
#endif
