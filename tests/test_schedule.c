/* test_schedule.c: pipeline schedules.  Every kind for P <= 8, M <= 16
 * generates and checks, reaches exactly the in-flight bound of its formula
 * and, timed with unit costs, exactly the bubble of its formula; invalid
 * requests are refused naming the rule; and the checker rejects schedules
 * with one realistic mistake each (a swapped pair, a receive moved onto a
 * cycle, a lost receive, a wrong peer, a forward too early). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule.h"

#define MAX_P 8
#define MAX_M 16

struct kind_case {
    const char *option;
    enum dl_pipe_schedule kind;
    int V;
};

static const struct kind_case kinds[] = {
    {"gpipe", DL_SCHED_GPIPE, 1},
    {"1f1b", DL_SCHED_1F1B, 1},
    {"interleaved:2", DL_SCHED_INTERLEAVED, 2},
    {"interleaved:3", DL_SCHED_INTERLEAVED, 3},
    {"zb-h1", DL_SCHED_ZB_H1, 1},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* The rules of the issue, written again here rather than asked of the code. */
static int valid(const struct kind_case *k, int P, int M)
{
    if (M < P)
        return 0;
    return k->kind != DL_SCHED_INTERLEAVED || (P >= 2 && M % P == 0);
}

/* The chunks in flight each schedule promises (schedule.h). */
static int expected_bound(const struct kind_case *k, int P, int M, int rank)
{
    int V = k->V, b = 0;
    switch (k->kind) {
    case DL_SCHED_GPIPE: b = M; break;
    case DL_SCHED_1F1B: b = P - rank < M ? P - rank : M; break;
    case DL_SCHED_INTERLEAVED: b = 2 * (P - rank - 1) + (V - 1) * P + 1; b = b < V * M ? b : V * M; break;
    case DL_SCHED_ZB_H1: b = P; break;
    }
    return b;
}

/* The bubble with t_fwd = 1 and t_bwd_in = t_bwd_w = 1 on every stage:
 * (P-1)/(M+P-1) for gpipe and 1f1b, (P-1)/(VM+P-1) interleaved (Narayanan
 * et al. 2021) and, for zb-h1, a bubble of (P-1)(t_F + t_B - t_W) = P-1
 * against 3M of work, (P-1)/(3M+P-1) (Qi et al. 2023, section 2). */
static double expected_idle(const struct kind_case *k, int P, int M)
{
    double units = k->kind == DL_SCHED_ZB_H1 ? 3.0 * M : (double)k->V * M;
    return (P - 1) / (units + P - 1);
}

/* cmocka compares floats in single precision; these are doubles. */
static void check_close(double value, double expected, double tol, const char *what)
{
    if (fabs(value - expected) > tol)
        fail_msg("%s = %.12g, expected %.12g", what, value, expected);
}
#define assert_close(a, b, tol) check_close((a), (b), (tol), #a)

static void set_costs(struct dl_sched_costs *c, double *f, double *bi, double *bw, double tf, double tbi, double tbw,
                      double latency)
{
    for (int i = 0; i < MAX_P * 3; i++) {
        f[i] = tf;
        bi[i] = tbi;
        bw[i] = tbw;
    }
    *c = (struct dl_sched_costs){.fwd = f, .bwd_in = bi, .bwd_w = bw, .send_latency = latency};
}

static void every_schedule_checks_within_its_bound(void **state)
{
    (void)state;
    int made = 0, refused = 0;
    for (size_t k = 0; k < N_KINDS; k++)
        for (int P = 1; P <= MAX_P; P++)
            for (int M = 1; M <= MAX_M; M++) {
                struct dl_schedule s;
                struct dl_error err = {0};
                int rc = dl_schedule_make(kinds[k].kind, P, M, kinds[k].V, &s, &err);
                if (!valid(&kinds[k], P, M)) {
                    assert_int_equal(rc, DL_ERR_SPEC);
                    assert_null(s.a);
                    refused++;
                    continue;
                }
                if (rc)
                    fail_msg("%s P=%d M=%d: %s", kinds[k].option, P, M, err.msg);
                int observed[MAX_P];
                rc = dl_schedule_check(&s, observed, &err);
                if (rc)
                    fail_msg("%s P=%d M=%d: %s", kinds[k].option, P, M, err.msg);
                for (int p = 0; p < P; p++) {
                    int want = expected_bound(&kinds[k], P, M, p);
                    if (dl_schedule_bound(&s, p) != want || observed[p] != want)
                        fail_msg("%s P=%d M=%d rank %d: bound %d, observed %d, formula %d", kinds[k].option, P, M,
                                 p, dl_schedule_bound(&s, p), observed[p], want);
                }
                dl_schedule_free(&s);
                made++;
            }
    print_message("# %d schedules made and checked, %d refused\n", made, refused);
    assert_int_equal(made, 3 * 100 + 2 * 26); /* 100 (P, M) with M >= P; 26 of them with P | M, P >= 2 */
}

