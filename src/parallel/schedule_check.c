/* schedule_check.c: runs a pipeline schedule's per-rank lists in the
 * execution model of schedule.h (compute and sends never block, a receive
 * waits for its send), checking every rule as it goes and keeping each
 * rank's clock under given pass costs: dl_schedule_check proves a schedule
 * sound, dl_schedule_simulate times it (the pipeline bubble). */
#include "parallel/schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What has happened to a (chunk, stage). */
enum { RAN_FORWARD = 1, RAN_BACKWARD_INPUT = 2, RAN_BACKWARD_WEIGHT = 4 };
/* What has happened to a message. */
enum { MSG_SENT = 1, MSG_RECEIVED = 2 };

struct replay {
    const struct dl_schedule *s;
    const struct dl_sched_costs *costs; /* NULL: no clocks */
    int S;                              /* stages, P * V */
    unsigned char *ran;                 /* [M * S] by chunk * S + stage */
    unsigned char *msg;                 /* [2 * M * S] by message_index() */
    double *arrival;                    /* [2 * M * S] */
    int *pc;                            /* [P]: next action of each rank */
    int *in_flight, *max_in_flight;     /* [P] */
    double *clock, *busy;               /* [P] */
};

static int message_index(const struct replay *r, int is_grad, int chunk, int from_stage)
{
    return (is_grad * r->s->M + chunk) * r->S + from_stage;
}

/* "schedule interleaved:2 P=4 M=8", the start of every message. */
static const char *title(const struct dl_schedule *s, char *buf, size_t size)
{
    if (s->kind == DL_SCHED_INTERLEAVED)
        snprintf(buf, size, "schedule interleaved:%d P=%d M=%d", s->V, s->P, s->M);
    else
        snprintf(buf, size, "schedule %s P=%d M=%d", dl_schedule_kind_name(s->kind), s->P, s->M);
    return buf;
}

/* "schedule 1f1b P=4 M=8: rank 1, action 5 (recv-act chunk 2 stage 1 from
 * rank 0): " followed by the problem. */
