/* stall.c: arrival messages and the watchdog that names missing ranks (see
 * stall.h).  Rank 0 keeps one receive posted per other rank; rank 1 keeps one
 * posted for rank 0.  Each message carries the step a rank reached, and -1
 * when it is done, after which its receive is not posted again. */
#include "parallel/stall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/flight.h"
#include "comm/tags.h"

struct watch {
    int peer;
    long msg;              /* receive buffer */
    long reached;          /* last step the peer announced */
    int finished;
    struct dl_comm_req req;
};

struct dl_stall {
    struct dl_comm *c;
    double warn_s, timeout_s;
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
    struct watch *w;       /* ranks this rank watches */
    int n;
    long step;             /* the step this rank waits in */
    long warned_step;
    long out;              /* send buffers: one in flight at a time */
    struct dl_comm_req out_req[2];
};

static int post(struct dl_stall *s, struct watch *w, struct dl_error *err)
{
    return s->c->ops->irecv(s->c, &w->msg, sizeof w->msg, w->peer, DL_TAG_STALL_ARRIVE, &w->req, err);
}

int dl_stall_create(struct dl_comm *c, double warn_s, double timeout_s,
                    void (*warn)(void *ctx, const char *msg), void *warn_ctx, struct dl_stall **out,
                    struct dl_error *err)
{
    struct dl_stall *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    s->c = c;
    s->warn_s = warn_s;
    s->timeout_s = timeout_s;
    s->warn = warn;
    s->warn_ctx = warn_ctx;
    s->warned_step = -1;
    int n = c->size < 2 ? 0 : c->rank == 0 ? c->size - 1 : c->rank == 1 ? 1 : 0;
    s->w = dl_calloc((size_t)(n ? n : 1), sizeof *s->w, err);
    if (!s->w) {
        free(s);
        return DL_ERR_NOMEM;
    }
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->w[i].peer = c->rank == 0 ? i + 1 : 0;
        int rc = post(s, &s->w[i], err);
        if (rc) {
            dl_stall_free(s);
            return rc;
        }
    }
    *out = s;
    return DL_OK;
}

static int send_step(struct dl_stall *s, long value, struct dl_error *err)
{
    struct dl_comm *c = s->c;
    if (c->size < 2)
        return DL_OK;
    /* Complete the previous announcement before reusing the buffer. */
    int rc = dl_comm_waitall(c, s->out_req, 2, err);
    if (rc)
        return rc;
    s->out = value;
    if (c->rank != 0)
        rc = c->ops->isend(c, &s->out, sizeof s->out, 0, DL_TAG_STALL_ARRIVE, &s->out_req[0], err);
    else
        rc = c->ops->isend(c, &s->out, sizeof s->out, 1, DL_TAG_STALL_ARRIVE, &s->out_req[1], err);
    return rc;
}

int dl_stall_arrive(struct dl_stall *s, long step, struct dl_error *err)
{
    s->step = step;
    return send_step(s, step, err);
}

/* Completes every arrived message, re-posting receives. */
static int drain(struct dl_stall *s, struct dl_error *err)
{
    for (int i = 0; i < s->n; i++) {
        struct watch *w = &s->w[i];
        while (!w->finished) {
            int done = 0;
            int rc = s->c->ops->test(s->c, &w->req, &done, err);
            if (rc)
                return rc;
            if (!done)
                break;
            if (w->msg < 0) {
                w->finished = 1;
                break;
            }
            w->reached = w->msg;
            if ((rc = post(s, w, err)))
                return rc;
        }
    }
    return DL_OK;
}

static void missing_list(struct dl_stall *s, char *buf, size_t size, int *count)
{
    size_t used = 0;
    *count = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n; i++)
        if (!s->w[i].finished && s->w[i].reached < s->step) {
            if (used < size)
                used += (size_t)snprintf(buf + used, size - used, "%s%d", *count ? ", " : "", s->w[i].peer);
            (*count)++;
        }
}

int dl_stall_poll(void *ctx, double waited_s, struct dl_error *err)
{
    struct dl_stall *s = ctx;
    int rc = drain(s, err);
    if (rc)
        return rc;
    /* Rank 0 gives up first, so that its message naming the missing ranks is
     * the one the job ends with; rank 1 (which watches rank 0) next; the
     * others last, in case both of those are gone. */
    double timeout = s->timeout_s + (s->c->rank == 0 ? 0 : s->c->rank == 1 ? 1.5 : 3.0);
    if (waited_s < s->warn_s && (s->timeout_s <= 0 || waited_s < timeout))
        return DL_OK;
    char list[256];
    int count;
    missing_list(s, list, sizeof list, &count);
    if (s->timeout_s > 0 && waited_s >= timeout) {
        char found[600]; /* what the ranks' flight records say, when they keep them */
        dl_flight_post_mortem(dl_flight_global(), 5.0, found, sizeof found);
        if (count)
            return dl_errorf(err, DL_ERR_COMM, "stall: rank%s %s did not join the gradient exchange of step %ld "
                             "within %.0f s (--stall-timeout); aborting the job%s%s", count > 1 ? "s" : "", list,
                             s->step, s->timeout_s, *found ? "; " : "", found);
        return dl_errorf(err, DL_ERR_COMM, "stall: the gradient exchange of step %ld did not finish within %.0f s "
                         "(--stall-timeout); aborting the job%s%s", s->step, s->timeout_s, *found ? "; " : "", found);
    }
    if (count && s->warned_step != s->step && s->warn) {
        char msg[512];
        snprintf(msg, sizeof msg, "warning: rank%s %s %s not joined the gradient exchange of step %ld after %.0f s",
                 count > 1 ? "s" : "", list, count > 1 ? "have" : "has", s->step, waited_s);
        s->warned_step = s->step;
        s->warn(s->warn_ctx, msg);
    }
    return DL_OK;
}

int dl_stall_finish(struct dl_stall *s, struct dl_error *err)
{
    int rc = send_step(s, -1, err);
    for (int i = 0; !rc && i < s->n; i++) /* wait for every watched peer's final message */
        while (!rc && !s->w[i].finished) {
            rc = s->c->ops->wait(s->c, &s->w[i].req, err);
            if (!rc && s->w[i].msg < 0)
                s->w[i].finished = 1;
            else if (!rc)
                rc = post(s, &s->w[i], err);
        }
    if (!rc)
        rc = dl_comm_waitall(s->c, s->out_req, 2, err);
    return rc;
}

void dl_stall_free(struct dl_stall *s)
{
    if (!s)
        return;
    free(s->w);
    free(s);
}
