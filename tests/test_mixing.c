/* test_mixing.c: the gossip mixing matrices (parallel/mixing.h): every
 * topology is doubly stochastic with nonnegative entries and a positive
 * diagonal for p = 2..64 and several steps; the rows of small cases equal
 * the topologies' definitions written out by hand; one-peer-exp reaches the
 * exact average after log2 p steps for p = 2, 4, 8, 16 (and not before);
 * topology names parse, wrong ones are refused naming the option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/mixing.h"

#define MAXP 64

static double w[MAXP * MAXP];

static void doubly_stochastic(void **state)
{
    for (int t = 0; t < DL_TOPO_COUNT; t++)
        for (int p = 2; p <= MAXP; p++)
            for (long step = 0; step < 8; step++) {
                dl_mixing_matrix((enum dl_topology)t, p, step, w);
                int offsets[MAXP];
                int n = dl_mixing_offsets((enum dl_topology)t, p, step, offsets, MAXP);
                assert_true(n >= 1 && n <= dl_mixing_max_peers((enum dl_topology)t, p));
                for (int i = 0; i < p; i++) {
                    double row = 0, col = 0;
                    int nonzero = 0;
                    for (int j = 0; j < p; j++) {
                        assert_true(w[i * p + j] >= 0);
                        row += w[i * p + j];
                        col += w[j * p + i];
                        nonzero += w[i * p + j] > 0;
                    }
                    if (fabs(row - 1) > 1e-12 || fabs(col - 1) > 1e-12)
                        print_message("# %s p=%d step %ld rank %d: row %.17g column %.17g\n",
                                      dl_topology_names[t], p, step, i, row, col);
                    assert_true(fabs(row - 1) <= 1e-12 && fabs(col - 1) <= 1e-12);
                    assert_true(w[i * p + i] > 0);
                    assert_int_equal(nonzero, n + 1); /* distinct peers, none of them i */
                }
            }
}

/* Row i of W equals weight `each` at the listed columns and 0 elsewhere. */
static void row_is(enum dl_topology t, int p, long step, int i, double each, const int *cols, int n)
{
    dl_mixing_matrix(t, p, step, w);
    for (int j = 0; j < p; j++) {
        double want = 0;
        for (int k = 0; k < n; k++)
            want += cols[k] == j ? each : 0;
        if (fabs(w[i * p + j] - want) > 1e-15)
            print_message("# %s p=%d step %ld W[%d][%d] = %g, expected %g\n", dl_topology_names[t], p, step, i, j,
                          w[i * p + j], want);
        assert_true(fabs(w[i * p + j] - want) <= 1e-15);
    }
}

static void rows_by_hand(void **state)
{
    row_is(DL_TOPO_RING, 5, 0, 0, 1.0 / 3, (int[]){0, 1, 4}, 3);
    row_is(DL_TOPO_RING, 5, 3, 2, 1.0 / 3, (int[]){1, 2, 3}, 3);
    row_is(DL_TOPO_RING, 2, 0, 1, 1.0 / 2, (int[]){0, 1}, 2);
    /* exp: rank i hears from i - 1, i - 2, i - 4 */
    row_is(DL_TOPO_EXP, 8, 0, 0, 1.0 / 4, (int[]){0, 7, 6, 4}, 4);
    row_is(DL_TOPO_EXP, 8, 5, 5, 1.0 / 4, (int[]){5, 4, 3, 1}, 4);
    row_is(DL_TOPO_EXP, 5, 0, 1, 1.0 / 4, (int[]){1, 0, 4, 2}, 4);
    row_is(DL_TOPO_EXP, 9, 0, 0, 1.0 / 5, (int[]){0, 8, 7, 5, 1}, 5);
    /* one-peer-exp: the distance doubles every step, round 0 again after log2 p */
    row_is(DL_TOPO_ONE_PEER_EXP, 8, 0, 3, 1.0 / 2, (int[]){3, 2}, 2);
    row_is(DL_TOPO_ONE_PEER_EXP, 8, 1, 3, 1.0 / 2, (int[]){3, 1}, 2);
    row_is(DL_TOPO_ONE_PEER_EXP, 8, 2, 3, 1.0 / 2, (int[]){3, 7}, 2);
    row_is(DL_TOPO_ONE_PEER_EXP, 8, 3, 3, 1.0 / 2, (int[]){3, 2}, 2);
    row_is(DL_TOPO_ONE_PEER_EXP, 6, 2, 0, 1.0 / 2, (int[]){0, 2}, 2);
    row_is(DL_TOPO_COMPLETE, 4, 0, 2, 1.0 / 4, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(dl_mixing_period(DL_TOPO_ONE_PEER_EXP, 8), 3);
    assert_int_equal(dl_mixing_period(DL_TOPO_ONE_PEER_EXP, 6), 3);
    assert_int_equal(dl_mixing_period(DL_TOPO_EXP, 8), 1);
}

/* The largest |entry - 1/p| of W(steps-1) ... W(1) W(0). */
static double product_from_average(enum dl_topology t, int p, int steps)
{
    static double prod[MAXP * MAXP], next[MAXP * MAXP];
    for (int i = 0; i < p * p; i++)
        prod[i] = i % (p + 1) == 0;
    for (int s = 0; s < steps; s++) {
        dl_mixing_matrix(t, p, s, w);
        for (int i = 0; i < p; i++)
            for (int j = 0; j < p; j++) {
                double acc = 0;
                for (int k = 0; k < p; k++)
                    acc += w[i * p + k] * prod[k * p + j];
                next[i * p + j] = acc;
            }
        memcpy(prod, next, sizeof *prod * (size_t)(p * p));
    }
    double worst = 0;
    for (int i = 0; i < p * p; i++)
        worst = fmax(worst, fabs(prod[i] - 1.0 / p));
    return worst;
}

static void one_peer_exact_average(void **state)
{
    for (int p = 2, log2p = 1; p <= 16; p *= 2, log2p++) {
        assert_true(product_from_average(DL_TOPO_ONE_PEER_EXP, p, log2p) <= 1e-15);
        if (p > 2) /* one step short is not the average yet */
            assert_true(product_from_average(DL_TOPO_ONE_PEER_EXP, p, log2p - 1) >= 0.1 / p);
    }
    /* complete averages in one step; a ring of 8 does not */
    assert_true(product_from_average(DL_TOPO_COMPLETE, 7, 1) <= 1e-15);
    assert_true(product_from_average(DL_TOPO_RING, 8, 3) >= 0.01);
}

static void names(void **state)
{
    struct dl_error err = {0};
    enum dl_topology t;
    for (int i = 0; i < DL_TOPO_COUNT; i++) {
        assert_int_equal(dl_topology_parse("--consistency gossip", dl_topology_names[i], &t, &err), DL_OK);
        assert_int_equal(t, i);
    }
    static const char *const bad[] = {"star", "", "Ring", "exp ", "one-peer"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dl_topology_parse("--consistency gossip", bad[i], &t, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "--consistency gossip"));
        assert_non_null(strstr(err.msg, "one-peer-exp"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doubly_stochastic),
        cmocka_unit_test(rows_by_hand),
        cmocka_unit_test(one_peer_exact_average),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
