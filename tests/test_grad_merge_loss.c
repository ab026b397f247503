/* test_grad_merge_loss.c: finite-difference checks, forward values and shape
 * errors of flatten, add, concat, softmax_cross_entropy and the regression
 * losses mse and l1, in the double precision build of the ops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "core/target_bits.h"

#include "gradcheck.h"
#include "ops/kinds.h"
#include "optest.h"

/* ---------------------------------------------------------------- gradients */
static void flatten_grad(void **state)
{
    (void)state;
    struct gc_case c = {.op = &dl_op_flatten, .attrs = "{}", .batch = 3, .n_in = 1,
                        .in = {{5, 3, 2}}, .training = 1};
    gc_assert(&c);
}

static void add_grad(void **state)
{
    (void)state;
    struct gc_case two = {.op = &dl_op_add, .attrs = "{}", .batch = 2, .n_in = 2,
                          .in = {{3, 5, 7}, {3, 5, 7}}, .training = 1};
    gc_assert(&two);
    struct gc_case three = {.op = &dl_op_add, .attrs = "{}", .batch = 3, .n_in = 3,
                            .in = {{9, 1, 1}, {9, 1, 1}, {9, 1, 1}}, .training = 0};
    gc_assert(&three);
}

static void concat_grad(void **state)
{
    (void)state;
    struct gc_case maps = {.op = &dl_op_concat, .attrs = "{}", .batch = 2, .n_in = 3,
                           .in = {{2, 3, 5}, {3, 3, 5}, {1, 3, 5}}, .training = 1};
    gc_assert(&maps);
    struct gc_case vectors = {.op = &dl_op_concat, .attrs = "{}", .batch = 3, .n_in = 2,
                              .in = {{4, 1, 1}, {7, 1, 1}}, .training = 1};
    gc_assert(&vectors);
}

static void softmax_xent_grad(void **state)
{
    (void)state;
    const char *attrs[] = {"{}", "{label_smoothing: 0.1}", "{label_smoothing: 0.7}"};
    for (int i = 0; i < 3; i++) {
        struct gc_case c = {.op = &dl_op_softmax_xent, .attrs = attrs[i], .batch = 5, .n_in = 1,
                            .in = {{7, 1, 1}}, .training = 1};
        gc_assert(&c);
    }
    struct gc_case two = {.op = &dl_op_softmax_xent, .attrs = "{label_smoothing: 0.2}", .batch = 3,
                          .n_in = 1, .in = {{2, 1, 1}}, .training = 1};
    gc_assert(&two);
    /* per position of a sequence [T, C]: 5 positions of 6 classes, every label, then every third ignored */
    struct gc_case seq = {.op = &dl_op_softmax_xent, .attrs = "{}", .batch = 3, .n_in = 1,
                          .in = {dl_shape_seq(5, 6, DL_F32)}, .training = 1};
    gc_assert(&seq);
    seq.ignore_some = 1;
    seq.attrs = "{label_smoothing: 0.1}";
    gc_assert(&seq);
}

static void expect_near(const char *what, double got, double want, double tol);

/* mse and l1 against float targets, one per prediction: vectors of 7 and
 * of 1 prediction per sample. */
static void regression_grad(void **state)
{
    (void)state;
    const struct dl_op_kind *kinds[] = {&dl_op_mse, &dl_op_l1};
    for (int i = 0; i < 2; i++) {
        struct gc_case c = {.op = kinds[i], .attrs = "{}", .batch = 5, .n_in = 1, .in = {{7, 1, 1}}, .training = 1};
        gc_assert(&c);
        struct gc_case one = {.op = kinds[i], .attrs = "{}", .batch = 3, .n_in = 1, .in = {{1, 1, 1}}, .training = 1};
        gc_assert(&one);
    }
}

/* Two samples of 4 predictions against targets, by hand: differences
 * d = x - t of [1, 0, -1, 2] and [-3, 0.5, 0, 0]; mse = mean(d^2), its
 * gradient dout 2 d / 4; l1 = mean(|d|), its gradient dout sign(d) / 4 with
 * sign(0) = 0 (torch.sign: a prediction on its target gets nothing). */
