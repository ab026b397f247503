/* test_grad_transformer.c: the transformer layers (gelu, swiglu,
 * layernorm, rmsnorm, rope, position_embedding, attention, moe): finite-difference gradient checks in the
 * double precision build, forward values against formulas and properties
 * (causality, each head on its own features, dropout's mask drawn by place),
 * and their shape errors. */
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

/* ---------------------------------------------------------------- gradients */
static void gelu_grad(void **state)
{
    const char *attrs[] = {"{}", "{approximate: none}"};
    for (int i = 0; i < 2; i++) {
        struct gc_case seq = {.op = &dl_op_gelu, .attrs = attrs[i], .batch = 3, .n_in = 1, .in = {SEQ(5, 4)},
                              .training = 1};
        gc_assert(&seq);
        struct gc_case image = {.op = &dl_op_gelu, .attrs = attrs[i], .batch = 2, .n_in = 1, .in = {{3, 4, 5}},
                                .training = 1};
        gc_assert(&image);
    }
}

static void swiglu_grad(void **state)
{
    struct gc_case seq = {.op = &dl_op_swiglu, .attrs = "{}", .batch = 3, .n_in = 2, .in = {SEQ(5, 4), SEQ(5, 4)},
                          .training = 1};
    gc_assert(&seq);
    struct gc_case image = {.op = &dl_op_swiglu, .attrs = "{}", .batch = 2, .n_in = 2,
                            .in = {{3, 4, 5}, {3, 4, 5}}, .training = 1};
    gc_assert(&image);
}

/* moe: gates normalised or not, the balancing and z losses (weighted by
 * the call's loss_norm), a capacity that drops choices, every expert
 * chosen, a feature vector */