static void bubble_matches_the_formulas(void **state)
{
    (void)state;
    double f[MAX_P * 3], bi[MAX_P * 3], bw[MAX_P * 3];
    struct dl_sched_costs unit;
    set_costs(&unit, f, bi, bw, 1, 1, 1, 0);
    for (size_t k = 0; k < N_KINDS; k++)
        for (int P = 1; P <= MAX_P; P++)
            for (int M = P; M <= MAX_M; M++) {
                if (!valid(&kinds[k], P, M))
                    continue;
                struct dl_schedule s;
                struct dl_error err = {0};
                assert_int_equal(dl_schedule_make(kinds[k].kind, P, M, kinds[k].V, &s, &err), DL_OK);
                double makespan, idle, busy[MAX_P];
                assert_int_equal(dl_schedule_simulate(&s, &unit, &makespan, busy, &idle, &err), DL_OK);
                for (int p = 0; p < P; p++)
                    assert_close(busy[p], 3.0 * kinds[k].V * M, 1e-9);
                if (fabs(idle - expected_idle(&kinds[k], P, M)) > 1e-12)
                    fail_msg("%s P=%d M=%d: idle %.6f, formula %.6f", kinds[k].option, P, M, idle,
                             expected_idle(&kinds[k], P, M));
                if (kinds[k].kind == DL_SCHED_ZB_H1 && M >= 2 * P) {
                    double one_f_one_b = (P - 1.0) / (M + P - 1);
                    assert_true(idle <= one_f_one_b / 2 + 1e-12);
                }
                dl_schedule_free(&s);
            }
    static const int shown[][2] = {{4, 4}, {4, 8}, {4, 16}, {8, 8}, {8, 16}};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        int P = shown[i][0], M = shown[i][1];
        print_message("# P=%d M=%2d idle: gpipe/1f1b %.4f, interleaved:2 %.4f, zb-h1 %.4f (%.2f of 1f1b's)\n", P,
                      M, expected_idle(&kinds[1], P, M), expected_idle(&kinds[2], P, M),
                      expected_idle(&kinds[4], P, M), expected_idle(&kinds[4], P, M) / expected_idle(&kinds[1], P, M));
    }
}

/* Other cost ratios: gpipe and 1f1b take (M+P-1)(t_F+t_B) for any uniform
 * costs; with a send latency L gpipe's critical path crosses 2(P-1) links. */
static void makespan_under_other_costs(void **state)
{
    (void)state;
    double f[MAX_P * 3], bi[MAX_P * 3], bw[MAX_P * 3];
    struct dl_sched_costs c;
    for (int P = 1; P <= MAX_P; P++)
        for (int M = P; M <= MAX_M; M++) {
            struct dl_schedule s;
            struct dl_error err = {0};
            double makespan, idle;
            for (int k = 0; k < 2; k++) {
                assert_int_equal(dl_schedule_make(kinds[k].kind, P, M, 1, &s, &err), DL_OK);
                set_costs(&c, f, bi, bw, 2.0, 3.0, 0.5, 0);
                assert_int_equal(dl_schedule_simulate(&s, &c, &makespan, NULL, &idle, &err), DL_OK);
                assert_close(makespan, (M + P - 1) * 5.5, 1e-9);
                if (kinds[k].kind == DL_SCHED_GPIPE) {
                    set_costs(&c, f, bi, bw, 1.0, 1.0, 1.0, 0.25);
                    assert_int_equal(dl_schedule_simulate(&s, &c, &makespan, NULL, &idle, &err), DL_OK);
                    assert_close(makespan, (M + P - 1) * 3.0 + 2 * (P - 1) * 0.25, 1e-9);
                }
                dl_schedule_free(&s);
            }
        }
}

