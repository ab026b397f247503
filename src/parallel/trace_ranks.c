/* trace_ranks.c: clock alignment of the ranks at the start of a traced run
 * and the gathering of their events into one file at its end (see
 * trace_ranks.h). */
#include "parallel/trace_ranks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/tags.h"
#include "io/trace_json.h"

#define CLOCK_ROUNDS 8 /* round trips per rank; the quickest one counts */
#define CLOCK_ID_BYTES 64

/* This rank's clock as the trace sees it. */
static double trace_clock(const struct dl_trace *tr)
{
    return dl_clock_now() + tr->skew;
}

/* Which CLOCK_MONOTONIC this process reads: the kernel's boot id (the
 * host name when it cannot be read); a skewed clock (testing aid) is a
 * clock of its own. */
static void clock_id(const struct dl_trace *tr, char id[CLOCK_ID_BYTES])
{
    memset(id, 0, CLOCK_ID_BYTES);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(id, CLOCK_ID_BYTES - 16, f))
        gethostname(id, CLOCK_ID_BYTES - 16);
    if (f)
        fclose(f);
    id[strcspn(id, "\n")] = 0;
    if (tr->skew != 0)
        snprintf(id + strlen(id), 16, "+skew%d", tr->rank);
}

/* Rank 0 answers every ping of rank r with its clock. */
static int answer_pings(struct dl_trace *tr, struct dl_comm *c, int r, struct dl_error *err)
{
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        char ping;
        int rc = c->ops->recv(c, &ping, 1, r, DL_TAG_TRACE_CLOCK, err);
        double now = trace_clock(tr);
        if (!rc)
            rc = c->ops->send(c, &now, sizeof now, r, DL_TAG_TRACE_CLOCK, err);
        if (rc)
            return rc;
    }
    return DL_OK;
}

/* Rank r's side: rank 0's clock read between a ping's departure a and the
 * answer's arrival b is estimated as at (a + b) / 2, within (b - a) / 2. */
static int ping_rank0(struct dl_trace *tr, struct dl_comm *c, struct dl_error *err)
{
    double best = -1;
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        char ping = 0;
        double theirs;
        double a = trace_clock(tr);
        int rc = c->ops->send(c, &ping, 1, 0, DL_TAG_TRACE_CLOCK, err);
        if (!rc)
            rc = c->ops->recv(c, &theirs, sizeof theirs, 0, DL_TAG_TRACE_CLOCK, err);
        double b = trace_clock(tr);
        if (rc)
            return rc;
        if (best < 0 || b - a < best) {
            best = b - a;
            tr->offset = theirs - (a + b) / 2;
        }
    }
    tr->rtt = best;
    return DL_OK;
}

int dl_trace_align(struct dl_trace *tr, struct dl_comm *world, struct dl_error *err)
{
    tr->offset = 0;
    tr->rtt = 0;
    if (!world || world->size == 1) {
        tr->origin = trace_clock(tr);
        return DL_OK;
    }
    char mine[CLOCK_ID_BYTES];
    clock_id(tr, mine);
    char *ids = dl_calloc((size_t)world->size, CLOCK_ID_BYTES, err);
    if (!ids)
        return DL_ERR_NOMEM;
    int rc = world->ops->allgather(world, mine, ids, CLOCK_ID_BYTES, err);
    for (int r = 1; r < world->size && !rc; r++) {
        if (memcmp(ids + (size_t)r * CLOCK_ID_BYTES, ids, CLOCK_ID_BYTES) == 0)
            continue; /* rank 0's clock */
        if (world->rank == 0)
            rc = answer_pings(tr, world, r, err);
        else if (world->rank == r)
            rc = ping_rank0(tr, world, err);
    }
    free(ids);
    double origin = trace_clock(tr);
    if (!rc)
        rc = world->ops->bcast(world, &origin, sizeof origin, 0, err);
    tr->origin = origin;
    if (rc)
        dl_error_prefix(err, "--trace: aligning the ranks' clocks");
    return rc;
}