static void moe_grad(void **state)
{
    struct gc_case cases[] = {
        {.op = &dl_op_moe, .attrs = "{experts: 4, top_k: 2, units: 3, aux_loss: 0.1, z_loss: 0.05}", .batch = 3,
         .n_in = 1, .in = {SEQ(5, 4)}, .training = 1},
        {.op = &dl_op_moe, .attrs = "{experts: 3, top_k: 1, units: 5, normalize: false, aux_loss: 0.3}",
         .batch = 2, .n_in = 1, .in = {SEQ(7, 3)}, .training = 1},
        {.op = &dl_op_moe, .attrs = "{experts: 3, top_k: 2, units: 2, capacity_factor: 0.5, z_loss: 0.2}",
         .batch = 2, .n_in = 1, .in = {SEQ(6, 5)}, .training = 1},
        {.op = &dl_op_moe, .attrs = "{experts: 3, top_k: 3, units: 4, normalize: false}", .batch = 2, .n_in = 1,
         .in = {SEQ(3, 2)}, .training = 1},
        {.op = &dl_op_moe, .attrs = "{experts: 5, top_k: 2, units: 3, aux_loss: 0.01}", .batch = 4, .n_in = 1,
         .in = {{6, 1, 1}}, .training = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        gc_assert(&cases[i]);
}

static void layernorm_grad(void **state)
{
    struct gc_case seq = {.op = &dl_op_layernorm, .attrs = "{}", .batch = 3, .n_in = 1, .in = {SEQ(5, 7)},
                          .training = 1};
    gc_assert(&seq);
    struct gc_case plain = {.op = &dl_op_layernorm, .attrs = "{affine: false, eps: 0.001}", .batch = 2, .n_in = 1,
                            .in = {SEQ(4, 6)}, .training = 1};
    gc_assert(&plain);
    struct gc_case vec = {.op = &dl_op_layernorm, .attrs = "{}", .batch = 4, .n_in = 1, .in = {{9, 1, 1}},
                          .training = 0};
    gc_assert(&vec);
}

static void rmsnorm_grad(void **state)
{
    struct gc_case seq = {.op = &dl_op_rmsnorm, .attrs = "{}", .batch = 3, .n_in = 1, .in = {SEQ(5, 7)},
                          .training = 1};
    gc_assert(&seq);
    struct gc_case eps = {.op = &dl_op_rmsnorm, .attrs = "{eps: 0.01}", .batch = 2, .n_in = 1, .in = {SEQ(1, 3)},
                          .training = 1};
    gc_assert(&eps);
    struct gc_case vec = {.op = &dl_op_rmsnorm, .attrs = "{}", .batch = 4, .n_in = 1, .in = {{9, 1, 1}},
                          .training = 0};
    gc_assert(&vec);
}

static void rope_grad(void **state)
{
    /* two heads of 4; Llama 3 scaling with all three bands at head_dim 8
     * (waves 6.3, 63 and 628 against 16 and 64) */
    struct gc_case two = {.op = &dl_op_rope, .attrs = "{head_dim: 4}", .batch = 2, .n_in = 1, .in = {SEQ(5, 8)},
                          .training = 1};
    gc_assert(&two);
    struct gc_case scaled = {.op = &dl_op_rope,
                             .attrs = "{head_dim: 8, theta: 1000, scaling_factor: 8, original_context: 64}",
                             .batch = 3, .n_in = 1, .in = {SEQ(7, 8)}, .training = 1};
    gc_assert(&scaled);
}

static void position_embedding_grad(void **state)
{
    /* fewer positions than the table: its last rows get no gradient */
    struct gc_case c = {.op = &dl_op_position_embedding, .attrs = "{context: 9}", .batch = 3, .n_in = 1,
                        .in = {SEQ(6, 4)}, .training = 1};
    gc_assert(&c);
}

static void attention_grad(void **state)
{
    static const struct {
        const char *attrs;
        int n_in, T, C, batch, training;
    } cases[] = {
        {"{heads: 1}", 1, 5, 3 * 4, 2, 1},                  /* packed q, k, v */
        {"{heads: 2}", 1, 6, 3 * 6, 2, 1},                  /* two heads of 3 features */
        {"{heads: 3}", 3, 4, 6, 2, 1},                      /* three inputs */
        {"{heads: 2, causal: false}", 1, 5, 3 * 4, 2, 1},   /* every position sees every other */
        {"{heads: 2, dropout: 0.3}", 1, 7, 3 * 4, 3, 1},    /* the same mask on every evaluation */
        {"{heads: 2, dropout: 0.3}", 1, 4, 3 * 4, 2, 0},    /* inference: no dropout */
        {"{heads: 1}", 1, 1, 3 * 2, 3, 1},                  /* one position */
        /* grouped-query: q of 4 heads of 3, k and v of 2 (or 1: multi-query) */
        {"{heads: 4, kv_heads: 2}", 3, 5, 12, 2, 1},
        {"{heads: 4, kv_heads: 1, dropout: 0.2}", 3, 4, 12, 2, 1},
        {"{heads: 4, kv_heads: 2, causal: false}", 1, 5, (4 + 2 * 2) * 3, 2, 1}, /* packed [T, (H + 2KV) d] */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gc_case c = {.op = &dl_op_attention, .attrs = cases[i].attrs, .batch = cases[i].batch,
                            .n_in = cases[i].n_in, .training = cases[i].training};
        for (int k = 0; k < c.n_in; k++)
            c.in[k] = SEQ(cases[i].T, cases[i].C);
        if (strstr(cases[i].attrs, "kv_heads") && c.n_in == 3) /* k and v: kv_heads x 3 features */
            c.in[1] = c.in[2] = SEQ(cases[i].T, strstr(cases[i].attrs, "kv_heads: 1") ? 3 : 6);
        gc_assert(&c);
    }
}

/* ---------------------------------------------------------------- forward values */
static void gelu_values(void **state)
{
    static const double x[] = {-3, -1, -0.5, 0, 0.5, 1, 3};
    dl_real in[7];
    for (int i = 0; i < 7; i++)
        in[i] = (dl_real)x[i];
    const dl_real *xs[] = {in};
    struct dl_shape s = {7, 1, 1};
    struct ot_run r;
    ot_setup(&r, &dl_op_gelu, "{}", 1, 1, &s, xs, NULL, 1);
    dl_op_gelu.forward(&r.call);
    for (int i = 0; i < 7; i++) {
        double v = x[i], want = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        assert_true(fabs((double)dl_tensor_f32(&r.call.out)[i] - want) < 1e-12);
    }
    ot_free(&r);
    ot_setup(&r, &dl_op_gelu, "{approximate: none}", 1, 1, &s, xs, NULL, 1);
    dl_op_gelu.forward(&r.call);
    for (int i = 0; i < 7; i++)
        assert_true(fabs((double)dl_tensor_f32(&r.call.out)[i] - x[i] * 0.5 * erfc(-x[i] / sqrt(2))) < 1e-12);
    assert_true(fabs((double)dl_tensor_f32(&r.call.out)[5] - 0.8413447460685429) < 1e-12); /* GELU(1) = Phi(1) */
    ot_free(&r);
    ot_expect_attr_error(&dl_op_gelu, "{approximate: sigmoid}", (const char *[]){"approximate", "tanh", "none", NULL});
}

/* silu(gate) x up against its formula; the shapes must agree. */
static void swiglu_values(void **state)
{
    static const double g[] = {-6, -1, -0.25, 0, 0.5, 2, 8}, u[] = {2, -3, 1, 5, -1, 0.5, 1};
    dl_real gs[7], us[7];
    for (int i = 0; i < 7; i++)
        gs[i] = (dl_real)g[i], us[i] = (dl_real)u[i];
    const dl_real *xs[] = {gs, us};
    struct dl_shape s[2] = {{7, 1, 1}, {7, 1, 1}};
    struct ot_run r;
    ot_setup(&r, &dl_op_swiglu, "{}", 1, 2, s, xs, NULL, 1);
    dl_op_swiglu.forward(&r.call);
    for (int i = 0; i < 7; i++)
        assert_true(fabs((double)dl_tensor_f32(&r.call.out)[i] - g[i] / (1 + exp(-g[i])) * u[i]) < 1e-12);
    ot_free(&r);
    struct dl_shape other[2] = {SEQ(4, 6), SEQ(4, 5)};
    ot_expect_infer_error(&dl_op_swiglu, 2, other, (const char *[]){"gate and up of one shape", "4x6", "4x5", NULL});
}

/* moe: every position of a sample prefers expert 0 of 2 (p0 = sigmoid(4));
 * dropless, each gets silu(2) x 2 in both features; with capacity_factor
 * 0.5 (a capacity of ceil(0.5 x 4 x 1 / 2) = 1) only the first does; the
 * balancing loss is 2 (F_0 P_0 + F_1 P_1) = 2 p0. */
static void moe_values(void **state)
{
    dl_real x[8], gate[4] = {1, 1, -1, -1}, ones[4] = {1, 1, 1, 1};
    for (int i = 0; i < 8; i++)
        x[i] = 1;
    const dl_real *xs[] = {x};
    struct dl_shape s[1] = {SEQ(4, 2)};
    const char *attrs[] = {"{experts: 2, top_k: 1, units: 1, aux_loss: 1}",
                           "{experts: 2, top_k: 1, units: 1, aux_loss: 1, capacity_factor: 0.5}"};
    double silu2 = 2 / (1 + exp(-2.0)), p0 = 1 / (1 + exp(-4.0));
    for (int a = 0; a < 2; a++) {
        struct ot_run r;
        ot_setup(&r, &dl_op_moe, attrs[a], 1, 1, s, xs, NULL, 1);
        r.param[0] = gate, r.param[1] = ones, r.param[2] = ones, r.param[3] = ones;
        dl_op_moe.forward(&r.call);
        for (int k = 0; k < 2; k++)
            for (int t = 0; t < 4; t++)
                assert_true(fabs((double)dl_tensor_f32(&r.call.out)[k * 4 + t] - (a && t ? 0 : silu2 * 2)) < 1e-6);
        assert_true(fabs(dl_op_moe.added_loss(&r.call) - 2 * p0) < 1e-6);
        ot_free(&r);
    }
    struct dl_shape image[1] = {{2, 3, 3}};
    ot_expect_infer_error(&dl_op_moe, 1, image, (const char *[]){"a sequence [T, C] or features [C]", "2x3x3", NULL});
}

/* Each position's features come out with mean 0 and variance 1 (before the
 * affine part), then scaled and shifted per feature. */
static void layernorm_values(void **state)
{
    int T = 3, C = 5, N = 2;
    struct dl_shape s = SEQ(T, C);
    dl_real x[2 * 15];
    struct dl_rng rng;
    dl_rng_seed(&rng, 9);
    for (int i = 0; i < N * C * T; i++)
        x[i] = (dl_real)(3 + 2 * dl_rng_normal(&rng));
    const dl_real *xs[] = {x};
    struct ot_run r;
    ot_setup(&r, &dl_op_layernorm, "{eps: 0}", N, 1, &s, xs, NULL, 1);
    dl_real w[5] = {1, 2, 3, 4, 5}, b[5] = {0, 1, 0, 1, 0};
    r.call.param[0] = w;
    r.call.param[1] = b;
    dl_op_layernorm.forward(&r.call);
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++) {
            double m = 0, v = 0;
            for (int k = 0; k < C; k++)
                m += ((double)dl_tensor_f32(&r.call.out)[(n * C + k) * T + t] - b[k]) / w[k];
            for (int k = 0; k < C; k++) {
                double z = ((double)dl_tensor_f32(&r.call.out)[(n * C + k) * T + t] - b[k]) / w[k];
                v += z * z;
            }
            assert_true(fabs(m / C) < 1e-12 && fabs(v / C - 1) < 1e-9);
        }
    ot_free(&r);
    struct dl_shape image = {3, 4, 4};
    ot_expect_infer_error(&dl_op_layernorm, 1, &image,
                          (const char *[]){"expected a sequence [T, C] or a vector [F]", "3x4x4", NULL});
}

/* Each position's features come out with a mean square of 1 (before the
 * weight), with their signs and ratios kept (no centring), then scaled per
 * feature; the output is the same for x and 7 x (eps 0). */
static void rmsnorm_values(void **state)
{
    int T = 3, C = 5, N = 2;
    struct dl_shape s = SEQ(T, C);
    dl_real x[2 * 15], x7[2 * 15], y[2 * 15];
    struct dl_rng rng;
    dl_rng_seed(&rng, 9);
    for (int i = 0; i < N * C * T; i++) {
        x[i] = (dl_real)(3 + 2 * dl_rng_normal(&rng));
        x7[i] = 7 * x[i];
    }
    const dl_real *xs[] = {x}, *x7s[] = {x7};
    dl_real w[5] = {1, 2, 3, 4, 5};
    struct ot_run r;
    ot_setup(&r, &dl_op_rmsnorm, "{eps: 0}", N, 1, &s, xs, NULL, 1);
    r.call.param[0] = w;
    dl_op_rmsnorm.forward(&r.call);
    for (int i = 0; i < N * C * T; i++)
        y[i] = dl_tensor_f32(&r.call.out)[i];
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++) {
            double ms = 0;
            for (int k = 0; k < C; k++) {
                double z = (double)y[(n * C + k) * T + t] / w[k], xv = (double)x[(n * C + k) * T + t];
                ms += z * z;
                assert_true(z * xv > 0); /* the sign kept: nothing subtracted */
            }
            assert_true(fabs(ms / C - 1) < 1e-9);
        }
    ot_free(&r);
    ot_setup(&r, &dl_op_rmsnorm, "{eps: 0}", N, 1, &s, x7s, NULL, 1);
    r.call.param[0] = w;
    dl_op_rmsnorm.forward(&r.call);
    for (int i = 0; i < N * C * T; i++)
        assert_true(fabs((double)dl_tensor_f32(&r.call.out)[i] - (double)y[i]) < 1e-9 * (1 + fabs((double)y[i])));
    ot_free(&r);
    struct dl_shape image = {3, 4, 4};
    ot_expect_infer_error(&dl_op_rmsnorm, 1, &image,
                          (const char *[]){"expected a sequence [T, C] or a vector [F]", "3x4x4", NULL});
}

