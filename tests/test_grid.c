/* test_grid.c: the grid of ranks without MPI: --grid parsing, how each
 * strategy and request resolves on a world size (and the messages of the
 * ones refused), and the rank <-> (t, d, p) layout with tensor ranks
 * innermost.  The group communicators are checked under mpirun by
 * test_comm_mpi. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "plan/rank_grid.h"

static void parses(void **state)
{
    struct dl_grid_dims g;
    struct dl_error err = {0};
    assert_int_equal(dl_grid_parse("dp=2,tp=4,pp=3", &g, &err), DL_OK);
    assert_true(g.dp == 2 && g.tp == 4 && g.pp == 3);
    assert_int_equal(dl_grid_parse("pp=2", &g, &err), DL_OK);
    assert_true(g.dp == 0 && g.tp == 0 && g.pp == 2);
    static const char *const bad[] = {"", "dp=0", "dp=2,", "tp=x", "dp=2,dp=3", "zz=2", "tp=2;pp=2", "pp=-1", "dp=2 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dl_grid_parse(bad[i], &g, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "--grid"));
    }
}

static void resolve_ok(enum dl_parallel_kind k, struct dl_grid_dims want, int world, int dp, int tp, int pp)
{
    struct dl_grid_dims g;
    struct dl_error err = {0};
    int rc = dl_grid_resolve(k, want, world, &g, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    assert_true(g.dp == dp && g.tp == tp && g.pp == pp);
}

static void resolve_bad(enum dl_parallel_kind k, struct dl_grid_dims want, int world, const char *says)
{
    struct dl_grid_dims g;
    struct dl_error err = {0};
    assert_int_equal(dl_grid_resolve(k, want, world, &g, &err), DL_ERR_SPEC);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, says));
}

static void resolves(void **state)
{
    const struct dl_grid_dims none = {0};
    resolve_ok(DL_PAR_AUTO, none, 8, 8, 1, 1);
    resolve_ok(DL_PAR_DATA, none, 6, 6, 1, 1);
    resolve_ok(DL_PAR_MODEL, none, 4, 1, 4, 1);
    resolve_ok(DL_PAR_PIPELINE, none, 3, 1, 1, 3);
    resolve_ok(DL_PAR_NONE, none, 1, 1, 1, 1);
    resolve_ok(DL_PAR_HYBRID, (struct dl_grid_dims){0, 2, 2}, 8, 2, 2, 2); /* dp takes what is left */
    resolve_ok(DL_PAR_AUTO, (struct dl_grid_dims){0, 2, 0}, 6, 3, 2, 1);  /* a grid makes auto hybrid */
    resolve_ok(DL_PAR_HYBRID, (struct dl_grid_dims){2, 2, 2}, 8, 2, 2, 2);
    resolve_ok(DL_PAR_MODEL, (struct dl_grid_dims){0, 4, 0}, 4, 1, 4, 1);
    resolve_ok(DL_PAR_HYBRID, none, 1, 1, 1, 1);
    resolve_bad(DL_PAR_HYBRID, (struct dl_grid_dims){2, 2, 2}, 6, "= 8 ranks, but 6 are running");
    resolve_bad(DL_PAR_HYBRID, (struct dl_grid_dims){0, 4, 0}, 6, "does not divide the 6 ranks");
    resolve_bad(DL_PAR_HYBRID, none, 4, "needs a grid");
    resolve_bad(DL_PAR_NONE, none, 2, "'none' but 2 ranks");
    resolve_bad(DL_PAR_DATA, (struct dl_grid_dims){0, 2, 0}, 4, "use --parallel hybrid");
    resolve_bad(DL_PAR_PIPELINE, (struct dl_grid_dims){2, 0, 0}, 4, "means dp=1,tp=1,pp=4");
}

static void layout(void **state)
{
    struct dl_grid_dims g = {3, 2, 4};
    int seen[24] = {0};
    for (int r = 0; r < 24; r++) {
        struct dl_grid_pos q = dl_grid_position(&g, r);
        assert_true(q.t < 2 && q.d < 3 && q.p < 4);
        assert_int_equal(dl_grid_rank(&g, q), r);
        seen[q.t + 2 * (q.d + 3 * q.p)]++;
    }
    for (int r = 0; r < 24; r++)
        assert_int_equal(seen[r], 1);
    /* tensor ranks are neighbours, pipeline stages the farthest apart */
    assert_int_equal(dl_grid_rank(&g, (struct dl_grid_pos){1, 0, 0}), 1);
    assert_int_equal(dl_grid_rank(&g, (struct dl_grid_pos){0, 1, 0}), 2);
    assert_int_equal(dl_grid_rank(&g, (struct dl_grid_pos){0, 0, 1}), 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses),
        cmocka_unit_test(resolves),
        cmocka_unit_test(layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
