/* trace_json.c: a rank's recorded events as Chrome trace-event JSON, and
 * the file that holds every rank's (see trace_json.h).  Times are printed
 * as whole nanoseconds (three decimals of a microsecond) computed once per
 * instant, so spans that nest on the clock nest in the file too. */
#include "io/trace_json.h"

#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gaps shorter than this stay out of the idle thread (the loop between two
 * layers); the summary's idle time counts every gap. */
#define IDLE_EVENT_MIN_S 10e-6

enum { TID_COMPUTE, TID_COMM, TID_IDLE };

/* A growing text; after a failed allocation it stays failed. */
struct text {
    char *s;
    size_t n, cap;
    int failed;
};

static void put(struct text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->failed; pass++) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap - b->n <= (size_t)k)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* s as a JSON string: runs of plain characters copied as they are. */
static void put_string(struct text *b, const char *s)
{
    put(b, "\"");
    while (*s) {
        size_t plain = strcspn(s, "\"\\\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11"
                                  "\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f");
        if (plain)
            put(b, "%.*s", (int)plain, s);
        s += plain;
        if (!*s)
            break;
        unsigned char c = (unsigned char)*s++;
        if (c == '"' || c == '\\')
            put(b, "\\%c", c);
        else
            put(b, "\\u%04x", c);
    }
    put(b, "\"");
}

/* A reading of this rank's clock on rank 0's, in ns since the origin. */
static long long ns_of(const struct dl_trace *tr, double t)
{
    return llround((t + tr->skew + tr->offset - tr->origin) * 1e9);
}

static void put_us(struct text *b, long long ns)
{
    put(b, "%.3f", (double)ns / 1e3);
}

/* The event's name as shown: steps and passes carry their number. */
static void put_name(struct text *b, const struct dl_trace_event *ev)
{
    char buf[96];
    const char *name = ev->name ? ev->name : "?";
    if (ev->kind == DL_TRACE_STEP)
        snprintf(buf, sizeof buf, "step %ld", ev->step), name = buf;
    else if (ev->kind == DL_TRACE_PASS)
        snprintf(buf, sizeof buf, "%s chunk %d", name, ev->chunk), name = buf;
    put_string(b, name);
}

static void put_event(struct text *b, const struct dl_trace *tr, int tid, const struct dl_trace_event *ev)
{
    static const char *const dirs[] = {NULL, "forward", "backward"};
    long long t0 = ns_of(tr, ev->t0), t1 = ns_of(tr, ev->t1);
    if (t1 < t0)
        t1 = t0;
    put(b, ",\n{\"name\":");
    put_name(b, ev);
    put(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", dl_trace_kind_names[ev->kind], tr->rank, tid);
    put_us(b, t0);
    put(b, ",\"dur\":");
    put_us(b, t1 - t0);
    put(b, ",\"args\":{\"step\":%ld", ev->step);
    if (ev->chunk >= 0)
        put(b, ",\"chunk\":%d", ev->chunk);
    if (ev->dir && ev->dir < 3)
        put(b, ",\"direction\":\"%s\"", dirs[ev->dir]);
    if (ev->detail) {
        put(b, ",\"%s\":", ev->kind == DL_TRACE_LAYER ? "kernel" : "detail");
        put_string(b, ev->detail);
    }
    if (ev->tensor) {
        put(b, ",\"tensor\":");
        put_string(b, ev->tensor);
    }
    if (ev->peer >= 0)
        put(b, ",\"peer_stage\":%d", ev->peer);
    if (ev->index >= 0)
        put(b, ",\"bucket\":%d", ev->index);
    if (ev->bytes > 0)
        put(b, ",\"bytes\":%ld", ev->bytes);
    put(b, "}}");
}

/* Earlier first; of two starting together the longer (enclosing) one. */
static int by_start(const void *pa, const void *pb)
{
    const struct dl_trace_event *a = pa, *b = pb;
    if (a->t0 != b->t0)
        return a->t0 < b->t0 ? -1 : 1;
    return (a->t1 < b->t1) - (a->t1 > b->t1);
}

static int busy(const struct dl_trace_event *ev)
{
    return ev->kind == DL_TRACE_LAYER || ev->kind == DL_TRACE_REORDER || ev->kind == DL_TRACE_OPTIMIZER;
}

struct idle_sums {
    double busy, idle;
    long steps;
};

/* The idle thread: within every step span of the compute lane (sorted by
 * start), the gaps between busy spans. */
static void put_idle(struct text *b, const struct dl_trace *tr, const struct dl_trace_event *ev, long n,
                     struct idle_sums *sum)
{
    long k = 0; /* busy spans before k end before the current step */
    for (long i = 0; i < n; i++) {
        if (ev[i].kind != DL_TRACE_STEP)
            continue;
        const struct dl_trace_event *step = &ev[i];
        double at = step->t0;
        sum->steps++;
        for (;;) {
            while (k < n && (!busy(&ev[k]) || ev[k].t1 <= at)) /* not busy, or already counted */
                k++;
            int inside = k < n && ev[k].t0 < step->t1;
            double until = inside ? ev[k].t0 : step->t1;
            if (until > at) {
                sum->idle += until - at;
                if (until - at >= IDLE_EVENT_MIN_S) {
                    put(b, ",\n{\"name\":\"idle\",\"cat\":\"idle\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
                        tr->rank, TID_IDLE);
                    put_us(b, ns_of(tr, at));
                    put(b, ",\"dur\":");
                    put_us(b, ns_of(tr, until) - ns_of(tr, at));
                    put(b, ",\"args\":{\"step\":%ld}}", step->step);
                }
            }
            if (!inside)
                break;
            sum->busy += (ev[k].t1 < step->t1 ? ev[k].t1 : step->t1) - (ev[k].t0 > at ? ev[k].t0 : at);
            at = ev[k].t1;
        }
    }
}

static void put_metadata(struct text *b, const struct dl_trace *tr)
{
    static const char *const threads[] = {"compute", "communication", "idle"};
    put(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%d,%d,%d)\"}}",
        tr->rank, tr->rank, tr->d, tr->t, tr->p);
    put(b, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
        tr->rank, tr->rank);
    for (int tid = 0; tid < 3; tid++) {
        put(b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", tr->rank,
            tid, threads[tid]);
        put(b, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            tr->rank, tid, tid);
    }
}