/* x turned by rope: feature i of head h and feature i + D/2 as a complex
 * number times exp(j p f_i), computed here on its own. */
static double rope_expected(const dl_real *x, int C, int T, int n, int D, int k, int t, long p, double f)
{
    int h = k / D, i = k % D % (D / 2), second = k % D >= D / 2;
    double re = (double)x[(n * C + h * D + i) * T + t], im = (double)x[(n * C + h * D + i + D / 2) * T + t];
    double c = cos((double)p * f), s = sin((double)p * f);
    return second ? im * c + re * s : re * c - im * s;
}

/* The rotation against its formula (at position0 7, as a decoding call's),
 * position 0 left alone, each pair's length kept, a query-key product that
 * depends only on the distance between them, and Llama 3's three bands. */
static void rope_values(void **state)
{
    enum { T = 6, C = 8, N = 2, D = 4 };
    struct dl_shape s = SEQ(T, C);
    dl_real x[N * C * T];
    struct dl_rng rng;
    dl_rng_seed(&rng, 5);
    for (int i = 0; i < N * C * T; i++)
        x[i] = (dl_real)dl_rng_normal(&rng);
    const dl_real *xs[] = {x};
    struct ot_run r;
    ot_setup(&r, &dl_op_rope, "{head_dim: 4, theta: 100}", N, 1, &s, xs, NULL, 1);
    r.call.position0 = 7;
    dl_op_rope.forward(&r.call);
    const dl_real *y = dl_tensor_f32(&r.call.out);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++)
            for (int t = 0; t < T; t++) {
                double f = pow(100, -2.0 * (k % D % (D / 2)) / D);
                assert_true(fabs((double)y[(n * C + k) * T + t] - rope_expected(x, C, T, n, D, k, t, 7 + t, f)) <
                            1e-12);
            }
    ot_free(&r);

    /* the same vector at every position: position 0 unchanged, lengths kept,
     * and y_t . y_{t+d} the same for every t (per head) */
    for (int k = 0; k < C; k++)
        for (int t = 0; t < T; t++)
            x[k * T + t] = x[k * T];
    ot_setup(&r, &dl_op_rope, "{head_dim: 4}", 1, 1, &s, xs, NULL, 1);
    dl_op_rope.forward(&r.call);
    y = dl_tensor_f32(&r.call.out);
    for (int k = 0; k < C; k++)
        assert_true(fabs((double)y[k * T] - (double)x[k * T]) < 1e-12);
    for (int h = 0; h < C / D; h++)
        for (int d = 0; d < 3; d++) {
            double first = 0;
            for (int t = 0; t + d < T; t++) {
                double dot = 0, len = 0, len0 = 0;
                for (int i = 0; i < D; i++) {
                    dot += (double)y[(h * D + i) * T + t] * (double)y[(h * D + i) * T + t + d];
                    len += (double)y[(h * D + i) * T + t] * (double)y[(h * D + i) * T + t];
                    len0 += (double)x[(h * D + i) * T] * (double)x[(h * D + i) * T];
                }
                if (t == 0)
                    first = dot;
                assert_true(fabs(dot - first) < 1e-12 && fabs(len - len0) < 1e-12);
            }
        }
    ot_free(&r);

    /* Llama 3 scaling at head_dim 8, theta 1000 (f = 1, 0.178, 0.0316,
     * 0.00562: waves 6.3, 35, 199, 1117) against 64 / 4 = 16 and 64 / 1 = 64:
     * the first kept, the last two divided by 8, the second blended */
    struct dl_shape s8 = SEQ(2, 8);
    dl_real one[8 * 2] = {0};
    for (int k = 0; k < 4; k++)
        one[k * 2 + 1] = 1; /* position 1: the angle is the frequency */
    const dl_real *ones[] = {one};
    ot_setup(&r, &dl_op_rope, "{head_dim: 8, theta: 1000, scaling_factor: 8, original_context: 64}", 1, 1, &s8,
             ones, NULL, 1);
    dl_op_rope.forward(&r.call);
    y = dl_tensor_f32(&r.call.out);
    for (int i = 0; i < 4; i++) {
        double f = pow(1000, -2.0 * i / 8), wave = 2 * M_PI / f, want = f;
        if (wave > 64)
            want = f / 8;
        else if (wave >= 16) {
            double b = (64 / wave - 1) / (4 - 1);
            want = (1 - b) * f / 8 + b * f;
        }
        double got = atan2((double)y[(4 + i) * 2 + 1], (double)y[i * 2 + 1]);
        assert_true(fabs(got - want) < 1e-12);
    }
    assert_true(2 * M_PI / pow(1000, -0.25) < 64 && 2 * M_PI / pow(1000, -0.25) > 16); /* one blended */
    ot_free(&r);

    ot_expect_attr_error(&dl_op_rope, "{head_dim: 5}", (const char *[]){"head_dim", "even", "5", NULL});
    ot_expect_attr_error(&dl_op_rope, "{head_dim: 4, scaling_factor: 8, low_freq_factor: 4, high_freq_factor: 2}",
                         (const char *[]){"high_freq_factor", "low_freq_factor", NULL});
    struct dl_shape image = {8, 4, 4};
    ot_expect_infer_error(&dl_op_rope, 1, &image, (const char *[]){"expected a sequence [T, C]", "8x4x4", NULL});
    struct dl_error err = {0};
    void *attr = calloc(1, dl_op_rope.attr_size);
    assert_int_equal(dl_attrs_from_string(&dl_op_rope, "{head_dim: 4}", attr, &err), DL_OK);
    struct dl_shape odd = SEQ(3, 6), out;
    assert_int_equal(dl_op_rope.infer(attr, 1, &odd, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"multiple of head_dim 4", "6", NULL});
    free(attr);
}

