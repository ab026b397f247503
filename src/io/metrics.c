/* metrics.c: JSON-lines metrics writer (see metrics.h). */
#include "io/metrics.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_metrics_open(struct dl_metrics *m, const char *path, struct dl_error *err)
{
    memset(m, 0, sizeof m[0]);
    int rc = dl_atomic_open(&m->file, path, ".partial", err);
    if (rc)
        dl_error_prefix(err, "cannot write metrics");
    m->open = !rc;
    return rc;
}

void dl_metrics_write(struct dl_metrics *m, const char *event, int n, const char *const *keys,
                      const double *values)
{
    if (!m->open)
        return;
    char line[4096];
    size_t len = (size_t)snprintf(line, sizeof line, "{\"event\":\"%s\"", event);
    for (int i = 0; i < n && len < sizeof line; i++) {
        if (isfinite(values[i]))
            len += (size_t)snprintf(line + len, sizeof line - len, ",\"%s\":%.9g", keys[i], values[i]);
        else
            len += (size_t)snprintf(line + len, sizeof line - len, ",\"%s\":null", keys[i]);
    }
    if (len < sizeof line)
        len += (size_t)snprintf(line + len, sizeof line - len, "}\n");
    if (len >= sizeof line)
        len = sizeof line - 1;
    dl_atomic_write(&m->file, line, len, NULL);
    dl_atomic_flush(&m->file, NULL);
}

void dl_metrics_write_experts(struct dl_metrics *m, long step, const char *layer, int experts, const float *taken,
                              double dropped, double choices)
{
    if (!m->open)
        return;
    json_t *counts = json_array();
    for (int e = 0; e < experts; e++)
        json_array_append_new(counts, json_real(taken[e]));
    json_t *o = json_pack("{s:s, s:I, s:s, s:o, s:f, s:f}", "event", "experts", "global_step", (json_int_t)step,
                          "layer", layer, "taken", counts, "dropped", dropped, "choices", choices);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    if (text) {
        dl_atomic_write(&m->file, text, strlen(text), NULL);
        dl_atomic_write(&m->file, "\n", 1, NULL);
        dl_atomic_flush(&m->file, NULL);
    }
    free(text);
    json_decref(o);
}

int dl_metrics_close(struct dl_metrics *m, struct dl_error *err)
{
    if (!m->open)
        return DL_OK;
    m->open = 0;
    return dl_atomic_commit(&m->file, err);
}
