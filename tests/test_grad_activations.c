/* test_grad_activations.c: finite-difference checks and forward values of the
 * element-wise activation ops (relu, leaky_relu, sigmoid, tanh) and dropout,
 * in the double precision build of the ops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gradcheck.h"
#include "ops/kinds.h"
#include "optest.h"

/* ---------------------------------------------------------------- gradients */
static void relu_grad(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_relu, .attrs = "{}", .batch = 3, .n_in = 1,
                        .in = {{5, 4, 3}}, .training = 1};
    gc_assert(&c);
}

static void leaky_relu_grad(void **state)
{
    (void)state;
    const char *attrs[] = {"{}", "{slope: 0.2}", "{slope: 0}", "{slope: 1}"};
    for (int i = 0; i < 4; i++) {
        struct gc_case c = {.op = &dl_op_leaky_relu, .attrs = attrs[i], .batch = 3, .n_in = 1,
                            .in = {{5, 7, 3}}, .training = 1};
        gc_assert(&c);
    }
}

static void sigmoid_grad(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_sigmoid, .attrs = "{}", .batch = 2, .n_in = 1,
                        .in = {{7, 3, 5}}, .training = 1};
    gc_assert(&c);
    struct gc_case v = {.op = &dl_op_sigmoid, .attrs = "{}", .batch = 5, .n_in = 1,
                        .in = {{11, 1, 1}}, .training = 0};
    gc_assert(&v);
}

static void tanh_grad(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_tanh, .attrs = "{}", .batch = 2, .n_in = 1,
                        .in = {{7, 3, 5}}, .training = 1};
    gc_assert(&c);
    struct gc_case v = {.op = &dl_op_tanh, .attrs = "{}", .batch = 5, .n_in = 1,
                        .in = {{11, 1, 1}}, .training = 0};
    gc_assert(&v);
}

static void dropout_grad_training(void **state)
{
    (void)state;
    const char *attrs[] = {"{}", "{rate: 0.3}", "{rate: 0.9}", "{rate: 0}"};
    for (int i = 0; i < 4; i++) {
        struct gc_case c = {.op = &dl_op_dropout, .attrs = attrs[i], .batch = 3, .n_in = 1,
                            .in = {{5, 3, 7}}, .training = 1};
        gc_assert(&c);
    }
}

static void dropout_grad_inference(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_dropout, .attrs = "{rate: 0.5}", .batch = 3, .n_in = 1,
                        .in = {{5, 3, 7}}, .training = 0};
    gc_assert(&c);
}

/* ---------------------------------------------------------------- forward values */
/* Runs op forward on x (n values as one sample of n features) and compares
 * with want to 1e-12. */
static void expect_forward(const struct dl_op_kind *op, const char *attrs, int n, const dl_real *x,
                           const double *want)
{
    struct ot_run r;
    struct dl_shape in = {n, 1, 1};
    ot_setup(&r, op, attrs, 1, 1, &in, &x, NULL, 1);
    op->forward(&r.call);
    for (int i = 0; i < n; i++)
        if (!(fabs(dl_tensor_f32(&r.call.out)[i] - want[i]) <= 1e-12))
            fail_msg("%s %s: out[%d] = %.17g, expected %.17g", op->name, attrs, i, dl_tensor_f32(&r.call.out)[i],
                     want[i]);
    ot_free(&r);
}

static void activation_values(void **state)
{
    (void)state;
    const dl_real x[] = {-2, -0.5, 0, 0.5, 3, -1000, 1000};
    const double relu[] = {0, 0, 0, 0.5, 3, 0, 1000};
    const double leaky[] = {-0.2, -0.05, 0, 0.5, 3, -100, 1000};
    const double leaky_default[] = {-0.02, -0.005, 0, 0.5, 3, -10, 1000};
    const double sigmoid[] = {0.11920292202211755, 0.37754066879814541, 0.5, 0.62245933120185459,
                              0.95257412682243336, 0, 1};
    const double tanh_[] = {-0.96402758007581690, -0.46211715726000974, 0, 0.46211715726000974,
                            0.99505475368673045, -1, 1};
    expect_forward(&dl_op_relu, "{}", 7, x, relu);
    expect_forward(&dl_op_leaky_relu, "{slope: 0.1}", 7, x, leaky);
    expect_forward(&dl_op_leaky_relu, "{}", 7, x, leaky_default);
    expect_forward(&dl_op_sigmoid, "{}", 7, x, sigmoid);
    expect_forward(&dl_op_tanh, "{}", 7, x, tanh_);
}