static void position_embedding_values(void **state)
{
    int T = 3, C = 2;
    struct dl_shape s = SEQ(T, C);
    dl_real x[6] = {1, 2, 3, 4, 5, 6}; /* feature 0 at t = 0..2, then feature 1 */
    const dl_real *xs[] = {x};
    struct ot_run r;
    ot_setup(&r, &dl_op_position_embedding, "{context: 4}", 1, 1, &s, xs, NULL, 1);
    dl_real w[8] = {10, 20, 30, 40, 50, 60, 70, 80}; /* [context 4, C 2]: row t is (w[2t], w[2t+1]) */
    r.call.param[0] = w;
    dl_op_position_embedding.forward(&r.call);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < C; k++)
            assert_true(dl_tensor_f32(&r.call.out)[k * T + t] == x[k * T + t] + w[t * C + k]);
    ot_free(&r);
    struct dl_shape longer = SEQ(5, 2), image = {2, 3, 3};
    struct dl_error err = {0};
    struct { int context; } a = {4};
    struct dl_shape out;
    assert_int_equal(dl_op_position_embedding.infer(&a, 1, &longer, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"5 positions", "context 4", NULL});
    assert_int_equal(dl_op_position_embedding.infer(&a, 1, &image, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"expected a sequence [T, C]", "2x3x3", NULL});
}