static int violation(const struct replay *r, int rank, int index, struct dl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int violation(const struct replay *r, int rank, int index, struct dl_error *err, const char *fmt, ...)
{
    char what[512], action[96], name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    dl_sched_action_text(&r->s->a[rank][index], action, sizeof action);
    return dl_errorf(err, DL_ERR_INTERNAL, "%s: rank %d, action %d (%s): %s", title(r->s, name, sizeof name), rank,
                     index, action, what);
}

static double cost(const double *per_stage, int stage)
{
    return per_stage ? per_stage[stage] : 0.0;
}

/* Where the action's stage, op and peer break the model, a message. */
static const char *malformed(const struct replay *r, int rank, const struct dl_sched_action *a, char *buf,
                             size_t size)
{
    const struct dl_schedule *s = r->s;
    int split = s->kind == DL_SCHED_ZB_H1;
    if (a->chunk < 0 || a->chunk >= s->M || a->stage < 0 || a->stage >= r->S) {
        snprintf(buf, size, "chunk or stage out of range (chunks 0..%d, stages 0..%d)", s->M - 1, r->S - 1);
        return buf;
    }
    if (a->stage % s->P != rank) {
        snprintf(buf, size, "stage %d is held by rank %d", a->stage, a->stage % s->P);
        return buf;
    }
    if ((unsigned)a->op > DL_SCHED_RECV_GRAD)
        return "unknown op";
    if (a->op == DL_SCHED_BACKWARD && split)
        return "zb-h1 splits every backward into backward-input and backward-weight";
    if ((a->op == DL_SCHED_BACKWARD_INPUT || a->op == DL_SCHED_BACKWARD_WEIGHT) && !split)
        return "only zb-h1 splits the backward";
    int to_next = a->op == DL_SCHED_SEND_ACT || a->op == DL_SCHED_RECV_GRAD;
    int to_previous = a->op == DL_SCHED_SEND_GRAD || a->op == DL_SCHED_RECV_ACT;
    if (to_next && a->stage == r->S - 1)
        return "the last stage has no next stage to exchange with";
    if (to_previous && a->stage == 0)
        return "the first stage has no previous stage to exchange with";
    int peer = to_next ? (a->stage + 1) % s->P : to_previous ? (a->stage - 1) % s->P : -1;
    if (a->peer != peer) {
        snprintf(buf, size, "peer %d, expected %d", a->peer, peer);
        return buf;
    }
    return NULL;
}

/* Runs one action of a rank; *blocked = 1 (nothing done) when it is a
 * receive whose send has not been issued yet. */
static int step(struct replay *r, int rank, int *blocked, struct dl_error *err)
{
    const struct dl_schedule *s = r->s;
    int i = r->pc[rank];
    const struct dl_sched_action *a = &s->a[rank][i];
    char buf[160];
    const char *bad = malformed(r, rank, a, buf, sizeof buf);
    if (bad)
        return violation(r, rank, i, err, "%s", bad);
    const struct dl_sched_costs *c = r->costs;
    unsigned char *ran = &r->ran[a->chunk * r->S + a->stage];
    double *clock = &r->clock[rank];
    *blocked = 0;
    switch (a->op) {
    case DL_SCHED_FORWARD:
        if (*ran & RAN_FORWARD)
            return violation(r, rank, i, err, "runs a second time");
        if (a->stage > 0 && !(r->msg[message_index(r, 0, a->chunk, a->stage - 1)] & MSG_RECEIVED))
            return violation(r, rank, i, err, "its input activation has not been received");
        *ran |= RAN_FORWARD;
        if (++r->in_flight[rank] > r->max_in_flight[rank])
            r->max_in_flight[rank] = r->in_flight[rank];
        if (r->in_flight[rank] > dl_schedule_bound(s, rank))
            return violation(r, rank, i, err, "%d chunks in flight, above the schedule's bound %d",
                             r->in_flight[rank], dl_schedule_bound(s, rank));
        if (c)
            *clock += cost(c->fwd, a->stage);
        return DL_OK;
    case DL_SCHED_BACKWARD:
    case DL_SCHED_BACKWARD_INPUT:
        if (!(*ran & RAN_FORWARD))
            return violation(r, rank, i, err, "its forward has not run");
        if (*ran & RAN_BACKWARD_INPUT)
            return violation(r, rank, i, err, "runs a second time");
        if (a->stage < r->S - 1 && !(r->msg[message_index(r, 1, a->chunk, a->stage + 1)] & MSG_RECEIVED))
            return violation(r, rank, i, err, "the gradient of its output has not been received");
        *ran |= RAN_BACKWARD_INPUT;
        if (a->op == DL_SCHED_BACKWARD) {
            *ran |= RAN_BACKWARD_WEIGHT;
            r->in_flight[rank]--;
        }
        if (c)
            *clock += cost(c->bwd_in, a->stage) + (a->op == DL_SCHED_BACKWARD ? cost(c->bwd_w, a->stage) : 0.0);
        return DL_OK;
    case DL_SCHED_BACKWARD_WEIGHT:
        if (!(*ran & RAN_BACKWARD_INPUT))
            return violation(r, rank, i, err, "its backward-input has not run");
        if (*ran & RAN_BACKWARD_WEIGHT)
            return violation(r, rank, i, err, "runs a second time");
        *ran |= RAN_BACKWARD_WEIGHT;
        r->in_flight[rank]--;
        if (c)
            *clock += cost(c->bwd_w, a->stage);
        return DL_OK;
    case DL_SCHED_SEND_ACT:
    case DL_SCHED_SEND_GRAD: {
        int is_grad = a->op == DL_SCHED_SEND_GRAD;
        if (!(*ran & (is_grad ? RAN_BACKWARD_INPUT : RAN_FORWARD)))
            return violation(r, rank, i, err, "sends %s its %s has not computed yet",
                             is_grad ? "a gradient" : "an activation", is_grad ? "backward" : "forward");
        int m = message_index(r, is_grad, a->chunk, a->stage);
        if (r->msg[m] & MSG_SENT)
            return violation(r, rank, i, err, "sends a second time");
        r->msg[m] |= MSG_SENT;
        r->arrival[m] = *clock + (c ? c->send_latency : 0.0);
        return DL_OK;
    }
    case DL_SCHED_RECV_ACT:
    case DL_SCHED_RECV_GRAD: {
        int is_grad = a->op == DL_SCHED_RECV_GRAD;
        int m = message_index(r, is_grad, a->chunk, a->stage + (is_grad ? 1 : -1));
        if (r->msg[m] & MSG_RECEIVED)
            return violation(r, rank, i, err, "receives a second time");
        if (!(r->msg[m] & MSG_SENT)) {
            *blocked = 1;
            return DL_OK;
        }
        r->msg[m] |= MSG_RECEIVED;
        if (*clock < r->arrival[m])
            *clock = r->arrival[m];
        return DL_OK;
    }
    }
    return violation(r, rank, i, err, "unknown op");
}

/* Every unfinished rank waits on a receive: say who waits for what, and
 * whether the sender is itself waiting or has finished without sending. */
static int deadlock(const struct replay *r, struct dl_error *err)
{
    const struct dl_schedule *s = r->s;
    char msg[900], action[96], name[64];
    size_t used = 0;
    msg[0] = 0;
    for (int p = 0; p < s->P && used < sizeof msg; p++) {
        if (r->pc[p] == s->n[p])
            continue;
        const struct dl_sched_action *a = &s->a[p][r->pc[p]];
        int q = a->peer;
        int n = snprintf(msg + used, sizeof msg - used, "%srank %d waits at action %d (%s), rank %d %s",
                         used ? "; " : "", p, r->pc[p], dl_sched_action_text(a, action, sizeof action), q,
                         r->pc[q] == s->n[q] ? "has finished without sending it" : "is waiting too");
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return dl_errorf(err, DL_ERR_INTERNAL, "%s: deadlock: %s", title(s, name, sizeof name), msg);
}

/* After the run: every message sent was received and every pass ran. */
static int completeness(const struct replay *r, struct dl_error *err)
{
    const struct dl_schedule *s = r->s;
    /* A whole backward sets both backward bits, so only zb-h1 can miss one. */
    static const char *const passes[] = {"forward", "backward (input gradient)", "backward (weight gradient)"};
    char name[64];
    for (int c = 0; c < s->M; c++)
        for (int st = 0; st < r->S; st++)
            for (int g = 0; g < 2; g++)
                if (r->msg[message_index(r, g, c, st)] == MSG_SENT)
                    return dl_errorf(err, DL_ERR_INTERNAL, "%s: the %s of chunk %d sent by stage %d is never received",
                                     title(s, name, sizeof name), g ? "gradient" : "activation", c, st);
    for (int c = 0; c < s->M; c++)
        for (int st = 0; st < r->S; st++)
            for (int k = 0; k < 3; k++)
                if (!(r->ran[c * r->S + st] & (1 << k))) {
                    const char *pass = s->kind == DL_SCHED_ZB_H1 || !k ? passes[k] : "backward";
                    return dl_errorf(err, DL_ERR_INTERNAL, "%s: the %s of chunk %d on stage %d (rank %d) never runs",
                                     title(s, name, sizeof name), pass, c, st, st % s->P);
                }
    return DL_OK;
}

static void replay_free(struct replay *r)
{
    free(r->ran);
    free(r->msg);
    free(r->arrival);
    free(r->pc);
    free(r->in_flight);
    free(r->max_in_flight);
    free(r->clock);
    free(r->busy);
}

/* Runs the ranks round-robin, each as far as it can, until all have
 * finished or none can move (a deadlock). */
static int replay(struct replay *r, struct dl_error *err)
{
    const struct dl_schedule *s = r->s;
    if (s->P < 1 || s->M < 1 || s->V < 1 || (long)s->P * s->V > DL_SCHED_MAX_STAGES || s->M > DL_SCHED_MAX_CHUNKS ||
        !s->n || !s->a)
        return dl_errorf(err, DL_ERR_INTERNAL, "schedule: malformed header (P=%d, M=%d, V=%d)", s->P, s->M, s->V);
    r->S = s->P * s->V;
    size_t units = (size_t)s->M * (size_t)r->S, P = (size_t)s->P;
    r->ran = dl_calloc(units, 1, err);
    r->msg = dl_calloc(2 * units, 1, err);
    r->arrival = dl_calloc(2 * units, sizeof *r->arrival, err);
    r->pc = dl_calloc(P, sizeof *r->pc, err);
    r->in_flight = dl_calloc(P, sizeof *r->in_flight, err);
    r->max_in_flight = dl_calloc(P, sizeof *r->max_in_flight, err);
    r->clock = dl_calloc(P, sizeof *r->clock, err);
    r->busy = dl_calloc(P, sizeof *r->busy, err);
    if (!r->ran || !r->msg || !r->arrival || !r->pc || !r->in_flight || !r->max_in_flight || !r->clock || !r->busy)
        return DL_ERR_NOMEM;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int p = 0; p < s->P; p++)
            while (r->pc[p] < s->n[p]) {
                int blocked;
                double before = r->clock[p];
                enum dl_sched_op op = s->a[p][r->pc[p]].op;
                int rc = step(r, p, &blocked, err);
                if (rc)
                    return rc;
                if (blocked)
                    break;
                if (op <= DL_SCHED_BACKWARD_WEIGHT)
                    r->busy[p] += r->clock[p] - before;
                r->pc[p]++;
                moved = 1;
            }
    }
    for (int p = 0; p < s->P; p++)
        if (r->pc[p] < s->n[p])
            return deadlock(r, err);
    return completeness(r, err);
}

int dl_schedule_check(const struct dl_schedule *s, int *max_in_flight, struct dl_error *err)
{
    struct replay r = {.s = s};
    int rc = replay(&r, err);
    if (!rc && max_in_flight)
        memcpy(max_in_flight, r.max_in_flight, sizeof *max_in_flight * (size_t)s->P);
    replay_free(&r);
    return rc;
}

int dl_schedule_simulate(const struct dl_schedule *s, const struct dl_sched_costs *costs, double *makespan,
                         double *busy, double *idle_fraction, struct dl_error *err)
{
    if (!costs || !costs->fwd || !costs->bwd_in)
        return dl_errorf(err, DL_ERR_INTERNAL, "schedule simulation: forward and backward costs are required");
    struct replay r = {.s = s, .costs = costs};
    int rc = replay(&r, err);
    if (!rc) {
        double end = 0, total_busy = 0;
        for (int p = 0; p < s->P; p++) {
            end = r.clock[p] > end ? r.clock[p] : end;
            total_busy += r.busy[p];
            if (busy)
                busy[p] = r.busy[p];
        }
        *makespan = end;
        *idle_fraction = end > 0 ? 1.0 - total_busy / (s->P * end) : 0.0;
    }
    replay_free(&r);
    return rc;
}