/* Backward of sigmoid and tanh at large |x| must give 0, not NaN. */
static void activation_saturation(void **state)
{
    (void)state;
    const dl_real x[] = {-1000, 1000};
    const struct dl_op_kind *ops[] = {&dl_op_sigmoid, &dl_op_tanh};
    for (int k = 0; k < 2; k++) {
        struct ot_run r;
        struct dl_shape in = {2, 1, 1};
        const dl_real *xs = x;
        ot_setup(&r, ops[k], "{}", 1, 1, &in, &xs, NULL, 1);
        ops[k]->forward(&r.call);
        dl_tensor_f32(&r.call.dout)[0] = dl_tensor_f32(&r.call.dout)[1] = 1;
        ops[k]->backward(&r.call);
        assert_true(dl_tensor_f32(&r.call.din[0])[0] == 0 && dl_tensor_f32(&r.call.din[0])[1] == 0);
        ot_free(&r);
    }
}

/* ---------------------------------------------------------------- dropout */
enum { DROP_N = 4, DROP_C = 25, DROP_HW = 10 };

/* Forward and backward (dout = 1) of dropout(rate 0.3) on a batch of ones. */
static void dropout_run_ones(struct ot_run *r, int training)
{
    struct dl_shape in = {DROP_C, DROP_HW, DROP_HW};
    ot_setup(r, &dl_op_dropout, "{rate: 0.3}", DROP_N, 1, &in, NULL, NULL, training);
    dl_real *x = dl_tensor_f32(&r->call.in[0]), *dy = dl_tensor_f32(&r->call.dout);
    for (long i = 0; i < r->in_count[0]; i++)
        x[i] = dy[i] = 1;
    dl_op_dropout.forward(&r->call);
    dl_op_dropout.backward(&r->call);
}

static void dropout_statistics(void **state)
{
    (void)state;
    struct ot_run r;
    dropout_run_ones(&r, 1);
    long n = r.out_count, zeros = 0;
    double sum = 0, keep = 1 / 0.7;
    for (long i = 0; i < n; i++) {
        dl_real y = dl_tensor_f32(&r.call.out)[i];
        if (y == 0)
            zeros++;
        else if (fabs(y - keep) > 1e-12)
            fail_msg("out[%ld] = %.17g, neither 0 nor 1/(1-rate)", i, y);
        sum += y;
        /* backward applies the same mask */
        assert_true(dl_tensor_f32(&r.call.din[0])[i] == y);
    }
    /* 40000 draws: the standard deviation of the dropped fraction is 0.0023
     * and that of the mean 0.0033, so these bounds are over 4 sigma. */
    double frac = (double)zeros / n, mean = sum / n;
    if (fabs(frac - 0.3) > 0.01 || fabs(mean - 1) > 0.015)
        fail_msg("dropped fraction %.4f (want 0.3), mean %.4f (want 1)", frac, mean);
    ot_free(&r);
}

/* The mask depends on the key only: same bits for 1, 2 and 3 threads;
 * another key gives another mask. */
static void dropout_deterministic(void **state)
{
    (void)state;
    struct ot_run ref;
    dropout_run_ones(&ref, 1);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
        omp_set_num_threads(t);
        struct ot_run r;
        dropout_run_ones(&r, 1);
        assert_memory_equal(dl_tensor_f32(&r.call.out), dl_tensor_f32(&ref.call.out), sizeof(dl_real) * (size_t)r.out_count);
        ot_free(&r);
    }
    omp_set_num_threads(threads);
#endif
    struct ot_run other;
    struct dl_shape in = {DROP_C, DROP_HW, DROP_HW};
    ot_setup(&other, &dl_op_dropout, "{rate: 0.3}", DROP_N, 1, &in, (const dl_real *const[]){dl_tensor_const_f32(&ref.call.in[0])}, NULL, 1);
    other.call.key = 43;
    dl_op_dropout.forward(&other.call);
    assert_memory_not_equal(dl_tensor_f32(&other.call.out), dl_tensor_f32(&ref.call.out), sizeof(dl_real) * (size_t)ref.out_count);
    ot_free(&other);
    ot_free(&ref);
}