/* One stage is gradient accumulation: forward c, backward c, nothing sent. */
static void one_stage_is_gradient_accumulation(void **state)
{
    (void)state;
    struct dl_schedule s;
    struct dl_error err = {0};
    assert_int_equal(dl_schedule_make(DL_SCHED_1F1B, 1, 3, 1, &s, &err), DL_OK);
    assert_int_equal(s.n[0], 6);
    for (int c = 0; c < 3; c++) {
        assert_int_equal(s.a[0][2 * c].op, DL_SCHED_FORWARD);
        assert_int_equal(s.a[0][2 * c + 1].op, DL_SCHED_BACKWARD);
        assert_int_equal(s.a[0][2 * c].chunk, c);
        assert_int_equal(s.a[0][2 * c + 1].chunk, c);
    }
    double f[MAX_P * 3], bi[MAX_P * 3], bw[MAX_P * 3], makespan, idle;
    struct dl_sched_costs c;
    set_costs(&c, f, bi, bw, 1, 1, 1, 0.5);
    assert_int_equal(dl_schedule_simulate(&s, &c, &makespan, NULL, &idle, &err), DL_OK);
    assert_close(makespan, 9.0, 1e-12);
    assert_close(idle, 0.0, 1e-12);
    dl_schedule_free(&s);
    dl_schedule_free(&s); /* freeing twice is harmless */
}

static void parse_names_and_refusals(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_KINDS; k++) {
        enum dl_pipe_schedule kind;
        int V = 0;
        struct dl_error err = {0};
        assert_int_equal(dl_schedule_parse(kinds[k].option, &kind, &V, &err), DL_OK);
        assert_int_equal(kind, kinds[k].kind);
        assert_int_equal(V, kinds[k].V);
    }
    static const char *const bad[] = {"", "GPipe", "1f1b ", "zb-h2", "interleaved", "interleaved:", "interleaved:1",
                                      "interleaved:0", "interleaved:-2", "interleaved:2x", "interleaved:513"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        enum dl_pipe_schedule kind;
        int V;
        struct dl_error err = {0};
        assert_int_equal(dl_schedule_parse(bad[i], &kind, &V, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "--pipeline-schedule"));
        if (strncmp(bad[i], "interleaved:", 12) == 0)
            assert_non_null(strstr(err.msg, "virtual stages per rank"));
        else
            assert_non_null(strstr(err.msg, "expected gpipe, 1f1b, interleaved:V or zb-h1"));
    }
}

static void expect_refusal(enum dl_pipe_schedule kind, int P, int M, int V, const char *rule)
{
    struct dl_schedule s;
    struct dl_error err = {0};
    assert_int_equal(dl_schedule_make(kind, P, M, V, &s, &err), DL_ERR_SPEC);
    if (!strstr(err.msg, rule))
        fail_msg("expected '%s' in: %s", rule, err.msg);
    dl_schedule_free(&s);
}

static void invalid_requests_name_the_rule(void **state)
{
    (void)state;
    expect_refusal(DL_SCHED_1F1B, 4, 3, 1, "chunks >= stages");
    expect_refusal(DL_SCHED_GPIPE, 2, 1, 1, "1 chunks for 2 pipeline stages");
    expect_refusal(DL_SCHED_ZB_H1, 8, 7, 1, "chunks >= stages");
    expect_refusal(DL_SCHED_INTERLEAVED, 4, 2, 2, "chunks >= stages");
    expect_refusal(DL_SCHED_INTERLEAVED, 4, 6, 2, "multiple of the pipeline ranks (Megatron-LM");
    expect_refusal(DL_SCHED_INTERLEAVED, 4, 8, 1, "V >= 2");
    expect_refusal(DL_SCHED_INTERLEAVED, 1, 4, 2, "at least 2 pipeline ranks");
    expect_refusal(DL_SCHED_1F1B, 4, 8, 2, "one stage per rank");
    expect_refusal(DL_SCHED_1F1B, 0, 8, 1, "at least 1 rank");
    expect_refusal(DL_SCHED_GPIPE, 2, DL_SCHED_MAX_CHUNKS + 1, 1, "at most");
    expect_refusal(DL_SCHED_INTERLEAVED, 8, 8, 200, "virtual stages, at most");
}

