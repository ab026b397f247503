/* test_grad_rnn.c: the recurrent layers (lstm, gru, rnn): finite-difference
 * gradient checks of backpropagation through time in the double precision
 * build (one and two stacked layers, bidirectional, without biases, odd
 * shapes; dropout between layers), a one-step value against the formulas,
 * dropout's mask, and their shape and attribute errors.  Their numbers against PyTorch's nn.LSTM and nn.GRU:
 * tests/test_rnn.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "ops/kinds.h"
#include "optest.h"

#define SEQ(T, C) dl_shape_seq(T, C, DL_F32)

static void run_cases(const struct dl_op_kind *op, const char *const *attrs, int n)
{
    struct dl_shape shapes[] = {SEQ(5, 3), SEQ(4, 6), SEQ(1, 2)};
    for (int i = 0; i < n; i++) {
        struct gc_case c = {.op = op, .attrs = attrs[i], .batch = 2 + i % 2, .n_in = 1, .in = {shapes[i % 3]},
                            .training = 1, .max_checks = 120};
        gc_assert(&c);
    }
}

static void lstm_grad(void **state)
{
    const char *attrs[] = {"{hidden: 3}", "{hidden: 2, layers: 2, bidirectional: true}", "{hidden: 4, bias: false}",
                           "{hidden: 3, layers: 3, dropout: 0.4}"};
    run_cases(&dl_op_lstm, attrs, 4);
}

static void gru_grad(void **state)
{
    const char *attrs[] = {"{hidden: 3}", "{hidden: 2, layers: 2, bidirectional: true, dropout: 0.5}",
                           "{hidden: 4, bias: false}", "{hidden: 3, bidirectional: true}"};
    run_cases(&dl_op_gru, attrs, 4);
}

static void rnn_grad(void **state)
{
    const char *attrs[] = {"{hidden: 3}", "{hidden: 2, layers: 2, bidirectional: true, nonlinearity: relu}",
                           "{hidden: 4, nonlinearity: relu, bias: false}"};
    run_cases(&dl_op_rnn, attrs, 3);
}

/* One step of one unit, one input feature: the formulas of nn.LSTM and
 * nn.GRU with every weight and bias set to chosen values. */
static void one_step_values(void **state)
{
    /* lstm: weight_ih [4, 1], weight_hh [4, 1], bias_ih [4], bias_hh [4] */
    dl_real x = 0.7, wih[4] = {0.5, -0.3, 0.8, 0.2}, whh[4] = {0.1, 0.2, 0.3, 0.4};
    dl_real bih[4] = {0.1, 1.0, -0.2, 0.05}, bhh[4] = {0.02, 0.5, 0.1, -0.3};
    const dl_real *xs[] = {&x};
    struct dl_shape s[1] = {SEQ(1, 1)};
    struct ot_run r;
    ot_setup(&r, &dl_op_lstm, "{hidden: 1}", 1, 1, s, xs, NULL, 1);
    dl_real *p[4] = {wih, whh, bih, bhh};
    r.call.param = p;
    dl_op_lstm.forward(&r.call);
    double a[4];
    for (int k = 0; k < 4; k++)
        a[k] = wih[k] * x + bih[k] + bhh[k]; /* h_{-1} = 0 */
    double i = 1 / (1 + exp(-a[0])), g = tanh(a[2]), o = 1 / (1 + exp(-a[3]));
    double c = i * g; /* f multiplies the zero initial cell */
    assert_true(fabs((double)dl_tensor_f32(&r.call.out)[0] - o * tanh(c)) < 1e-12);
    ot_free(&r);
    /* gru: r, z, n; the reset gate multiplies W_hn h + b_hn (b_hn inside) */
    ot_setup(&r, &dl_op_gru, "{hidden: 1}", 1, 1, s, xs, NULL, 1);
    r.call.param = p;
    dl_op_gru.forward(&r.call);
    double rr = 1 / (1 + exp(-(wih[0] * x + bih[0] + bhh[0]))), z = 1 / (1 + exp(-(wih[1] * x + bih[1] + bhh[1])));
    double n = tanh(wih[2] * x + bih[2] + rr * bhh[2]);
    assert_true(fabs((double)dl_tensor_f32(&r.call.out)[0] - (1 - z) * n) < 1e-12);
    ot_free(&r);
}

/* Dropout between layers: only in training, only between layers (one
 * layer draws nothing), a share near the rate of the inputs of layer 2
 * zeroed (saved after the outputs and cell values), the same mask for the
 * same key and sample, and another for another sample's place. */
