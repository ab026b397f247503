/* trace.c: the --trace recorder (see trace.h): lanes of events in blocks
 * that never move, the window of steps recorded in detail, and the strings
 * events point to. */
#include "io/trace.h"

#include <stdlib.h>
#include <string.h>

const char *const dl_trace_kind_names[DL_TRACE_KINDS] = {
    "step", "data", "pass", "layer", "reorder", "tensor-comm", "send", "recv", "allreduce", "grad-wait",
    "optimizer", "eval", "checkpoint"};

#define BLOCK_EVENTS 4096

struct dl_trace_block {
    struct dl_trace_block *next;
    int n;
    struct dl_trace_event ev[BLOCK_EVENTS];
};

struct dl_trace_string {
    struct dl_trace_string *next;
    char text[];
};

struct dl_trace *dl_trace_create(long max_steps, int rank, int d, int t, int p, struct dl_error *err)
{
    struct dl_trace *tr = dl_calloc(1, sizeof *tr, err);
    if (!tr)
        return NULL;
    tr->max_steps = max_steps;
    tr->rank = rank;
    tr->d = d;
    tr->t = t;
    tr->p = p;
    return tr;
}

void dl_trace_free(struct dl_trace *tr)
{
    if (!tr)
        return;
    for (int l = 0; l < DL_TRACE_LANES; l++)
        for (struct dl_trace_block *b = tr->lane[l].first, *next; b; b = next) {
            next = b->next;
            free(b);
        }
    for (struct dl_trace_string *s = tr->strings, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    free(tr);
}

void dl_trace_step_begin(struct dl_trace *tr, long step)
{
    if (!tr)
        return;
    if (!tr->first_step)
        tr->first_step = step;
    tr->recording = !tr->max_steps || step < tr->first_step + tr->max_steps;
    tr->lane[DL_TRACE_COMPUTE].step = step;
}

void dl_trace_step_end(struct dl_trace *tr, double t0, int happened)
{
    if (!tr)
        return;
    if (!happened) {
        tr->lane[DL_TRACE_COMPUTE].step--; /* later events belong to the step before */
    } else if (tr->recording) {
        dl_trace_span(tr, DL_TRACE_STEP, "step", t0);
        tr->steps++;
    }
    tr->recording = 0;
}

void dl_trace_add(struct dl_trace *tr, enum dl_trace_lane lane, const struct dl_trace_event *ev)
{
    if (!tr)
        return;
    struct dl_trace_lane_buf *L = &tr->lane[lane];
    if (L->n >= DL_TRACE_MAX_EVENTS) {
        L->dropped++;
        return;
    }
    if (!L->last || L->last->n == BLOCK_EVENTS) {
        struct dl_trace_block *b = malloc(sizeof *b);
        if (!b) { /* recording must never stop the run */
            L->dropped++;
            return;
        }
        b->next = NULL;
        b->n = 0;
        if (L->last)
            L->last->next = b;
        else
            L->first = b;
        L->last = b;
    }
    struct dl_trace_event *e = &L->last->ev[L->last->n++];
    *e = *ev;
    e->step = L->step;
    L->n++;
}

void dl_trace_span(struct dl_trace *tr, enum dl_trace_kind kind, const char *name, double t0)
{
    if (!tr)
        return;
    struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = name, .chunk = -1, .peer = -1,
                                .index = -1, .kind = (unsigned char)kind};
    dl_trace_add(tr, DL_TRACE_COMPUTE, &ev);
}

void dl_trace_lane_step(struct dl_trace *tr, enum dl_trace_lane lane, long step)
{
    if (tr)
        tr->lane[lane].step = step;
}

const char *dl_trace_intern(struct dl_trace *tr, const char *s, struct dl_error *err)
{
    for (struct dl_trace_string *x = tr->strings; x; x = x->next)
        if (strcmp(x->text, s) == 0)
            return x->text;
    size_t n = strlen(s) + 1;
    struct dl_trace_string *x = malloc(sizeof *x + n);
    if (!x) {
        dl_errorf(err, DL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(x->text, s, n);
    x->next = tr->strings;
    tr->strings = x;
    return x->text;
}

struct dl_trace_event *dl_trace_events(const struct dl_trace *tr, enum dl_trace_lane lane, long *n,
                                       struct dl_error *err)
{
    const struct dl_trace_lane_buf *L = &tr->lane[lane];
    struct dl_trace_event *out = dl_calloc((size_t)(L->n ? L->n : 1), sizeof *out, err);
    if (!out)
        return NULL;
    long k = 0;
    for (const struct dl_trace_block *b = L->first; b; b = b->next) {
        memcpy(out + k, b->ev, sizeof *out * (size_t)b->n);
        k += b->n;
    }
    *n = k;
    return out;
}
