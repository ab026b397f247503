/* test_plan.c: the memory planner.  Random lifetimes and sizes: no two
 * buffers alive at the same time overlap, offsets are aligned, the peak lies
 * between the largest simultaneous demand and the no-reuse total; plus small
 * cases with a known optimum and the executor's plan for a network (planned
 * peak below the unplanned sum, which backward's gradient reuse guarantees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "exec/exec.h"
#include "plan/plan.h"
#include "spec/netfile.h"

static size_t rounded(size_t b)
{
    return (b + DL_PLAN_ALIGN - 1) / DL_PLAN_ALIGN * DL_PLAN_ALIGN;
}

static void random_lifetimes(void **state)
{
    struct dl_rng r;
    dl_rng_seed(&r, 5);
    for (int trial = 0; trial < 50; trial++) {
        int n = 1 + (int)dl_rng_below(&r, 60), T = 1 + (int)dl_rng_below(&r, 30);
        struct dl_plan_buf b[60];
        for (int i = 0; i < n; i++) {
            int a = (int)dl_rng_below(&r, (uint64_t)T), c = (int)dl_rng_below(&r, (uint64_t)T);
            b[i] = (struct dl_plan_buf){.bytes = dl_rng_below(&r, 4) == 0 ? 0 : 1 + dl_rng_below(&r, 5000),
                                        .first = a < c ? a : c, .last = a < c ? c : a};
        }
        size_t peak;
        struct dl_error err = {0};
        assert_int_equal(dl_plan(b, n, &peak, &err), 0);
        size_t demand = 0;
        for (int t = 0; t < T; t++) {
            size_t live = 0;
            for (int i = 0; i < n; i++)
                if (b[i].first <= t && t <= b[i].last)
                    live += rounded(b[i].bytes);
            demand = live > demand ? live : demand;
        }
        assert_true(peak >= demand);
        assert_true(peak <= dl_plan_total(b, n));
        for (int i = 0; i < n; i++) {
            assert_int_equal(b[i].offset % DL_PLAN_ALIGN, 0);
            assert_true(b[i].offset + rounded(b[i].bytes) <= peak);
            for (int j = 0; j < i; j++) {
                if (!b[i].bytes || !b[j].bytes || b[i].last < b[j].first || b[j].last < b[i].first)
                    continue;
                int apart = b[i].offset + rounded(b[i].bytes) <= b[j].offset ||
                            b[j].offset + rounded(b[j].bytes) <= b[i].offset;
                assert_true(apart);
            }
        }
    }
}

/* A chain a -> b -> c where each buffer lives two steps: a and c can share. */
static void known_optimum(void **state)
{
    struct dl_plan_buf b[3] = {{.bytes = 640, .first = 0, .last = 1},
                               {.bytes = 640, .first = 1, .last = 2},
                               {.bytes = 640, .first = 2, .last = 3}};
    size_t peak;
    struct dl_error err = {0};
    assert_int_equal(dl_plan(b, 3, &peak, &err), 0);
    assert_int_equal(peak, 1280);
    assert_int_equal(b[0].offset, b[2].offset);
    assert_int_equal(dl_plan_total(b, 3), 1920);
}

static const char *const NET =
    "input: {shape: [3, 16, 16], classes: 5}\n"
    "layers:\n"
    "  - {name: c1, type: conv, filters: 16, kernel: 3, pad: 1}\n"
    "  - {name: r1, type: relu}\n"
    "  - {name: c2, type: conv, filters: 16, kernel: 3, pad: 1}\n"
    "  - {name: r2, type: relu}\n"
    "  - {name: p, type: maxpool, kernel: 2}\n"
    "  - {name: f, type: fc, units: 5}\n"
    "loss: softmax_cross_entropy\n";

static void executor_plan(void **state)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("plan.yaml", NET, &net, &err), 0);
    for (int fast = 0; fast < 2; fast++) {
        struct dl_kernel_choices ch = {0};
        if (!fast)
            assert_int_equal(dl_kernel_choice_add(&ch, "all=reference", &err), 0);
        struct dl_exec e;
        assert_int_equal(dl_exec_plan(&e, &net.graph, 8, &(struct dl_exec_options){.kernels = &ch}, &err), 0);
        assert_true(e.stats.arena_bytes > 0);
        assert_true(e.stats.arena_bytes < e.stats.unplanned_bytes);
        /* At least every activation of the batch must fit. */
        size_t acts = 0;
        for (int i = 0; i < net.graph.n; i++)
            acts += 8 * sizeof(float) * (size_t)dl_shape_count(net.graph.layers[i].out_shape);
        assert_true(e.stats.arena_bytes >= acts);
        print_message("# %s kernels: planned %zu bytes, %zu without reuse\n", fast ? "default" : "reference",
                      e.stats.arena_bytes, e.stats.unplanned_bytes);
        dl_exec_free(&e);
    }
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_lifetimes),
        cmocka_unit_test(known_optimum),
        cmocka_unit_test(executor_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