int dl_trace_json_rank(const struct dl_trace *tr, struct dl_trace_text *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    struct text b = {0}, s = {0};
    struct idle_sums sum = {0};
    long events = 0, dropped = 0;
    put_metadata(&b, tr);
    for (int lane = 0; lane < DL_TRACE_LANES; lane++) {
        long n = 0;
        struct dl_trace_event *ev = dl_trace_events(tr, (enum dl_trace_lane)lane, &n, err);
        if (!ev) {
            free(b.s);
            return DL_ERR_NOMEM;
        }
        qsort(ev, (size_t)n, sizeof *ev, by_start);
        for (long i = 0; i < n; i++)
            put_event(&b, tr, lane == DL_TRACE_COMPUTE ? TID_COMPUTE : TID_COMM, &ev[i]);
        if (lane == DL_TRACE_COMPUTE)
            put_idle(&b, tr, ev, n, &sum);
        free(ev);
        events += n;
        dropped += tr->lane[lane].dropped;
    }
    double wall = sum.busy + sum.idle;
    put(&s, "{\"rank\":%d,\"position\":{\"d\":%d,\"t\":%d,\"p\":%d},\"clock_offset_us\":%.3f,\"clock_rtt_us\":%.3f,"
        "\"first_step\":%ld,\"steps_recorded\":%ld,\"busy_s\":%.6f,\"idle_s\":%.6f,\"idle_fraction\":%.4f,"
        "\"events\":%ld,\"dropped_events\":%ld}",
        tr->rank, tr->d, tr->t, tr->p, 1e6 * tr->offset, 1e6 * tr->rtt, tr->first_step, sum.steps,
        sum.busy, sum.idle, wall > 0 ? sum.idle / wall : 0, events, dropped);
    if (b.failed || s.failed) {
        free(b.s);
        free(s.s);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory writing the trace of rank %d", tr->rank);
    }
    *out = (struct dl_trace_text){b.s, s.s, b.n, s.n};
    return DL_OK;
}

void dl_trace_text_free(struct dl_trace_text *t)
{
    free(t->events);
    free(t->summary);
    memset(t, 0, sizeof *t);
}

int dl_trace_file_open(struct dl_trace_file *tf, const char *path, int ranks, struct dl_error *err)
{
    memset(tf, 0, sizeof *tf);
    int rc = dl_atomic_open(&tf->f, path, NULL, err);
    if (rc)
        return rc;
    char head[256];
    int n = snprintf(head, sizeof head,
                     "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"dltrain %s\",\"ranks\":%d},\n"
                     "\"traceEvents\":[\n", PACKAGE_VERSION, ranks);
    return dl_atomic_write(&tf->f, head, (size_t)n, err);
}

int dl_trace_file_add(struct dl_trace_file *tf, const struct dl_trace_text *t, struct dl_error *err)
{
    if (tf->ranks && dl_atomic_write(&tf->f, ",\n", 2, err))
        return err ? err->code : DL_ERR_IO;
    int rc = dl_atomic_write(&tf->f, t->events, t->events_len, err);
    if (rc)
        return rc;
    char *s = realloc(tf->summaries, tf->summaries_len + t->summary_len + 3);
    if (!s)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory writing the trace");
    tf->summaries = s;
    if (tf->ranks) {
        memcpy(s + tf->summaries_len, ",\n", 2);
        tf->summaries_len += 2;
    }
    memcpy(s + tf->summaries_len, t->summary, t->summary_len);
    tf->summaries_len += t->summary_len;
    tf->ranks++;
    return DL_OK;
}

int dl_trace_file_commit(struct dl_trace_file *tf, struct dl_error *err)
{
    static const char mid[] = "\n],\n\"dltrain\":{\"ranks\":[\n", tail[] = "\n]}}\n";
    int rc = dl_atomic_write(&tf->f, mid, sizeof mid - 1, err);
    if (!rc)
        rc = dl_atomic_write(&tf->f, tf->summaries ? tf->summaries : "", tf->summaries_len, err);
    if (!rc)
        rc = dl_atomic_write(&tf->f, tail, sizeof tail - 1, err);
    if (!rc)
        rc = dl_atomic_commit(&tf->f, err);
    if (rc)
        dl_atomic_abort(&tf->f);
    free(tf->summaries);
    tf->summaries = NULL;
    return rc;
}

void dl_trace_file_abort(struct dl_trace_file *tf)
{
    dl_atomic_abort(&tf->f);
    free(tf->summaries);
    tf->summaries = NULL;
}
