/* metrics_read.c: --metrics JSON lines read back (see metrics_read.h),
 * parsed by jansson line by line. */
#include "io/metrics_read.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_column_push(struct dl_column *c, double v)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 256;
        double *nv = realloc(c->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        c->v = nv, c->cap = cap;
    }
    c->v[c->n++] = v;
    return 0;
}

void dl_metrics_run_free(struct dl_metrics_run *r)
{
    struct dl_column *c[] = {&r->step, &r->time, &r->loss, &r->accuracy, &r->rate, &r->expert_load,
                             &r->expert_dropped, &r->aux_loss, &r->vstep, &r->vtime, &r->vloss, &r->vaccuracy};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        free(c[i]->v);
    memset(r, 0, sizeof *r);
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The time of the step with this global step (NaN when there is none); the
 * steps are in order. */
static double time_at(const struct dl_metrics_run *r, double step)
{
    int lo = 0, hi = r->step.n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (r->step.v[mid] == step)
            return r->time.v[mid];
        if (r->step.v[mid] < step)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NAN;
}

/* A validation point (its time is looked up once the steps are read); one
 * at a step already there (an evaluation at an epoch's end) replaces it. */
static int add_validation(struct dl_metrics_run *r, double step, double loss, double acc)
{
    if (!isfinite(loss) || !isfinite(step))
        return 0;
    for (int i = 0; i < r->vstep.n; i++)
        if (r->vstep.v[i] == step) {
            r->vloss.v[i] = loss, r->vaccuracy.v[i] = acc;
            return 0;
        }
    return dl_column_push(&r->vstep, step) || dl_column_push(&r->vloss, loss) ||
           dl_column_push(&r->vaccuracy, acc) || dl_column_push(&r->vtime, NAN);
}

static int cmp_double(double x, double y)
{
    return x < y ? -1 : x > y ? 1 : 0;
}

struct keyed {
    double step;
    int line;
};

static int by_step(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    int c = cmp_double(x->step, y->step);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* A parameter server's run reports each worker's steps (interleaved, the
 * same global step once per worker): one point per step, the workers' mean. */
static int merge_steps(struct dl_metrics_run *r)
{
    int n = r->step.n, sorted = 1;
    for (int i = 1; i < n && sorted; i++)
        sorted = r->step.v[i] > r->step.v[i - 1];
    if (sorted)
        return 0;
    struct dl_column *cols[] = {&r->step, &r->time, &r->loss, &r->accuracy, &r->rate, &r->expert_load,
                                &r->expert_dropped, &r->aux_loss};
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    struct keyed *order = malloc((size_t)n * sizeof *order);
    double *copy[NCOLS] = {0};
    int ok = order != NULL;
    for (int c = 0; c < NCOLS && ok; c++)
        ok = (copy[c] = malloc((size_t)n * sizeof(double))) != NULL;
    if (ok) {
        for (int i = 0; i < n; i++)
            order[i] = (struct keyed){r->step.v[i], i};
        qsort(order, (size_t)n, sizeof *order, by_step);
        for (int c = 0; c < NCOLS; c++)
            memcpy(copy[c], cols[c]->v, (size_t)n * sizeof(double));
        int m = 0;
        for (int i = 0; i < n;) {
            int j = i;
            double sum[NCOLS] = {0};
            for (; j < n && !cmp_double(order[j].step, order[i].step); j++)
                for (int c = 0; c < NCOLS; c++)
                    sum[c] += copy[c][order[j].line];
            for (int c = 0; c < NCOLS; c++)
                cols[c]->v[m] = sum[c] / (j - i);
            m++, i = j;
        }
        for (int c = 0; c < NCOLS; c++)
            cols[c]->n = m;
    }
    free(order);
    for (int c = 0; c < NCOLS; c++)
        free(copy[c]);
    return ok ? 0 : -1;
}

int dl_metrics_read(const char *path, struct dl_metrics_run *r, struct dl_error *err)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "r");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    double last_step = NAN;
    int rc = DL_OK, oom = 0;
    while (!rc && !oom && getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[strspn(line, " \t\r\n")] == 0)
            continue;
        json_error_t je;
        json_t *o = json_loads(line, JSON_ALLOW_NUL, &je);
        if (!o || !json_is_object(o)) {
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%ld:%d: %s", path, lineno, o ? 1 : je.column,
                           o ? "expected a JSON object (a --metrics line)" : je.text);
        } else {
            const char *ev = json_string_value(json_object_get(o, "event"));
            if (ev && !strcmp(ev, "step") && isfinite(num(o, "global_step"))) {
                last_step = num(o, "global_step");
                double tok = num(o, "tokens_per_s");
                r->tokens |= isfinite(tok);
                oom = dl_column_push(&r->step, last_step) || dl_column_push(&r->time, num(o, "time_s")) ||
                      dl_column_push(&r->loss, num(o, "loss")) || dl_column_push(&r->accuracy, num(o, "accuracy")) ||
                      dl_column_push(&r->rate, isfinite(tok) ? tok : num(o, "samples_per_s")) ||
                      dl_column_push(&r->expert_load, num(o, "expert_max_load")) ||
                      dl_column_push(&r->expert_dropped, num(o, "expert_dropped")) ||
                      dl_column_push(&r->aux_loss, num(o, "aux_loss"));
                r->experts |= isfinite(num(o, "expert_max_load"));
            } else if (ev && !strcmp(ev, "eval")) {
                oom = add_validation(r, num(o, "global_step"), num(o, "test_loss"), num(o, "test_accuracy"));
            } else if (ev && !strcmp(ev, "epoch")) {
                oom = add_validation(r, last_step, num(o, "test_loss"), num(o, "test_accuracy"));
            }
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (!rc && !oom && r->step.n == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no \"step\" lines (a file written by dltrain --metrics?)", path);
    if (!rc && !oom)
        oom = merge_steps(r);
    for (int i = 0; !rc && !oom && i < r->vstep.n; i++) /* the steps are in order now */
        r->vtime.v[i] = time_at(r, r->vstep.v[i]);
    if (!rc && oom)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory reading %s", path);
    if (rc)
        dl_metrics_run_free(r);
    return rc;
}