/* Any split of the batch (data-parallel ranks, pipeline chunks,
 * micro-batches: sample0) or of the channels (tensor parallelism:
 * channel0) draws the whole call's mask. */
static void dropout_mask_ignores_splits(void **state)
{
    (void)state;
    struct ot_run whole;
    dropout_run_ones(&whole, 1);
    const long per = (long)DROP_C * DROP_HW * DROP_HW, plane = (long)DROP_HW * DROP_HW;
    for (int cut = 1; cut < DROP_N; cut++) { /* samples [0, cut) and [cut, N) */
        struct dl_shape in = {DROP_C, DROP_HW, DROP_HW};
        for (int part = 0; part < 2; part++) {
            int first = part ? cut : 0, n = part ? DROP_N - cut : cut;
            struct ot_run r;
            ot_setup(&r, &dl_op_dropout, "{rate: 0.3}", n, 1, &in, NULL, NULL, 1);
            for (long i = 0; i < r.in_count[0]; i++)
                (dl_tensor_f32(&r.call.in[0]))[i] = 1;
            r.call.sample0 = first;
            dl_op_dropout.forward(&r.call);
            assert_memory_equal(dl_tensor_f32(&r.call.out), dl_tensor_f32(&whole.call.out) + first * per, sizeof(dl_real) * (size_t)(n * per));
            ot_free(&r);
        }
    }
    for (int c0 = 0; c0 < DROP_C; c0 += 5) { /* a block of 5 channels */
        struct dl_shape in = {5, DROP_HW, DROP_HW};
        struct ot_run r;
        ot_setup(&r, &dl_op_dropout, "{rate: 0.3}", DROP_N, 1, &in, NULL, NULL, 1);
        for (long i = 0; i < r.in_count[0]; i++)
            (dl_tensor_f32(&r.call.in[0]))[i] = 1;
        r.call.channel0 = c0;
        dl_op_dropout.forward(&r.call);
        for (int n = 0; n < DROP_N; n++)
            assert_memory_equal(dl_tensor_f32(&r.call.out) + n * 5 * plane, dl_tensor_f32(&whole.call.out) + n * per + c0 * plane,
                                sizeof(dl_real) * (size_t)(5 * plane));
        ot_free(&r);
    }
    ot_free(&whole);
}

/* Inference: out = x and din = dout exactly. */
static void dropout_inference_identity(void **state)
{
    (void)state;
    struct ot_run r;
    dropout_run_ones(&r, 0);
    for (long i = 0; i < r.out_count; i++)
        assert_true(dl_tensor_f32(&r.call.out)[i] == 1 && dl_tensor_f32(&r.call.din[0])[i] == 1);
    ot_free(&r);
}

/* ---------------------------------------------------------------- errors */
static void attribute_errors(void **state)
{
    (void)state;
    ot_expect_attr_error(&dl_op_dropout, "{rate: 1}",
                         (const char *[]){"rate", "[0, 1)", "found 1", NULL});
    ot_expect_attr_error(&dl_op_dropout, "{rate: -0.1}", (const char *[]){"rate", "-0.1", NULL});
    ot_expect_attr_error(&dl_op_dropout, "{p: 0.5}", (const char *[]){"p", NULL});
    ot_expect_attr_error(&dl_op_leaky_relu, "{slope: 2}",
                         (const char *[]){"slope", "found 2", NULL});
    ot_expect_attr_error(&dl_op_leaky_relu, "{slope: -0.1}", (const char *[]){"slope", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(relu_grad),
        cmocka_unit_test(leaky_relu_grad),
        cmocka_unit_test(sigmoid_grad),
        cmocka_unit_test(tanh_grad),
        cmocka_unit_test(dropout_grad_training),
        cmocka_unit_test(dropout_grad_inference),
        cmocka_unit_test(activation_values),
        cmocka_unit_test(activation_saturation),
        cmocka_unit_test(dropout_statistics),
        cmocka_unit_test(dropout_deterministic),
        cmocka_unit_test(dropout_mask_ignores_splits),
        cmocka_unit_test(dropout_inference_identity),
        cmocka_unit_test(attribute_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