/* Fills a sample's packed q, k, v [T, 3C] with normal values. */
static void random_fill(dl_real *x, long n, unsigned seed)
{
    struct dl_rng rng;
    dl_rng_seed(&rng, seed);
    for (long i = 0; i < n; i++)
        x[i] = (dl_real)dl_rng_normal(&rng);
}

/* Causal: position t's output depends on positions up to t only; at t = 0
 * it is v at 0.  Heads: changing head 1's features leaves head 0's output
 * alone.  Against a plain formula for one query. */
static void attention_values(void **state)
{
    int T = 5, C = 4, H = 2, d = 2;
    struct dl_shape s = SEQ(T, 3 * C);
    dl_real x[60], y0[20];
    random_fill(x, 60, 3);
    const dl_real *xs[] = {x};
    struct ot_run r;
    ot_setup(&r, &dl_op_attention, "{heads: 2}", 1, 1, &s, xs, NULL, 1);
    dl_op_attention.forward(&r.call);
    memcpy(y0, dl_tensor_f32(&r.call.out), sizeof y0);
    for (int k = 0; k < C; k++) /* t = 0 sees only itself: y = v[0] */
        assert_true(fabs((double)y0[k * T] - (double)x[(2 * C + k) * T]) < 1e-12);
    /* query t = 3 of head 1 by the formula */
    int t = 3, h = 1;
    double sc[5], most = -1e300, sum = 0;
    for (int u = 0; u <= t; u++) {
        double dot = 0;
        for (int j = 0; j < d; j++)
            dot += (double)x[(h * d + j) * T + t] * (double)x[(C + h * d + j) * T + u];
        sc[u] = dot / sqrt(d);
        most = fmax(most, sc[u]);
    }
    for (int u = 0; u <= t; u++)
        sum += (sc[u] = exp(sc[u] - most));
    for (int j = 0; j < d; j++) {
        double want = 0;
        for (int u = 0; u <= t; u++)
            want += sc[u] / sum * (double)x[(2 * C + h * d + j) * T + u];
        assert_true(fabs((double)y0[(h * d + j) * T + t] - want) < 1e-12);
    }
    /* the last position changes: nothing before it moves */
    for (int k = 0; k < 3 * C; k++)
        (dl_tensor_f32(&r.call.in[0]))[k * T + T - 1] += 1;
    dl_op_attention.forward(&r.call);
    for (int k = 0; k < C; k++)
        for (int u = 0; u < T - 1; u++)
            assert_true(dl_tensor_f32(&r.call.out)[k * T + u] == y0[k * T + u]);
    /* head 1's q, k, v change: head 0's output does not */
    memcpy((void *)dl_tensor_const_f32(&r.call.in[0]), x, sizeof x);
    for (int blk = 0; blk < 3; blk++)
        for (int j = 0; j < d; j++)
            for (int u = 0; u < T; u++)
                (dl_tensor_f32(&r.call.in[0]))[(blk * C + d + j) * T + u] *= 2;
    dl_op_attention.forward(&r.call);
    for (int j = 0; j < d; j++)
        for (int u = 0; u < T; u++)
            assert_true(dl_tensor_f32(&r.call.out)[j * T + u] == y0[j * T + u]);
    ot_free(&r);
    (void)H;
}

