/* test_openblas_core.c: the choice of OPENBLAS_CORETYPE from CPUID features
 * and OpenBLAS's own detection (backends/cpu_blas/openblas_core.c): an
 * AVX-512 Xeon that OpenBLAS 0.3.21 takes for a Prescott gets SkylakeX, an
 * AVX2 CPU taken for an older core gets Haswell (Intel) or Zen (AMD), and a
 * correct detection is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backends/cpu_blas/openblas_core.h"

static void misdetected_avx512(void **state)
{
    (void)state;
    assert_string_equal(dl_openblas_core_for(1, 1, 0, "Prescott"), "SkylakeX");
    assert_string_equal(dl_openblas_core_for(1, 1, 0, "Haswell"), "SkylakeX");
    assert_string_equal(dl_openblas_core_for(1, 1, 1, "Zen"), "SkylakeX");
}

static void misdetected_avx2(void **state)
{
    (void)state;
    assert_string_equal(dl_openblas_core_for(0, 1, 0, "Sandybridge"), "Haswell");
    assert_string_equal(dl_openblas_core_for(0, 1, 0, "Nehalem"), "Haswell");
    assert_string_equal(dl_openblas_core_for(0, 1, 1, "Barcelona"), "Zen");
}

static void detected_right(void **state)
{
    (void)state;
    assert_null(dl_openblas_core_for(1, 1, 0, "SkylakeX"));
    assert_null(dl_openblas_core_for(1, 1, 0, "sapphirerapids"));
    assert_null(dl_openblas_core_for(0, 1, 1, "Zen"));
    assert_null(dl_openblas_core_for(0, 1, 0, "Haswell"));
    assert_null(dl_openblas_core_for(0, 0, 0, "Nehalem")); /* nothing better to offer */
    assert_null(dl_openblas_core_for(1, 1, 0, "none"));    /* a build without OpenBLAS */
    assert_null(dl_openblas_core_for(1, 1, 0, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(misdetected_avx512),
        cmocka_unit_test(misdetected_avx2),
        cmocka_unit_test(detected_right),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