static void regression_values(void **state)
{
    (void)state;
    const dl_real x[8] = {1, -2, 0.5, 3, -1, 2.5, 4, -0.25};
    const float t[8] = {0, -2, 1.5, 1, 2, 2, 4, -0.25};
    const double dout[2] = {2, 0.5};
    int labels[8];
    for (int i = 0; i < 8; i++)
        labels[i] = dl_target_bits(t[i]);
    const struct {
        const struct dl_op_kind *kind;
        double loss[2];
    } cases[] = {{&dl_op_mse, {6.0 / 4, 9.25 / 4}}, {&dl_op_l1, {4.0 / 4, 3.5 / 4}}};
    for (int k = 0; k < 2; k++) {
        struct ot_run r;
        struct dl_shape in = {4, 1, 1};
        const dl_real *xs = x;
        ot_setup(&r, cases[k].kind, "{}", 2, 1, &in, &xs, labels, 1);
        cases[k].kind->forward(&r.call);
        char what[96];
        for (int n = 0; n < 2; n++) {
            snprintf(what, sizeof what, "%s sample %d loss", cases[k].kind->name, n);
            expect_near(what, dl_tensor_f32(&r.call.out)[n], cases[k].loss[n], 1e-12);
            dl_tensor_f32(&r.call.dout)[n] = dout[n];
        }
        cases[k].kind->backward(&r.call);
        for (int i = 0; i < 8; i++) {
            double d = (double)x[i] - t[i], g = dout[i / 4] / 4;
            double want = k == 0 ? g * 2 * d : g * (double)((d > 0) - (d < 0));
            snprintf(what, sizeof what, "%s din[%d] (x - t = %g)", cases[k].kind->name, i, d);
            expect_near(what, dl_tensor_f32(&r.call.din[0])[i], want, 1e-12);
        }
        ot_free(&r);
        assert_int_equal(cases[k].kind->is_loss, 1);
        assert_int_equal(cases[k].kind->float_targets, 1);
    }
}

/* Per position: a sample's loss is the mean over its positions whose label
 * is not ignored of the vector loss at that position, and its gradient the
 * vector gradient divided by that count (0 at ignored positions). */
static void softmax_xent_positions(void **state)
{
    (void)state;
    enum { N = 2, T = 4, C = 3 };
    dl_real x[N * C * T];
    struct dl_rng rng;
    dl_rng_seed(&rng, 5);
    for (int i = 0; i < N * C * T; i++)
        x[i] = (dl_real)dl_rng_normal(&rng);
    const int labels[N * T] = {0, 2, -100, 1, -100, -100, -100, -100}; /* sample 1: every label ignored */
    struct dl_shape seq = dl_shape_seq(T, C, DL_F32), vec = {C, 1, 1};
    struct ot_run r;
    const dl_real *xs = x;
    ot_setup(&r, &dl_op_softmax_xent, "{}", N, 1, &seq, &xs, labels, 1);
    dl_op_softmax_xent.forward(&r.call);
    for (int i = 0; i < N; i++)
        dl_tensor_f32(&r.call.dout)[i] = 3;
    dl_op_softmax_xent.backward(&r.call);
    double sum = 0;
    int valid = 0;
    for (int t = 0; t < T; t++) { /* sample 0, position by position through the vector loss */
        if (labels[t] < 0) {
            for (int k = 0; k < C; k++)
                assert_true(dl_tensor_f32(&r.call.din[0])[k * T + t] == 0);
            continue;
        }
        dl_real xt[C];
        for (int k = 0; k < C; k++)
            xt[k] = x[k * T + t];
        struct ot_run v;
        const dl_real *xv = xt;
        ot_setup(&v, &dl_op_softmax_xent, "{}", 1, 1, &vec, &xv, &labels[t], 1);
        dl_op_softmax_xent.forward(&v.call);
        dl_tensor_f32(&v.call.dout)[0] = 3;
        dl_op_softmax_xent.backward(&v.call);
        sum += dl_tensor_f32(&v.call.out)[0];
        valid++;
        for (int k = 0; k < C; k++)
            /* the vector's gradient is dout (p - q); per position, dout / 1.5: the batch's 3 labelled
             * positions over its 2 samples */
            expect_near("din per position", dl_tensor_f32(&r.call.din[0])[k * T + t], dl_tensor_f32(&v.call.din[0])[k] / 1.5, 1e-12);
        ot_free(&v);
    }
    assert_int_equal(valid, 3);
    expect_near("sample 0 loss: its sum over 1.5 labelled positions a sample", dl_tensor_f32(&r.call.out)[0], sum / 1.5, 1e-12);
    expect_near("sample 1 loss: every label ignored", dl_tensor_f32(&r.call.out)[1], 0, 0);
    expect_near("the batch's mean: the mean over its 3 labelled positions (PyTorch's)",
                (dl_tensor_f32(&r.call.out)[0] + dl_tensor_f32(&r.call.out)[1]) / N, sum / valid, 1e-12);
    for (int i = C * T; i < 2 * C * T; i++)
        assert_true(dl_tensor_f32(&r.call.din[0])[i] == 0);
    /* a mini-batch's count from the trainer (its other samples elsewhere) divides instead */
    r.call.label_norm = 2.5;
    dl_op_softmax_xent.forward(&r.call);
    expect_near("sample 0 loss over the mini-batch's 2.5 labelled positions a sample", dl_tensor_f32(&r.call.out)[0], sum / 2.5, 1e-12);
    ot_free(&r);
}