/* Both ends of every message compute the same tag, and tags tell the
 * messages apart. */
static void tags_pair_every_send_with_its_receive(void **state)
{
    (void)state;
    for (int chunk = 0; chunk < 40; chunk++)
        for (int stage = 0; stage < 40; stage++)
            for (int g = 0; g < 2; g++) {
                int t = dl_schedule_tag(chunk, stage, g);
                assert_true(t >= DL_SCHED_TAG_BASE);
                for (int c2 = 0; c2 <= chunk; c2++)
                    for (int s2 = 0; s2 < 40; s2++)
                        for (int g2 = 0; g2 < 2; g2++)
                            if (c2 != chunk || s2 != stage || g2 != g)
                                assert_int_not_equal(dl_schedule_tag(c2, s2, g2), t);
            }
    assert_true(dl_schedule_tag(DL_SCHED_MAX_CHUNKS - 1, DL_SCHED_MAX_STAGES - 1, 1) < (1 << 24));
    assert_int_equal(dl_schedule_tag(DL_SCHED_MAX_CHUNKS, 0, 0), -1);
    assert_int_equal(dl_schedule_tag(0, -1, 0), -1);
    assert_int_equal(dl_schedule_tag(0, 0, 2), -1);

    for (size_t k = 0; k < N_KINDS; k++) {
        int P = 4, M = 8;
        struct dl_schedule s;
        struct dl_error err = {0};
        assert_int_equal(dl_schedule_make(kinds[k].kind, P, M, kinds[k].V, &s, &err), DL_OK);
        int sends = 0;
        for (int p = 0; p < P; p++)
            for (int i = 0; i < s.n[p]; i++) {
                const struct dl_sched_action *a = &s.a[p][i];
                if (a->op != DL_SCHED_SEND_ACT && a->op != DL_SCHED_SEND_GRAD) {
                    assert_true(a->op < DL_SCHED_SEND_ACT || dl_schedule_message_tag(a) >= 0);
                    continue;
                }
                int matches = 0, tag = dl_schedule_message_tag(a);
                for (int j = 0; j < s.n[a->peer]; j++) {
                    const struct dl_sched_action *b = &s.a[a->peer][j];
                    int is_recv = b->op == DL_SCHED_RECV_ACT || b->op == DL_SCHED_RECV_GRAD;
                    matches += is_recv && b->peer == p && dl_schedule_message_tag(b) == tag;
                }
                assert_int_equal(matches, 1);
                sends++;
            }
        /* An activation and a gradient for every (chunk, stage boundary). */
        assert_int_equal(sends, 2 * M * (P * kinds[k].V - 1));
        dl_schedule_free(&s);
    }
}

/* --- The checker bites: one realistic mistake per schedule. --- */

static int find(const struct dl_schedule *s, int rank, enum dl_sched_op op, int chunk, int stage)
{
    for (int i = 0; i < s->n[rank]; i++)
        if (s->a[rank][i].op == op && s->a[rank][i].chunk == chunk && s->a[rank][i].stage == stage)
            return i;
    fail_msg("rank %d has no action %d chunk %d stage %d", rank, (int)op, chunk, stage);
    return -1;
}

/* Moves action `from` of a rank to position `to`, shifting the others. */
static void move(struct dl_schedule *s, int rank, int from, int to)
{
    struct dl_sched_action a = s->a[rank][from], *l = s->a[rank];
    if (from < to)
        memmove(l + from, l + from + 1, sizeof *l * (size_t)(to - from));
    else
        memmove(l + to + 1, l + to, sizeof *l * (size_t)(from - to));
    l[to] = a;
}

static void drop(struct dl_schedule *s, int rank, int index)
{
    move(s, rank, index, s->n[rank] - 1);
    s->n[rank]--;
}

