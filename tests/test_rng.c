/* test_rng.c: the random number generator is deterministic, uniform enough,
 * and its shuffle is a permutation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "core/rng.h"

static void same_seed_same_sequence(void **state)
{
    (void)state;
    struct dl_rng a, b;
    dl_rng_seed(&a, 42);
    dl_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(dl_rng_u64(&a), dl_rng_u64(&b));
    dl_rng_seed(&b, 43);
    assert_true(dl_rng_u64(&a) != dl_rng_u64(&b));
}

static void uniform_and_normal_moments(void **state)
{
    (void)state;
    struct dl_rng r;
    dl_rng_seed(&r, 7);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    for (int i = 0; i < n; i++) {
        float u = dl_rng_uniform(&r);
        assert_true(u >= 0.0f && u < 1.0f);
        su += u;
        double z = dl_rng_normal(&r);
        sn += z;
        sn2 += z * z;
    }
    assert_true(fabs(su / n - 0.5) < 0.005);
    assert_true(fabs(sn / n) < 0.01);
    assert_true(fabs(sn2 / n - 1.0) < 0.02);
}

static void shuffle_is_permutation(void **state)
{
    (void)state;
    struct dl_rng r;
    dl_rng_seed(&r, 1);
    int idx[101], seen[101];
    for (int i = 0; i < 101; i++)
        idx[i] = i;
    dl_rng_shuffle(&r, idx, 101);
    memset(seen, 0, sizeof seen);
    int moved = 0;
    for (int i = 0; i < 101; i++) {
        assert_true(idx[i] >= 0 && idx[i] < 101);
        seen[idx[i]]++;
        moved += idx[i] != i;
    }
    for (int i = 0; i < 101; i++)
        assert_int_equal(seen[i], 1);
    assert_true(moved > 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_same_sequence),
        cmocka_unit_test(uniform_and_normal_moments),
        cmocka_unit_test(shuffle_is_permutation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
