/* test_grad_activations.c: finite-difference checks of the element-wise
 * activation ops (double precision build of the ops). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "ops/kinds.h"

static void relu_grad(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_relu, .attrs = "{}", .batch = 3, .n_in = 1,
                        .in = {{5, 4, 3}}, .training = 1};
    gc_assert(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(relu_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