/* ---------------------------------------------------------------- forward values */
static void expect_near(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s = %.17g, expected %.17g", what, got, want);
}

static void flatten_layout(void **state)
{
    (void)state;
    struct ot_run r;
    struct dl_shape in = {2, 2, 3};
    dl_real x[24];
    for (int i = 0; i < 24; i++)
        x[i] = i;
    const dl_real *xs = x;
    ot_setup(&r, &dl_op_flatten, "{}", 2, 1, &in, &xs, NULL, 1);
    assert_true(r.call.out.shape.c == 12 && r.call.out.shape.h == 1 && r.call.out.shape.w == 1);
    dl_op_flatten.forward(&r.call);
    assert_memory_equal(dl_tensor_f32(&r.call.out), x, sizeof x);
    ot_free(&r);
}

static void add_values(void **state)
{
    (void)state;
    struct ot_run r;
    struct dl_shape in[3] = {{2, 1, 1}, {2, 1, 1}, {2, 1, 1}};
    const dl_real a[] = {1, 2}, b[] = {10, 20}, c[] = {100, 200};
    const dl_real *xs[] = {a, b, c};
    ot_setup(&r, &dl_op_add, "{}", 1, 3, in, xs, NULL, 1);
    dl_op_add.forward(&r.call);
    assert_true(dl_tensor_f32(&r.call.out)[0] == 111 && dl_tensor_f32(&r.call.out)[1] == 222);
    dl_tensor_f32(&r.call.dout)[0] = 3;
    dl_tensor_f32(&r.call.dout)[1] = -4;
    free(r.call.din[1].data);
    r.call.din[1].data = NULL; /* not needed: must be skipped */
    dl_op_add.backward(&r.call);
    assert_true(dl_tensor_f32(&r.call.din[0])[0] == 3 && dl_tensor_f32(&r.call.din[0])[1] == -4);
    assert_true(dl_tensor_f32(&r.call.din[2])[0] == 3 && dl_tensor_f32(&r.call.din[2])[1] == -4);
    ot_free(&r);
}

/* Two samples of a (1,1,2) and b (2,1,2): out per sample is a's channel
 * then b's two channels. */
static void concat_layout(void **state)
{
    (void)state;
    struct ot_run r;
    struct dl_shape in[2] = {{1, 1, 2}, {2, 1, 2}};
    const dl_real a[] = {1, 2, /* sample 1 */ 3, 4};
    const dl_real b[] = {10, 11, 12, 13, /* sample 1 */ 14, 15, 16, 17};
    const dl_real *xs[] = {a, b};
    ot_setup(&r, &dl_op_concat, "{}", 2, 2, in, xs, NULL, 1);
    assert_true(r.call.out.shape.c == 3 && r.call.out.shape.h == 1 && r.call.out.shape.w == 2);
    dl_op_concat.forward(&r.call);
    const dl_real want[] = {1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17};
    assert_memory_equal(dl_tensor_f32(&r.call.out), want, sizeof want);
    /* backward splits dout into the same blocks; din[0] = NULL is skipped */
    memcpy(dl_tensor_f32(&r.call.dout), want, sizeof want);
    free(r.call.din[0].data);
    r.call.din[0].data = NULL;
    dl_op_concat.backward(&r.call);
    assert_memory_equal(dl_tensor_f32(&r.call.din[1]), b, sizeof b);
    ot_free(&r);
}

/* Loss and gradient of one sample of 3 logits, checked against values
 * computed by hand (p = softmax([1, 2, 3]) = [0.0900, 0.2447, 0.6652]). */
