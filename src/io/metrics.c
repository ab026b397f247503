/* metrics.c: JSON-lines metrics writer (see metrics.h). */
#include "io/metrics.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

int dl_metrics_open(struct dl_metrics *m, const char *path, struct dl_error *err)
{
    memset(m, 0, sizeof m[0]);
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->partial, sizeof m->partial, "%s.partial", path);
    m->f = fopen(m->partial, "w");
    if (!m->f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot write metrics: %s", m->partial, strerror(errno));
    return DL_OK;
}

void dl_metrics_write(struct dl_metrics *m, const char *event, int n, const char *const *keys,
                      const double *values)
{
    if (!m->f)
        return;
    fprintf(m->f, "{\"event\":\"%s\"", event);
    for (int i = 0; i < n; i++) {
        if (isfinite(values[i]))
            fprintf(m->f, ",\"%s\":%.9g", keys[i], values[i]);
        else
            fprintf(m->f, ",\"%s\":null", keys[i]);
    }
    fputs("}\n", m->f);
    fflush(m->f);
}

int dl_metrics_close(struct dl_metrics *m, struct dl_error *err)
{
    if (!m->f)
        return DL_OK;
    int bad = fflush(m->f) != 0 || fsync(fileno(m->f)) != 0;
    bad |= fclose(m->f) != 0;
    m->f = NULL;
    if (bad)
        return dl_errorf(err, DL_ERR_IO, "%s: write failed: %s", m->partial, strerror(errno));
    if (rename(m->partial, m->path) != 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot rename to %s: %s", m->partial, m->path, strerror(errno));
    return DL_OK;
}
