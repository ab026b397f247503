/* schedule.c: generating the pipeline schedules (gpipe, 1f1b, interleaved:V,
 * zb-h1) as per-rank action lists, their option parsing, in-flight bounds and
 * message tags.  Every kind is one shape: a warm-up of forwards, a steady
 * state of one forward and one backward, a cool-down of backwards; the kinds
 * differ in the warm-up length, the order of (chunk, stage) units and, for
 * zb-h1, the deferred weight-gradient passes.  Checking and timing the lists
 * is schedule_check.c. */
#include "parallel/schedule.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dl_schedule_kind_name(enum dl_pipe_schedule kind)
{
    switch (kind) {
    case DL_SCHED_GPIPE: return "gpipe";
    case DL_SCHED_1F1B: return "1f1b";
    case DL_SCHED_INTERLEAVED: return "interleaved";
    case DL_SCHED_ZB_H1: return "zb-h1";
    }
    return "?";
}

int dl_schedule_parse(const char *text, enum dl_pipe_schedule *kind, int *V, struct dl_error *err)
{
    static const enum dl_pipe_schedule plain[] = {DL_SCHED_GPIPE, DL_SCHED_1F1B, DL_SCHED_ZB_H1};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (strcmp(text, dl_schedule_kind_name(plain[i])) == 0) {
            *kind = plain[i];
            *V = 1;
            return DL_OK;
        }
    if (strncmp(text, "interleaved:", 12) == 0) {
        const char *digits = text + 12;
        char *end;
        errno = 0;
        long v = strtol(digits, &end, 10);
        if (!*digits || *end || errno || v < 2 || v > DL_SCHED_MAX_STAGES / 2)
            return dl_errorf(err, DL_ERR_SPEC,
                             "--pipeline-schedule interleaved:V: expected V, the virtual stages per rank, "
                             "an integer in [2, %d], found '%s'", DL_SCHED_MAX_STAGES / 2, text);
        *kind = DL_SCHED_INTERLEAVED;
        *V = (int)v;
        return DL_OK;
    }
    return dl_errorf(err, DL_ERR_SPEC,
                     "--pipeline-schedule: expected gpipe, 1f1b, interleaved:V or zb-h1, found '%s'", text);
}