static void softmax_xent_values(void **state)
{
    (void)state;
    const double p[] = {0.09003057317038043, 0.24472847105479759, 0.6652409557748217};
    const struct {
        const char *attrs;
        dl_real x[3];
        int label;
        double loss;
    } cases[] = {
        {"{}", {1, 2, 3}, 2, 0.4076059644443806},
        {"{label_smoothing: 0.1}", {1, 2, 3}, 2, 0.5076059644443807},
        {"{label_smoothing: 0.25}", {1, 2, 3}, 0, 2.1576059644443806},
        /* exp(1000) would overflow without subtracting the maximum */
        {"{}", {1000, 0, -1000}, 0, 0},
        {"{}", {1000, 0, -1000}, 2, 2000},
        {"{label_smoothing: 0.3}", {1000, 0, -1000}, 2, 1700},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        struct ot_run r;
        struct dl_shape in = {3, 1, 1};
        const dl_real *xs = cases[k].x;
        ot_setup(&r, &dl_op_softmax_xent, cases[k].attrs, 1, 1, &in, &xs, &cases[k].label, 1);
        assert_true(r.call.out.shape.c == 1 && r.call.out.shape.h == 1 && r.call.out.shape.w == 1);
        dl_op_softmax_xent.forward(&r.call);
        char what[96];
        snprintf(what, sizeof what, "case %d %s loss", k, cases[k].attrs);
        expect_near(what, dl_tensor_f32(&r.call.out)[0], cases[k].loss, 1e-12 * (1 + cases[k].loss));
        if (k < 3) { /* din = dout * (p - q), q = (1 - eps) onehot + eps / 3 */
            double eps = k == 0 ? 0 : k == 1 ? 0.1 : 0.25;
            dl_tensor_f32(&r.call.dout)[0] = 2;
            dl_op_softmax_xent.backward(&r.call);
            for (int i = 0; i < 3; i++) {
                double q = (i == cases[k].label) * (1 - eps) + eps / 3;
                snprintf(what, sizeof what, "case %d din[%d]", k, i);
                expect_near(what, dl_tensor_f32(&r.call.din[0])[i], 2 * (p[i] - q), 1e-12);
            }
        }
        ot_free(&r);
    }
    assert_int_equal(dl_op_softmax_xent.is_loss, 1);
}

/* ---------------------------------------------------------------- errors */
static void shape_errors(void **state)
{
    (void)state;
    /* add: every mismatching input is named with its shape, against input 0's */
    struct dl_shape add_in[4] = {{3, 4, 4}, {3, 4, 4}, {2, 4, 4}, {3, 4, 5}};
    ot_expect_infer_error(&dl_op_add, 4, add_in,
                          (const char *[]){"input 0 (3x4x4)", "input 2 is 2x4x4",
                                           "input 3 is 3x4x5", NULL});
    struct dl_shape add_vec[2] = {{10, 1, 1}, {12, 1, 1}};
    ot_expect_infer_error(&dl_op_add, 2, add_vec, (const char *[]){"(10)", "input 1 is 12", NULL});

    /* concat: height and width must match input 0's */
    struct dl_shape cat_in[3] = {{2, 4, 4}, {3, 4, 4}, {5, 4, 5}};
    ot_expect_infer_error(&dl_op_concat, 3, cat_in,
                          (const char *[]){"channels", "4x4", "input 2 has 4x5", "5x4x5", NULL});

    /* softmax_cross_entropy: class scores must be a vector */
    struct dl_shape spatial = {10, 4, 4};
    ot_expect_infer_error(&dl_op_softmax_xent, 1, &spatial,
                          (const char *[]){"softmax_cross_entropy", "found 10x4x4",
                                           "flatten", NULL});
    struct dl_shape one_class = {1, 1, 1};
    ot_expect_infer_error(&dl_op_softmax_xent, 1, &one_class,
                          (const char *[]){"at least 2 classes", "found 1", NULL});

    /* mse, l1: predictions must be a vector (not a map, not a sequence) */
    ot_expect_infer_error(&dl_op_mse, 1, &spatial, (const char *[]){"mse, l1", "found 10x4x4", "flatten", NULL});
    struct dl_shape seq = dl_shape_seq(5, 3, DL_F32);
    ot_expect_infer_error(&dl_op_l1, 1, &seq, (const char *[]){"a vector of predictions", NULL});
}

static void attribute_errors(void **state)
{
    (void)state;
    ot_expect_attr_error(&dl_op_softmax_xent, "{label_smoothing: 1}",
                         (const char *[]){"label_smoothing", "[0, 1)", "found 1", NULL});
    ot_expect_attr_error(&dl_op_softmax_xent, "{label_smoothing: -0.5}",
                         (const char *[]){"label_smoothing", NULL});
    ot_expect_attr_error(&dl_op_flatten, "{axis: 1}", (const char *[]){"axis", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flatten_grad),
        cmocka_unit_test(add_grad),
        cmocka_unit_test(concat_grad),
        cmocka_unit_test(softmax_xent_grad),
        cmocka_unit_test(softmax_xent_positions),
        cmocka_unit_test(regression_grad),
        cmocka_unit_test(regression_values),
        cmocka_unit_test(flatten_layout),
        cmocka_unit_test(add_values),
        cmocka_unit_test(concat_layout),
        cmocka_unit_test(softmax_xent_values),
        cmocka_unit_test(shape_errors),
        cmocka_unit_test(attribute_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