/* Dropout: the mask is drawn by place, so the second sample of a batch of
 * two gets what it gets as the only sample at sample0 = 1; inference
 * ignores it; a rate above 0 changes the training output. */
static void attention_dropout(void **state)
{
    int T = 6, C = 4;
    struct dl_shape s = SEQ(T, 3 * C);
    dl_real x[2 * 72];
    random_fill(x, 2 * 72, 5);
    const dl_real *xs[] = {x}, *second[] = {x + 72};
    struct ot_run both, one, plain;
    ot_setup(&both, &dl_op_attention, "{heads: 2, dropout: 0.5}", 2, 1, &s, xs, NULL, 1);
    ot_setup(&one, &dl_op_attention, "{heads: 2, dropout: 0.5}", 1, 1, &s, second, NULL, 1);
    ot_setup(&plain, &dl_op_attention, "{heads: 2}", 2, 1, &s, xs, NULL, 1);
    one.call.sample0 = 1;
    dl_op_attention.forward(&both.call);
    dl_op_attention.forward(&one.call);
    dl_op_attention.forward(&plain.call);
    assert_memory_equal(dl_tensor_f32(&both.call.out) + C * T, dl_tensor_f32(&one.call.out), sizeof(dl_real) * (size_t)(C * T));
    assert_true(memcmp(dl_tensor_f32(&both.call.out), dl_tensor_f32(&plain.call.out), sizeof(dl_real) * (size_t)(2 * C * T)) != 0);
    both.call.training = 0;
    dl_op_attention.forward(&both.call);
    assert_memory_equal(dl_tensor_f32(&both.call.out), dl_tensor_f32(&plain.call.out), sizeof(dl_real) * (size_t)(2 * C * T));
    ot_free(&both);
    ot_free(&one);
    ot_free(&plain);
}