/* The rules of dl_schedule_make, each refusal naming its rule. */
static int validate(enum dl_pipe_schedule kind, int P, int M, int V, struct dl_error *err)
{
    const char *name = dl_schedule_kind_name(kind);
    if ((unsigned)kind > DL_SCHED_ZB_H1)
        return dl_errorf(err, DL_ERR_SPEC, "--pipeline-schedule: unknown schedule kind %d", (int)kind);
    if (P < 1)
        return dl_errorf(err, DL_ERR_SPEC, "pipeline stages: expected at least 1 rank, found %d", P);
    if (M < P)
        return dl_errorf(err, DL_ERR_SPEC,
                         "--pipeline-chunks: %d chunks for %d pipeline stages; a pipeline needs at least "
                         "as many chunks as stages (chunks >= stages)", M, P);
    if (M > DL_SCHED_MAX_CHUNKS)
        return dl_errorf(err, DL_ERR_SPEC, "--pipeline-chunks: expected at most %d chunks, found %d",
                         DL_SCHED_MAX_CHUNKS, M);
    if (kind != DL_SCHED_INTERLEAVED) {
        if (V != 1)
            return dl_errorf(err, DL_ERR_SPEC,
                             "--pipeline-schedule %s: one stage per rank (V = 1), found V = %d", name, V);
        if (P > DL_SCHED_MAX_STAGES)
            return dl_errorf(err, DL_ERR_SPEC, "pipeline stages: expected at most %d, found %d",
                             DL_SCHED_MAX_STAGES, P);
        return DL_OK;
    }
    if (V < 2)
        return dl_errorf(err, DL_ERR_SPEC,
                         "--pipeline-schedule interleaved:V: needs V >= 2 virtual stages per rank, found "
                         "V = %d (V = 1 is 1f1b)", V);
    if (P < 2)
        return dl_errorf(err, DL_ERR_SPEC,
                         "--pipeline-schedule interleaved:%d: needs at least 2 pipeline ranks, found %d "
                         "(on one rank there is nothing to interleave)", V, P);
    if (M % P)
        return dl_errorf(err, DL_ERR_SPEC,
                         "--pipeline-chunks %d with --pipeline-schedule interleaved:%d on %d pipeline ranks: "
                         "the chunks must be a multiple of the pipeline ranks (Megatron-LM's interleaved "
                         "schedule runs them in groups of %d)", M, V, P, P);
    if ((long)P * V > DL_SCHED_MAX_STAGES)
        return dl_errorf(err, DL_ERR_SPEC,
                         "--pipeline-schedule interleaved:%d on %d ranks: %ld virtual stages, at most %d",
                         V, P, (long)P * V, DL_SCHED_MAX_STAGES);
    return DL_OK;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* Forwards a rank runs before its first backward. */
static int warmup_forwards(const struct dl_schedule *s, int rank)
{
    int P = s->P, V = s->V, units = s->M * V;
    switch (s->kind) {
    case DL_SCHED_GPIPE: return units;
    /* Rank p starts its steady state when the first chunk's backward can
     * reach it: after the P - p - 1 forwards still on their way down. */
    case DL_SCHED_1F1B:
    case DL_SCHED_ZB_H1: return min_int(P - rank - 1, units);
    /* Megatron-LM's warm-up: the first P chunks through V - 1 of the rank's
     * stages, plus two units per rank below.  With free messages one per
     * rank would give the same bubble on less memory; the second absorbs
     * message latency (simulated, P <= 8, M <= 16, a send costing a quarter
     * of a forward: at most 4.4% over the bubble formula, against 9.8% with
     * one). */
    case DL_SCHED_INTERLEAVED: return min_int(2 * (P - rank - 1) + (V - 1) * P, units);
    }
    return 0;
}

/* The peak comes with the first steady-state forward: the warm-up's chunks
 * plus that one; from then on each round frees one as it takes one, except
 * that zb-h1's rank p frees nothing (it defers its weight gradients) for p
 * more rounds. */
int dl_schedule_bound(const struct dl_schedule *s, int rank)
{
    int units = s->M * s->V, warm = warmup_forwards(s, rank);
    if (warm >= units)
        return units;
    int deferred = s->kind == DL_SCHED_ZB_H1 ? min_int(rank, units - warm - 1) : 0;
    return warm + 1 + deferred;
}

/* The i-th forward (is_backward 0) or backward unit of a rank: which chunk
 * on which of its stages.  Interleaved runs groups of P chunks through its V
 * stages in turn (forward from the first stage, backward from the last). */
static void unit_of(const struct dl_schedule *s, int rank, int i, int is_backward, int *chunk, int *stage)
{
    int P = s->P, V = s->V;
    int local = (i / P) % V;
    if (is_backward)
        local = V - 1 - local;
    *chunk = s->kind == DL_SCHED_INTERLEAVED ? i / (P * V) * P + i % P : i;
    *stage = local * P + rank;
}

struct builder {
    const struct dl_schedule *s;
    int rank;
    struct dl_sched_action *a;
    int n;
};

static void push(struct builder *b, enum dl_sched_op op, int chunk, int stage, int peer)
{
    b->a[b->n++] = (struct dl_sched_action){.op = op, .chunk = chunk, .stage = stage, .peer = peer};
}

/* A compute action with the receive of its input before it and the send of
 * its output after it: a forward's input comes from the stage before and
 * goes on to the stage after, a backward's the other way; the weight
 * gradient stays on its stage. */
static void emit(struct builder *b, enum dl_sched_op op, int chunk, int stage)
{
    int P = b->s->P, last = P * b->s->V - 1;
    int forward = op == DL_SCHED_FORWARD, exchanges = op != DL_SCHED_BACKWARD_WEIGHT;
    int from = forward ? stage - 1 : stage + 1, to = forward ? stage + 1 : stage - 1;
    if (exchanges && from >= 0 && from <= last)
        push(b, forward ? DL_SCHED_RECV_ACT : DL_SCHED_RECV_GRAD, chunk, stage, from % P);
    push(b, op, chunk, stage, -1);
    if (exchanges && to >= 0 && to <= last)
        push(b, forward ? DL_SCHED_SEND_ACT : DL_SCHED_SEND_GRAD, chunk, stage, to % P);
}

static void emit_unit(struct builder *b, enum dl_sched_op op, int i)
{
    int chunk, stage;
    unit_of(b->s, b->rank, i, op != DL_SCHED_FORWARD, &chunk, &stage);
    emit(b, op, chunk, stage);
}

/* One rank's list: warm-up forwards, then one forward and one backward
 * (oldest first), then the remaining backwards.  zb-h1 splits each backward
 * and defers the weight gradients: rank p runs its first p steady-state
 * rounds without one (its input gradients are what the ranks before it wait
 * for), then one per round, one after each cool-down backward, and the rest
 * at the end, filling the cool-down bubble (Qi et al. 2023, figure 3). */
static void build_rank(struct builder *b)
{
    const struct dl_schedule *s = b->s;
    int units = s->M * s->V, warm = warmup_forwards(s, b->rank);
    int split = s->kind == DL_SCHED_ZB_H1, lag = b->rank, weights_done = 0;
    enum dl_sched_op backward = split ? DL_SCHED_BACKWARD_INPUT : DL_SCHED_BACKWARD;
    for (int i = 0; i < warm; i++)
        emit_unit(b, DL_SCHED_FORWARD, i);
    for (int j = 0; j < units; j++) {
        int steady = warm + j < units;
        if (steady)
            emit_unit(b, DL_SCHED_FORWARD, warm + j);
        emit_unit(b, backward, j);
        if (split && (steady ? j >= lag : weights_done <= j))
            emit_unit(b, DL_SCHED_BACKWARD_WEIGHT, weights_done++);
    }
    while (split && weights_done < units)
        emit_unit(b, DL_SCHED_BACKWARD_WEIGHT, weights_done++);
}

void dl_schedule_free(struct dl_schedule *s)
{
    if (!s)
        return;
    if (s->a)
        for (int p = 0; p < s->P; p++)
            free(s->a[p]);
    free(s->a);
    free(s->n);
    s->a = NULL;
    s->n = NULL;
}

int dl_schedule_make(enum dl_pipe_schedule kind, int P, int M, int V, struct dl_schedule *out,
                     struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = validate(kind, P, M, V, err);
    if (rc)
        return rc;
    *out = (struct dl_schedule){.kind = kind, .P = P, .M = M, .V = V};
    out->n = dl_calloc((size_t)P, sizeof *out->n, err);
    out->a = dl_calloc((size_t)P, sizeof *out->a, err);
    if (!out->n || !out->a) {
        dl_schedule_free(out);
        return DL_ERR_NOMEM;
    }
    /* Per unit at most a forward and a backward-input, each with a receive
     * and a send, and a backward-weight. */
    size_t capacity = (size_t)M * (size_t)V * 7;
    for (int p = 0; p < P; p++) {
        struct builder b = {.s = out, .rank = p, .a = dl_calloc(capacity, sizeof *b.a, err)};
        if (!b.a) {
            dl_schedule_free(out);
            return DL_ERR_NOMEM;
        }
        build_rank(&b);
        out->a[p] = b.a;
        out->n[p] = b.n;
    }
    rc = dl_schedule_check(out, NULL, err);
    if (rc) {
        dl_error_prefix(err, "generated schedule failed its check");
        dl_schedule_free(out);
    }
    return rc;
}

void dl_schedule_stage_slots(const struct dl_schedule *s, int p, int *most)
{
    int now[DL_SCHED_MAX_STAGES] = {0};
    for (int v = 0; v < s->V; v++)
        most[v] = 0;
    for (int i = 0; i < s->n[p]; i++) {
        const struct dl_sched_action *a = &s->a[p][i];
        int v = a->stage / s->P;
        if (a->op == DL_SCHED_FORWARD && ++now[v] > most[v])
            most[v] = now[v];
        else if (dl_sched_op_retires(a->op))
            now[v]--;
    }
}

int dl_schedule_tag(int chunk, int stage, int is_grad)
{
    if (chunk < 0 || chunk >= DL_SCHED_MAX_CHUNKS || stage < 0 || stage >= DL_SCHED_MAX_STAGES ||
        (is_grad != 0 && is_grad != 1))
        return -1;
    return DL_SCHED_TAG_BASE + (chunk * DL_SCHED_MAX_STAGES + stage) * 2 + is_grad;
}

int dl_schedule_message_tag(const struct dl_sched_action *a)
{
    switch (a->op) {
    case DL_SCHED_SEND_ACT: return dl_schedule_tag(a->chunk, a->stage, 0);
    case DL_SCHED_RECV_ACT: return dl_schedule_tag(a->chunk, a->stage - 1, 0);
    case DL_SCHED_SEND_GRAD: return dl_schedule_tag(a->chunk, a->stage, 1);
    case DL_SCHED_RECV_GRAD: return dl_schedule_tag(a->chunk, a->stage + 1, 1);
    default: return -1;
    }
}

const char *dl_sched_action_text(const struct dl_sched_action *a, char *buf, size_t size)
{
    static const char *const names[] = {"forward", "backward", "backward-input", "backward-weight",
                                        "send-act", "recv-act", "send-grad", "recv-grad"};
    if ((unsigned)a->op >= sizeof names / sizeof names[0]) {
        snprintf(buf, size, "unknown op %d", (int)a->op);
        return buf;
    }
    int n = snprintf(buf, size, "%s chunk %d stage %d", names[a->op], a->chunk, a->stage);
    if (a->op >= DL_SCHED_SEND_ACT && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " %s rank %d",
                 a->op == DL_SCHED_SEND_ACT || a->op == DL_SCHED_SEND_GRAD ? "to" : "from", a->peer);
    return buf;
}