static void expect_rejected(const struct dl_schedule *s, const char *what, const char *what2)
{
    struct dl_error err = {0};
    assert_int_equal(dl_schedule_check(s, NULL, &err), DL_ERR_INTERNAL);
    if (!strstr(err.msg, what) || (what2 && !strstr(err.msg, what2)))
        fail_msg("expected '%s'%s%s in: %s", what, what2 ? " and " : "", what2 ? what2 : "", err.msg);
    print_message("# rejected: %s\n", err.msg);
}

static struct dl_schedule made(enum dl_pipe_schedule kind, int P, int M, int V)
{
    struct dl_schedule s;
    struct dl_error err = {0};
    assert_int_equal(dl_schedule_make(kind, P, M, V, &s, &err), DL_OK);
    return s;
}

static void checker_rejects_backward_before_forward(void **state)
{
    (void)state;
    struct dl_schedule s = made(DL_SCHED_1F1B, 1, 2, 1);
    move(&s, 0, find(&s, 0, DL_SCHED_BACKWARD, 0, 0), find(&s, 0, DL_SCHED_FORWARD, 0, 0));
    expect_rejected(&s, "rank 0, action 0 (backward chunk 0 stage 0)", "its forward has not run");
    dl_schedule_free(&s);

    s = made(DL_SCHED_ZB_H1, 3, 4, 1);
    int w = find(&s, 2, DL_SCHED_BACKWARD_WEIGHT, 1, 2);
    move(&s, 2, w, find(&s, 2, DL_SCHED_BACKWARD_INPUT, 1, 2));
    expect_rejected(&s, "backward-weight chunk 1 stage 2", "its backward-input has not run");
    dl_schedule_free(&s);
}

/* Rank 0 waits for chunk 0's gradient before sending chunk 0's activation,
 * which rank 1 needs before it can compute that gradient. */
static void checker_rejects_a_receive_moved_onto_a_cycle(void **state)
{
    (void)state;
    struct dl_schedule s = made(DL_SCHED_1F1B, 2, 2, 1);
    move(&s, 0, find(&s, 0, DL_SCHED_RECV_GRAD, 0, 0), find(&s, 0, DL_SCHED_SEND_ACT, 0, 0));
    expect_rejected(&s,
                    "deadlock: rank 0 waits at action 1 (recv-grad chunk 0 stage 0 from rank 1), rank 1 is waiting too",
                    "rank 1 waits at action 0 (recv-act chunk 0 stage 1 from rank 0), rank 0 is waiting too");
    double f[MAX_P * 3], bi[MAX_P * 3], bw[MAX_P * 3], makespan, idle;
    struct dl_sched_costs c;
    struct dl_error err = {0};
    set_costs(&c, f, bi, bw, 1, 1, 1, 0);
    assert_int_equal(dl_schedule_simulate(&s, &c, &makespan, NULL, &idle, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "deadlock"));
    dl_schedule_free(&s);

    /* Interleaved: the cycle runs through both of rank 0's stages. */
    s = made(DL_SCHED_INTERLEAVED, 2, 2, 2);
    move(&s, 0, find(&s, 0, DL_SCHED_RECV_GRAD, 0, 2), find(&s, 0, DL_SCHED_SEND_ACT, 0, 0));
    expect_rejected(&s, "deadlock", "recv-grad chunk 0 stage 2 from rank 1");
    dl_schedule_free(&s);
}

static void checker_rejects_lost_messages(void **state)
{
    (void)state;
    /* A send taken out: the receiver waits for a rank that has finished. */
    struct dl_schedule s = made(DL_SCHED_GPIPE, 3, 3, 1);
    drop(&s, 2, find(&s, 2, DL_SCHED_SEND_GRAD, 2, 2));
    expect_rejected(&s, "rank 1 waits at", "rank 2 has finished without sending it");
    dl_schedule_free(&s);

    /* A receive and the backward after it taken out: sent, never received. */
    s = made(DL_SCHED_GPIPE, 2, 2, 1);
    drop(&s, 0, find(&s, 0, DL_SCHED_BACKWARD, 1, 0));
    drop(&s, 0, find(&s, 0, DL_SCHED_RECV_GRAD, 1, 0));
    expect_rejected(&s, "the gradient of chunk 1 sent by stage 1 is never received", NULL);
    dl_schedule_free(&s);

    /* The last backward of a single stage taken out. */
    s = made(DL_SCHED_1F1B, 1, 3, 1);
    drop(&s, 0, find(&s, 0, DL_SCHED_BACKWARD, 2, 0));
    expect_rejected(&s, "the backward of chunk 2 on stage 0 (rank 0) never runs", NULL);
    dl_schedule_free(&s);
}