/* Attention's attributes from a string (free() them). */
static void *attention_attrs_of(const char *text)
{
    struct dl_error err = {0};
    void *a = calloc(1, dl_op_attention.attr_size);
    if (dl_attrs_from_string(&dl_op_attention, text, a, &err))
        fail_msg("%s: %s", text, err.msg);
    return a;
}

static void attention_shapes(void **state)
{
    struct dl_shape packed = SEQ(4, 12), odd = SEQ(4, 10), two[2] = {SEQ(4, 4), SEQ(4, 4)},
                    mixed[3] = {SEQ(4, 4), SEQ(4, 4), SEQ(3, 4)}, image = {12, 2, 2}, six = SEQ(4, 18);
    struct dl_error err = {0};
    struct dl_shape out;
    void *a = attention_attrs_of("{heads: 2}");
    assert_int_equal(dl_op_attention.infer(a, 1, &packed, &out, &err), DL_OK);
    assert_true(dl_shape_eq(out, SEQ(4, 4)));
    free(a);
    a = attention_attrs_of("{heads: 3}");
    assert_int_equal(dl_op_attention.infer(a, 1, &six, &out, &err), DL_OK);
    free(a);
    a = attention_attrs_of("{heads: 4}");
    assert_int_equal(dl_op_attention.infer(a, 1, &six, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"heads 4 do not divide the width 6", NULL});
    assert_int_equal(dl_op_attention.infer(a, 1, &odd, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"[T, 3C]", "4x10", "not a multiple of 3", NULL});
    assert_int_equal(dl_op_attention.infer(a, 2, two, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"expected 1 input", "or 3", "found 2", NULL});
    free(a);
    a = attention_attrs_of("{heads: 1}");
    assert_int_equal(dl_op_attention.infer(a, 3, mixed, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"expected 4x4", "input 3 (v)", "found 3x4", NULL});
    assert_int_equal(dl_op_attention.infer(a, 1, &image, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"expected sequences [T, C]", "12x2x2", NULL});
    free(a);
    /* grouped-query: q [4, 12] of 4 heads of 3; k and v [4, 6] of 2 */
    a = attention_attrs_of("{heads: 4, kv_heads: 2}");
    struct dl_shape grouped[3] = {SEQ(4, 12), SEQ(4, 6), SEQ(4, 6)}, packed_grouped = SEQ(4, 24);
    assert_int_equal(dl_op_attention.infer(a, 3, grouped, &out, &err), DL_OK);
    assert_true(dl_shape_eq(out, SEQ(4, 12)));
    assert_int_equal(dl_op_attention.infer(a, 1, &packed_grouped, &out, &err), DL_OK);
    assert_true(dl_shape_eq(out, SEQ(4, 12)));
    assert_int_equal(dl_op_attention.infer(a, 1, &six, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"[T, (heads + 2 kv_heads) d] = [T, 8 d]", "4x18",
                                              "not a multiple of 8", NULL});
    grouped[1] = SEQ(4, 12);
    assert_int_equal(dl_op_attention.infer(a, 3, grouped, &out, &err), DL_ERR_SPEC);
    ot_expect_words(err.msg, (const char *[]){"expected 4x6", "kv_heads 2", "head features 3", "input 2 (k)",
                                              "found 4x12", NULL});
    free(a);
    ot_expect_attr_error(&dl_op_attention, "{heads: 4, kv_heads: 3}",
                         (const char *[]){"kv_heads", "divisor of heads 4", "found 3", NULL});
    ot_expect_attr_error(&dl_op_attention, "{heads: 2, dropout: 1}", (const char *[]){"dropout", "[0, 1)", NULL});
    ot_expect_attr_error(&dl_op_attention, "{}", (const char *[]){"heads", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gelu_grad),        cmocka_unit_test(swiglu_grad),  cmocka_unit_test(moe_grad),  cmocka_unit_test(layernorm_grad),
        cmocka_unit_test(rmsnorm_grad),     cmocka_unit_test(rope_grad),
        cmocka_unit_test(position_embedding_grad), cmocka_unit_test(attention_grad),
        cmocka_unit_test(gelu_values),      cmocka_unit_test(swiglu_values),  cmocka_unit_test(moe_values), cmocka_unit_test(layernorm_values),
        cmocka_unit_test(rmsnorm_values),   cmocka_unit_test(rope_values),
        cmocka_unit_test(position_embedding_values), cmocka_unit_test(attention_values),
        cmocka_unit_test(attention_dropout), cmocka_unit_test(attention_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