static void dropout_between_layers(void **state)
{
    enum { N = 2, T = 50, C = 3 };
    dl_real x[N * T * C];
    for (int i = 0; i < N * T * C; i++)
        x[i] = (dl_real)sin(0.37 * (i % (T * C))); /* both samples alike */
    const dl_real *xs[] = {x};
    struct dl_shape s[1] = {SEQ(T, C)};
    const char *attrs[] = {"{hidden: 4, layers: 2}", "{hidden: 4, layers: 2, dropout: 0.3}"};
    dl_real out[4][N * 4 * T];
    for (int k = 0; k < 4; k++) { /* no dropout, dropout in inference, dropout in training, again at sample 1 */
        struct ot_run r;
        ot_setup(&r, &dl_op_lstm, attrs[k > 0], N, 1, s, xs, NULL, k >= 2);
        dl_real *p[8];
        for (int j = 0; j < 8; j++) {
            long n = j % 4 < 2 ? (j % 4 ? 16 * 4 : 16 * (j < 4 ? C : 4)) : 16;
            p[j] = calloc((size_t)n, sizeof(dl_real));
            for (long i = 0; i < n; i++)
                p[j][i] = (dl_real)(0.3 * cos(0.7 * i + j));
        }
        r.call.param = p;
        r.call.sample0 = k == 3;
        dl_op_lstm.forward(&r.call);
        memcpy(out[k], dl_tensor_f32(&r.call.out), sizeof out[k]);
        if (k == 2) { /* layer 2's input: the saved outputs of layer 1 with 30% zeroed, the rest / 0.7 */
            long DHT = 4 * T, zero = 0;
            const dl_real *y = r.call.saved, *in = r.call.saved + N * DHT + 2 * N * DHT * 5;
            for (long i = 0; i < N * DHT; i++) {
                zero += in[i] == 0;
                if (in[i] != 0)
                    assert_true(fabs((double)in[i] - (double)y[i] / 0.7) < 1e-12);
            }
            print_message("# %ld of %ld inputs of layer 2 dropped at rate 0.3\n", zero, N * DHT);
            assert_true(zero > 0.2 * N * DHT && zero < 0.4 * N * DHT);
        }
        for (int j = 0; j < 8; j++)
            free(p[j]);
        ot_free(&r);
    }
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    assert_memory_not_equal(out[0], out[2], sizeof out[0]);
    /* sample 1 at place 1 (k = 2) and at place 2 (k = 3) */
    assert_memory_not_equal(out[2] + 4 * T, out[3] + 4 * T, sizeof(dl_real) * 4 * T);
    assert_memory_equal(out[2] + 4 * T, out[3], sizeof(dl_real) * 4 * T);
}

static void shapes_and_attrs(void **state)
{
    struct dl_shape image = {3, 4, 5}, ids = dl_shape_seq(6, 1, DL_I32);
    const struct dl_op_kind *kinds[] = {&dl_op_lstm, &dl_op_gru, &dl_op_rnn};
    for (int k = 0; k < 3; k++) {
        ot_expect_infer_error(kinds[k], 1, &image, (const char *[]){"expected a sequence [T, C]", "3x4x5", NULL});
        ot_expect_infer_error(kinds[k], 1, &ids, (const char *[]){"expected a sequence [T, C]", "i32", NULL});
        ot_expect_attr_error(kinds[k], "{}", (const char *[]){"hidden", NULL});
        ot_expect_attr_error(kinds[k], "{hidden: 0}", (const char *[]){"hidden", NULL});
        ot_expect_attr_error(kinds[k], "{hidden: 4, layers: 0}", (const char *[]){"layers", NULL});
    }
    ot_expect_attr_error(&dl_op_gru, "{hidden: 4, layers: 2, dropout: 1}", (const char *[]){"dropout", "[0, 1)", NULL});
    ot_expect_attr_error(&dl_op_lstm, "{hidden: 4, nonlinearity: relu}", (const char *[]){"nonlinearity", NULL});
    ot_expect_attr_error(&dl_op_rnn, "{hidden: 4, nonlinearity: gelu}", (const char *[]){"nonlinearity", "tanh", "relu", NULL});
    /* the output: H features a direction at every step */
    struct dl_shape in = SEQ(7, 5), out;
    struct dl_error err = {0};
    void *a = calloc(1, dl_op_gru.attr_size);
    assert_int_equal(dl_attrs_from_string(&dl_op_gru, "{hidden: 6, bidirectional: true}", a, &err), DL_OK);
    assert_int_equal(dl_op_gru.infer(a, 1, &in, &out, &err), DL_OK);
    assert_true(dl_shape_eq(out, SEQ(7, 12)));
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lstm_grad),       cmocka_unit_test(gru_grad),
        cmocka_unit_test(rnn_grad),        cmocka_unit_test(one_step_values),
        cmocka_unit_test(dropout_between_layers), cmocka_unit_test(shapes_and_attrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