static void checker_rejects_wrong_peers_stages_and_repeats(void **state)
{
    (void)state;
    struct dl_schedule s = made(DL_SCHED_1F1B, 4, 4, 1);
    s.a[1][find(&s, 1, DL_SCHED_SEND_ACT, 0, 1)].peer = 3;
    expect_rejected(&s, "send-act chunk 0 stage 1 to rank 3", "peer 3, expected 2");
    dl_schedule_free(&s);

    s = made(DL_SCHED_1F1B, 4, 4, 1);
    s.a[0][find(&s, 0, DL_SCHED_FORWARD, 1, 0)].stage = 1;
    expect_rejected(&s, "forward chunk 1 stage 1", "stage 1 is held by rank 1");
    dl_schedule_free(&s);

    s = made(DL_SCHED_1F1B, 2, 3, 1);
    s.a[0][find(&s, 0, DL_SCHED_FORWARD, 2, 0)].chunk = 1;
    expect_rejected(&s, "forward chunk 1 stage 0", "runs a second time");
    dl_schedule_free(&s);

    /* A forward ahead of the receive of its input. */
    s = made(DL_SCHED_ZB_H1, 3, 3, 1);
    move(&s, 1, find(&s, 1, DL_SCHED_FORWARD, 0, 1), find(&s, 1, DL_SCHED_RECV_ACT, 0, 1));
    expect_rejected(&s, "forward chunk 0 stage 1", "its input activation has not been received");
    dl_schedule_free(&s);

    /* A whole backward in zb-h1, a split one elsewhere. */
    s = made(DL_SCHED_ZB_H1, 2, 2, 1);
    s.a[1][find(&s, 1, DL_SCHED_BACKWARD_INPUT, 0, 1)].op = DL_SCHED_BACKWARD;
    expect_rejected(&s, "zb-h1 splits every backward", NULL);
    dl_schedule_free(&s);
}

/* 1F1B's memory promise: rank 0 runs chunk 4's forward before chunk 0's
 * backward (legal otherwise), and GPipe's lists are not a 1F1B schedule. */
static void checker_rejects_too_many_chunks_in_flight(void **state)
{
    (void)state;
    struct dl_schedule s = made(DL_SCHED_1F1B, 4, 8, 1);
    int recv_grad = find(&s, 0, DL_SCHED_RECV_GRAD, 0, 0);
    move(&s, 0, find(&s, 0, DL_SCHED_FORWARD, 4, 0), recv_grad);
    move(&s, 0, find(&s, 0, DL_SCHED_SEND_ACT, 4, 0), recv_grad + 1);
    expect_rejected(&s, "rank 0, action 8 (forward chunk 4 stage 0)",
                    "5 chunks in flight, above the schedule's bound 4");
    dl_schedule_free(&s);

    s = made(DL_SCHED_GPIPE, 3, 6, 1);
    s.kind = DL_SCHED_1F1B;
    expect_rejected(&s, "schedule 1f1b P=3 M=6: rank 0, action 6 (forward chunk 3 stage 0)",
                    "4 chunks in flight, above the schedule's bound 3");
    dl_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_schedule_checks_within_its_bound),
        cmocka_unit_test(bubble_matches_the_formulas),
        cmocka_unit_test(makespan_under_other_costs),
        cmocka_unit_test(one_stage_is_gradient_accumulation),
        cmocka_unit_test(parse_names_and_refusals),
        cmocka_unit_test(invalid_requests_name_the_rule),
        cmocka_unit_test(tags_pair_every_send_with_its_receive),
        cmocka_unit_test(checker_rejects_backward_before_forward),
        cmocka_unit_test(checker_rejects_a_receive_moved_onto_a_cycle),
        cmocka_unit_test(checker_rejects_lost_messages),
        cmocka_unit_test(checker_rejects_wrong_peers_stages_and_repeats),
        cmocka_unit_test(checker_rejects_too_many_chunks_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