/* Rank 0 receives rank r's text (empty when r could not render it). */
static int receive_text(struct dl_comm *c, int r, struct dl_trace_text *t, struct dl_error *err)
{
    uint64_t len[2];
    memset(t, 0, sizeof *t);
    int rc = c->ops->recv(c, len, sizeof len, r, DL_TAG_TRACE_EVENTS, err);
    if (rc)
        return rc;
    t->events = malloc(len[0] + 1);
    t->summary = malloc(len[1] + 1);
    if (!t->events || !t->summary) {
        dl_trace_text_free(t);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory receiving the trace of rank %d", r);
    }
    t->events_len = (size_t)len[0];
    t->summary_len = (size_t)len[1];
    if (len[0])
        rc = c->ops->recv(c, t->events, t->events_len, r, DL_TAG_TRACE_EVENTS, err);
    if (!rc && len[1])
        rc = c->ops->recv(c, t->summary, t->summary_len, r, DL_TAG_TRACE_EVENTS, err);
    return rc;
}

static int send_text(struct dl_comm *c, const struct dl_trace_text *t, struct dl_error *err)
{
    uint64_t len[2] = {t->events_len, t->summary_len};
    int rc = c->ops->send(c, len, sizeof len, 0, DL_TAG_TRACE_EVENTS, err);
    if (!rc && len[0])
        rc = c->ops->send(c, t->events, t->events_len, 0, DL_TAG_TRACE_EVENTS, err);
    if (!rc && len[1])
        rc = c->ops->send(c, t->summary, t->summary_len, 0, DL_TAG_TRACE_EVENTS, err);
    return rc;
}

int dl_trace_gather_write(const struct dl_trace *tr, struct dl_comm *world, const char *path, struct dl_error *err)
{
    int size = world ? world->size : 1, rank = world ? world->rank : 0;
    struct dl_trace_text mine;
    struct dl_error render_err = {0};
    int render_rc = dl_trace_json_rank(tr, &mine, &render_err);
    if (rank != 0) { /* an empty text when rendering failed: rank 0 must not wait for one */
        int rc = send_text(world, &mine, err);
        dl_trace_text_free(&mine);
        if (!rc && render_rc)
            *err = render_err;
        return rc ? rc : render_rc;
    }
    struct dl_trace_file tf;
    struct dl_error file_err = render_err;
    int file_rc = render_rc ? render_rc : dl_trace_file_open(&tf, path, size, &file_err);
    if (!file_rc)
        file_rc = dl_trace_file_add(&tf, &mine, &file_err);
    dl_trace_text_free(&mine);
    int rc = DL_OK;
    for (int r = 1; r < size && !rc; r++) { /* received even when the file failed, so no sender waits */
        struct dl_trace_text theirs;
        rc = receive_text(world, r, &theirs, err);
        if (!rc && !file_rc && theirs.events_len)
            file_rc = dl_trace_file_add(&tf, &theirs, &file_err);
        dl_trace_text_free(&theirs);
    }
    if (!render_rc && (rc || file_rc))
        dl_trace_file_abort(&tf);
    else if (!render_rc)
        file_rc = dl_trace_file_commit(&tf, &file_err);
    if (!rc && file_rc) {
        *err = file_err;
        rc = file_rc;
    }
    if (rc)
        dl_error_prefix(err, "--trace %s", path);
    return rc;
}

int dl_trace_write_alone(const struct dl_trace *tr, int world_size, const char *path, char *written, size_t size,
                         struct dl_error *err)
{
    if (world_size > 1)
        snprintf(written, size, "%s.rank%d", path, tr->rank);
    else
        snprintf(written, size, "%s", path);
    struct dl_trace_text mine;
    struct dl_trace_file tf;
    int rc = dl_trace_json_rank(tr, &mine, err);
    if (rc)
        return rc;
    rc = dl_trace_file_open(&tf, written, world_size, err);
    if (!rc)
        rc = dl_trace_file_add(&tf, &mine, err);
    if (!rc)
        rc = dl_trace_file_commit(&tf, err);
    else
        dl_trace_file_abort(&tf);
    dl_trace_text_free(&mine);
    if (rc)
        dl_error_prefix(err, "--trace %s", written);
    return rc;
}
