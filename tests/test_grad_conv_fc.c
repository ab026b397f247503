/* test_grad_conv_fc.c: the conv and fc op kinds (double precision build):
 * finite-difference gradient checks over every attribute that changes the
 * math, forward values against small hand-computed examples, shape and
 * attribute errors, and bit-identical results for any number of threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/rng.h"
#include "gradcheck.h"
#include "optest.h"
#include "ops/kinds.h"
#include "spec/attrs.h"

/* ---------------------------------------------------------------- gradient checks */
struct grad_case {
    const char *name;
    const struct dl_op_kind *op;
    const char *attrs;
    int batch;
    struct dl_shape in;
};

static struct grad_case grad_cases[] = {
    {"conv_grad_plain", &dl_op_conv, "{filters: 3, kernel: 3}", 2, {2, 5, 6}},
    {"conv_grad_stride2_pad1", &dl_op_conv, "{filters: 4, kernel: 3, stride: 2, pad: 1}", 3, {3, 7, 5}},
    {"conv_grad_dilation2", &dl_op_conv, "{filters: 3, kernel: 3, dilation: 2, pad: 1}", 2, {2, 7, 5}},
    /* 3x3 "same": the centre tap reads the input plane directly. */
    {"conv_grad_groups2_same", &dl_op_conv, "{filters: 4, kernel: 3, groups: 2, pad: 1}", 2, {4, 5, 6}},
    {"conv_grad_depthwise", &dl_op_conv, "{filters: 3, kernel: 3, groups: 3, stride: 2, pad: 1}", 2,
     {3, 7, 5}},
    /* Two filters per channel and a 3x1 kernel. */
    {"conv_grad_depthwise_multiplier", &dl_op_conv, "{filters: 6, kernel: [3, 1], groups: 3, pad: [1, 0]}",
     2, {3, 5, 4}},
    {"conv_grad_no_bias", &dl_op_conv, "{filters: 2, kernel: 2, bias: false}", 3, {3, 4, 5}},
    {"conv_grad_rect_kernel", &dl_op_conv, "{filters: 3, kernel: [3, 2], stride: [2, 1]}", 2, {2, 7, 5}},
    /* 1x1, stride 1, no padding: every tap is the identity. */
    {"conv_grad_1x1", &dl_op_conv, "{filters: 5, kernel: 1}", 2, {3, 4, 3}},
    /* 1x1 with stride and padding: border outputs see only padding. */
    {"conv_grad_1x1_stride_pad", &dl_op_conv, "{filters: 2, kernel: 1, stride: 2, pad: 1}", 2, {3, 5, 4}},
    /* Stride larger than the kernel: some inputs are never read. */
    {"conv_grad_stride_over_kernel", &dl_op_conv, "{filters: 2, kernel: 2, stride: 3}", 2, {2, 8, 7}},
    /* Every attribute at a non-default, non-square value at once. */
    {"conv_grad_mixed", &dl_op_conv,
     "{filters: 4, kernel: [2, 3], stride: [1, 2], pad: [2, 1], dilation: [3, 1], groups: 2, bias: false}",
     2, {2, 7, 5}},
    /* 8 channels x 3x3 = 72 taps: more than the 64 weight-gradient chunks, so
     * chunks hold one or two taps; 9 filters: two blocks of four and one more. */
    {"conv_grad_many_taps", &dl_op_conv, "{filters: 9, kernel: 3, pad: 1}", 2, {8, 4, 3}},
    {"fc_grad_3d_input", &dl_op_fc, "{units: 4}", 3, {3, 2, 5}},
    {"fc_grad_no_bias", &dl_op_fc, "{units: 3, bias: false}", 2, {7, 1, 1}},
    {"fc_grad_one_unit", &dl_op_fc, "{units: 1}", 1, {2, 1, 3}},
    /* at every position of a sequence [T, C] (stored [C][T]) */
    {"fc_grad_sequence", &dl_op_fc, "{units: 3}", 2, {4, 5, 1, 2}},
    {"fc_grad_sequence_no_bias", &dl_op_fc, "{units: 2, bias: false}", 3, {3, 4, 1, 2}},
    /* token ids [T] (i32): 7 positions over a vocabulary of 5, so rows repeat and their gradients add up */
    {"embedding_grad_repeated_ids", &dl_op_embedding, "{vocab: 5, dim: 4}", 3, {1, 7, 1, 2, DL_I32}},
    {"embedding_grad_one_position", &dl_op_embedding, "{vocab: 9, dim: 3}", 2, {1, 1, 1, 2, DL_I32}},
};

#define N_GRAD_CASES (sizeof grad_cases / sizeof grad_cases[0])

static void grad(void **state)
{
    const struct grad_case *g = *state;
    struct gc_case c = {.op = g->op, .attrs = g->attrs, .batch = g->batch, .n_in = 1, .in = {g->in},
                        .training = 1};
    gc_assert(&c);
}

/* ---------------------------------------------------------------- one call */
/* An op call with every buffer allocated (zeroed): parameters, their
 * gradients, din and dout. */
struct run {
    struct dl_op_call call;
    void *attr;
    struct dl_param_desc p[TEST_MAX_PARAMS];
    int n_params;
    dl_real *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS]; /* the call's arrays */
    dl_real *x;
    long in_count, out_count;
};

static void run_setup(struct run *r, const struct dl_op_kind *op, const char *attrs, int batch,
                      struct dl_shape in)
{
    struct dl_error err = {0};
    memset(r, 0, sizeof *r);
    struct dl_op_call *c = &r->call;
    c->param = r->param;
    c->dparam = r->dparam;
    r->attr = calloc(1, op->attr_size);
    if (dl_attrs_from_string(op, attrs, r->attr, &err))
        fail_msg("attributes %s: %s", attrs, err.msg);
    c->attr = r->attr;
    c->batch = batch;
    c->n_in = 1;
    c->training = 1;
    struct dl_shape out;
    if (op->infer(r->attr, 1, &in, &out, &err))
        fail_msg("infer: %s", err.msg);
    r->in_count = batch * dl_shape_count(in);
    r->out_count = batch * dl_shape_count(out);
    r->x = calloc((size_t)r->in_count, sizeof(dl_real));
    c->in[0] = dl_tensor_of(r->x, in);
    c->din[0] = dl_tensor_of(calloc((size_t)r->in_count, sizeof(dl_real)), in);
    c->out = dl_tensor_of(calloc((size_t)r->out_count, sizeof(dl_real)), out);
    c->dout = dl_tensor_of(calloc((size_t)r->out_count, sizeof(dl_real)), out);
    long saved = op->saved_size ? op->saved_size(r->attr, batch, &in, out) : 0;
    c->saved = calloc((size_t)saved + 1, sizeof(dl_real));
    r->n_params = op->params(r->attr, &in, out, NULL);
    assert_true(r->n_params <= TEST_MAX_PARAMS);
    op->params(r->attr, &in, out, r->p);
    for (int j = 0; j < r->n_params; j++) {
        c->param[j] = calloc((size_t)r->p[j].count, sizeof(dl_real));
        c->dparam[j] = calloc((size_t)r->p[j].count, sizeof(dl_real));
    }
}

static void run_free(struct run *r)
{
    free(r->x);
    free(r->call.din[0].data);
    free(r->call.out.data);
    free(r->call.dout.data);
    free(r->call.saved);
    for (int j = 0; j < r->n_params; j++) {
        free(r->call.param[j]);
        free(r->call.dparam[j]);
    }
    free(r->attr);
}

static void set_values(dl_real *dst, const double *v, long n)
{
    for (long i = 0; i < n; i++)
        dst[i] = (dl_real)v[i];
}

static void expect_values(const dl_real *got, const double *want, long n)
{
    for (long i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("output[%ld] = %g, expected %g", i, (double)got[i], want[i]);
}

/* Forward of op on the given input and parameters (w, then b or NULL), and
 * compare with want (exact: the examples use small integers). */
static void expect_forward(const struct dl_op_kind *op, const char *attrs, int batch, struct dl_shape in,
                           const double *x, const double *w, const double *b, struct dl_shape out,
                           const double *want)
{
    struct run r;
    run_setup(&r, op, attrs, batch, in);
    assert_int_equal(r.call.out.shape.c, out.c);
    assert_int_equal(r.call.out.shape.h, out.h);
    assert_int_equal(r.call.out.shape.w, out.w);
    set_values(r.x, x, r.in_count);
    set_values(r.call.param[0], w, r.p[0].count);
    if (b)
        set_values(r.call.param[1], b, r.p[1].count);
    op->forward(&r.call);
    expect_values(dl_tensor_f32(&r.call.out), want, r.out_count);
    run_free(&r);
}

/* ---------------------------------------------------------------- forward values */
/* x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,2],[3,4]], b = 0.5; the second sample
 * is -x.  y[p,q] = x[p,q] + 2x[p,q+1] + 3x[p+1,q] + 4x[p+1,q+1] + b. */
static void conv_forward_2x2(void **state)
{
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9};
    const double w[] = {1, 2, 3, 4}, b[] = {0.5};
    const double want[] = {37.5, 47.5, 67.5, 77.5, -36.5, -46.5, -66.5, -76.5};
    expect_forward(&dl_op_conv, "{filters: 1, kernel: 2}", 2, (struct dl_shape){1, 3, 3}, x, w, b,
                   (struct dl_shape){1, 2, 2}, want);
}

/* A 3x3 box with pad 1 and stride 2 on the 3x3 above: each output is the sum
 * of the 2x2 corner block it overlaps. */
static void conv_forward_pad_stride(void **state)
{
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const double w[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const double want[] = {12, 16, 24, 28};
    expect_forward(&dl_op_conv, "{filters: 1, kernel: 3, pad: 1, stride: 2, bias: false}", 1,
                   (struct dl_shape){1, 3, 3}, x, w, NULL, (struct dl_shape){1, 2, 2}, want);
}

/* x[i,j] = 5i + j on 5x5, a 2x2 kernel of ones with dilation 2 sums
 * x[p,q] + x[p,q+2] + x[p+2,q] + x[p+2,q+2] = 4 x[p+1,q+1]. */
static void conv_forward_dilation(void **state)
{
    double x[25], want[9];
    for (int i = 0; i < 25; i++)
        x[i] = i;
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            want[p * 3 + q] = 4 * (5 * (p + 1) + q + 1);
    const double w[] = {1, 1, 1, 1};
    expect_forward(&dl_op_conv, "{filters: 1, kernel: 2, dilation: 2, bias: false}", 1,
                   (struct dl_shape){1, 5, 5}, x, w, NULL, (struct dl_shape){1, 3, 3}, want);
}

/* 1x1 kernels on x = (3, 5): with groups 2 each filter sees only its own
 * channel; with one group each sees both. */
static void conv_forward_groups(void **state)
{
    const double x[] = {3, 5};
    const double wg[] = {2, 10}, bg[] = {1, -1}, want_g[] = {7, 49};
    expect_forward(&dl_op_conv, "{filters: 2, kernel: 1, groups: 2}", 1, (struct dl_shape){2, 1, 1}, x,
                   wg, bg, (struct dl_shape){2, 1, 1}, want_g);
    const double w1[] = {2, 1, 10, -1}, want_1[] = {11, 25};
    expect_forward(&dl_op_conv, "{filters: 2, kernel: 1, bias: false}", 1, (struct dl_shape){2, 1, 1}, x,
                   w1, NULL, (struct dl_shape){2, 1, 1}, want_1);
}

/* Kernel [1, 2] with stride [1, 2] on a 2x4 row pair: w = (1, 10) pairs up
 * neighbours, y[p,q] = x[p,2q] + 10 x[p,2q+1]. */
static void conv_forward_rect(void **state)
{
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double w[] = {1, 10}, want[] = {21, 43, 65, 87};
    expect_forward(&dl_op_conv, "{filters: 1, kernel: [1, 2], stride: [1, 2], bias: false}", 1,
                   (struct dl_shape){1, 2, 4}, x, w, NULL, (struct dl_shape){1, 2, 2}, want);
}

/* A (2,1,2) input flattens in (c,h,w) order to (1,2,3,4); weights that are
 * powers of ten spell the order out in the digits. */
static void fc_forward_flatten_order(void **state)
{
    const double x[] = {1, 2, 3, 4, 4, 3, 2, 1};
    const double w[] = {1, 10, 100, 1000, 1, 1, 1, 1}, b[] = {0.5, -1};
    const double want[] = {4321.5, 9, 1234.5, 9};
    expect_forward(&dl_op_fc, "{units: 2}", 2, (struct dl_shape){2, 1, 2}, x, w, b,
                   (struct dl_shape){2, 1, 1}, want);
}

/* Random data through forward against the formula in conv.c's header,
 * evaluated literally, for attribute sets with every feature. */
struct conv_case {
    int K, R, S, sh, sw, ph, pw, dh, dw, G, bias, N;
    struct dl_shape in;
};

static void conv_forward_vs_formula_one(const struct conv_case *t)
{
    char attrs[256];
    snprintf(attrs, sizeof attrs,
             "{filters: %d, kernel: [%d, %d], stride: [%d, %d], pad: [%d, %d], dilation: [%d, %d], "
             "groups: %d, bias: %s}",
             t->K, t->R, t->S, t->sh, t->sw, t->ph, t->pw, t->dh, t->dw, t->G, t->bias ? "true" : "false");
    struct run r;
    run_setup(&r, &dl_op_conv, attrs, t->N, t->in);
    struct dl_rng rng;
    dl_rng_seed(&rng, 3);
    for (long i = 0; i < r.in_count; i++)
        r.x[i] = (dl_real)dl_rng_normal(&rng);
    for (int j = 0; j < r.n_params; j++)
        for (long i = 0; i < r.p[j].count; i++)
            r.call.param[j][i] = (dl_real)dl_rng_normal(&rng);
    dl_op_conv.forward(&r.call);
    int C = t->in.c, H = t->in.h, W = t->in.w, Cg = C / t->G, Kg = t->K / t->G;
    int P = r.call.out.shape.h, Q = r.call.out.shape.w;
    const dl_real *w = r.call.param[0];
    for (int n = 0; n < t->N; n++)
        for (int k = 0; k < t->K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double sum = t->bias ? r.call.param[1][k] : 0;
                    for (int c = 0; c < Cg; c++)
                        for (int i = 0; i < t->R; i++)
                            for (int j = 0; j < t->S; j++) {
                                int ih = p * t->sh - t->ph + i * t->dh, iw = q * t->sw - t->pw + j * t->dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                sum += w[((k * Cg + c) * t->R + i) * t->S + j] *
                                       r.x[(((long)n * C + k / Kg * Cg + c) * H + ih) * W + iw];
                            }
                    double got = dl_tensor_f32(&r.call.out)[(((long)n * t->K + k) * P + p) * Q + q];
                    if (fabs(got - sum) > 1e-12 * (1 + fabs(sum)))
                        fail_msg("%s: y[%d,%d,%d,%d] = %.15g, formula %.15g", attrs, n, k, p, q, got, sum);
                }
    run_free(&r);
}

static void conv_forward_vs_formula(void **state)
{
    static const struct conv_case cases[] = {
        /* K  R  S  sh sw ph pw dh dw G  bias N  in */
        {3, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1, 2, {2, 5, 6}},
        {4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, {3, 7, 5}},
        {4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 2, {4, 5, 6}},
        {6, 3, 1, 1, 1, 1, 0, 1, 1, 3, 1, 2, {3, 5, 4}},
        {4, 2, 3, 1, 2, 2, 1, 3, 1, 2, 0, 2, {2, 7, 5}},
        {2, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 2, {3, 5, 4}},
        {5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, {3, 4, 3}},
        {2, 2, 2, 3, 3, 0, 0, 1, 1, 2, 1, 1, {2, 8, 7}},
        {3, 5, 3, 2, 1, 4, 0, 2, 2, 3, 1, 2, {6, 9, 7}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_forward_vs_formula_one(&cases[i]);
}

/* ---------------------------------------------------------------- parameters */
static void conv_params_layout(void **state)
{
    struct run r;
    run_setup(&r, &dl_op_conv, "{filters: 6, kernel: [3, 2], groups: 2}", 1, (struct dl_shape){4, 8, 8});
    assert_int_equal(r.n_params, 2);
    assert_string_equal(r.p[0].name, "weight");
    assert_int_equal(r.p[0].ndim, 4);
    assert_int_equal(r.p[0].dims[0], 6);
    assert_int_equal(r.p[0].dims[1], 2);
    assert_int_equal(r.p[0].dims[2], 3);
    assert_int_equal(r.p[0].dims[3], 2);
    assert_int_equal(r.p[0].count, 6 * 2 * 3 * 2);
    assert_int_equal(r.p[0].fan_in, 2 * 3 * 2);
    assert_int_equal(r.p[0].init, DL_INIT_UNIFORM_FAN_IN);
    assert_string_equal(r.p[1].name, "bias");
    assert_int_equal(r.p[1].count, 6);
    assert_int_equal(r.p[1].fan_in, 2 * 3 * 2);
    /* 6 x 6 x 7 outputs, 12 multiply-adds each, plus the bias. */
    assert_true(dl_op_conv.flops(r.attr, &r.call.in[0].shape, r.call.out.shape) ==
                2.0 * 6 * 6 * 7 * 12 + 6 * 6 * 7);
    run_free(&r);
}

static void fc_params_layout(void **state)
{
    struct run r;
    run_setup(&r, &dl_op_fc, "{units: 5, bias: false}", 1, (struct dl_shape){3, 2, 2});
    assert_int_equal(r.call.out.shape.c, 5);
    assert_int_equal(r.call.out.shape.h, 1);
    assert_int_equal(r.call.out.shape.w, 1);
    assert_int_equal(r.n_params, 1);
    assert_int_equal(r.p[0].ndim, 2);
    assert_int_equal(r.p[0].dims[0], 5);
    assert_int_equal(r.p[0].dims[1], 12);
    assert_int_equal(r.p[0].fan_in, 12);
    assert_true(dl_op_fc.flops(r.attr, &r.call.in[0].shape, r.call.out.shape) == 2.0 * 5 * 12);
    run_free(&r);
}

/* ---------------------------------------------------------------- errors */
static void expect_words(const char *msg, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (!strstr(msg, words[i]))
            fail_msg("message \"%s\" lacks \"%s\"", msg, words[i]);
}

static void expect_attr_error(const struct dl_op_kind *op, const char *attrs, const char *const *words)
{
    struct dl_error err = {0};
    void *attr = calloc(1, op->attr_size);
    int rc = dl_attrs_from_string(op, attrs, attr, &err);
    free(attr);
    if (rc != DL_ERR_SPEC)
        fail_msg("%s %s: expected DL_ERR_SPEC, got %d", op->name, attrs, rc);
    expect_words(err.msg, words);
}

static void expect_infer_error(const struct dl_op_kind *op, const char *attrs, struct dl_shape in,
                               const char *const *words)
{
    struct dl_error err = {0};
    void *attr = calloc(1, op->attr_size);
    if (dl_attrs_from_string(op, attrs, attr, &err))
        fail_msg("attributes %s: %s", attrs, err.msg);
    struct dl_shape out;
    int rc = op->infer(attr, 1, &in, &out, &err);
    free(attr);
    if (rc != DL_ERR_SPEC)
        fail_msg("%s %s: expected infer to fail with DL_ERR_SPEC, got %d", op->name, attrs, rc);
    expect_words(err.msg, words);
}

static void conv_infer_errors(void **state)
{
    expect_infer_error(&dl_op_conv, "{filters: 2, kernel: 5}", (struct dl_shape){1, 4, 4},
                       (const char *const[]){"output would be 0x0", "input 1x4x4", "kernel [5, 5]", NULL});
    /* Only the height is too small. */
    expect_infer_error(&dl_op_conv, "{filters: 2, kernel: [5, 3], pad: [0, 1]}", (struct dl_shape){1, 4, 9},
                       (const char *const[]){"output would be 0x9", "padded by [0, 1] is 4x11", NULL});
    /* The dilated span (7) is what must fit. */
    expect_infer_error(&dl_op_conv, "{filters: 2, kernel: 3, dilation: 3}", (struct dl_shape){1, 6, 6},
                       (const char *const[]){"dilation [3, 3]", "spans 7x7", NULL});
    expect_infer_error(&dl_op_conv, "{filters: 4, kernel: 1, groups: 2}", (struct dl_shape){3, 4, 4},
                       (const char *const[]){"3 channels", "not divisible by groups 2", NULL});
    /* Padding makes a 4x4 input fit a 5x5 kernel. */
    struct run r;
    run_setup(&r, &dl_op_conv, "{filters: 2, kernel: 5, pad: 1}", 1, (struct dl_shape){1, 4, 4});
    assert_int_equal(r.call.out.shape.h, 2);
    assert_int_equal(r.call.out.shape.w, 2);
    run_free(&r);
}

static void conv_attr_errors(void **state)
{
    expect_attr_error(&dl_op_conv, "{filters: 3, kernel: 3, groups: 2}",
                      (const char *const[]){"filters", "multiple of groups 2", "found 3", NULL});
    expect_attr_error(&dl_op_conv, "{kernel: 3}", (const char *const[]){"filters", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 3}", (const char *const[]){"kernel", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 0, kernel: 3}", (const char *const[]){"filters", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: [3, 0]}", (const char *const[]){"kernel", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: 3, stride: 0}", (const char *const[]){"stride", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: 3, pad: -1}", (const char *const[]){"pad", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: 3, dilation: 0}",
                      (const char *const[]){"dilation", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: 3, groups: 0}", (const char *const[]){"groups", NULL});
    expect_attr_error(&dl_op_conv, "{filters: 1, kernel: 3, bias: 2}", (const char *const[]){"bias", NULL});
}

static void fc_attr_errors(void **state)
{
    expect_attr_error(&dl_op_fc, "{}", (const char *const[]){"units", NULL});
    expect_attr_error(&dl_op_fc, "{units: 0}", (const char *const[]){"units", NULL});
    expect_attr_error(&dl_op_fc, "{units: 3, kernel: 3}", (const char *const[]){"kernel", NULL});
}

/* ---------------------------------------------------------------- threads */
#ifdef _OPENMP
/* Forward and backward on random data with 1 and with 3 threads must give
 * the same bits; backward also runs once without din (a first layer). */
static void same_bits_any_threads(const struct dl_op_kind *op, const char *attrs, int batch,
                                  struct dl_shape in)
{
    struct run r[2];
    int saved_threads = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        struct dl_rng rng;
        dl_rng_seed(&rng, 7);
        run_setup(&r[t], op, attrs, batch, in);
        for (long i = 0; i < r[t].in_count; i++)
            r[t].x[i] = (dl_real)dl_rng_normal(&rng);
        dl_real *dy = dl_tensor_f32(&r[t].call.dout);
        for (long i = 0; i < r[t].out_count; i++)
            dy[i] = (dl_real)dl_rng_normal(&rng);
        for (int j = 0; j < r[t].n_params; j++)
            for (long i = 0; i < r[t].p[j].count; i++)
                r[t].call.param[j][i] = (dl_real)dl_rng_normal(&rng);
        omp_set_num_threads(t == 0 ? 1 : 3);
        op->forward(&r[t].call);
        op->backward(&r[t].call);
        void *din = r[t].call.din[0].data;
        r[t].call.din[0].data = NULL;
        op->backward(&r[t].call); /* accumulates the parameter gradients once more */
        r[t].call.din[0].data = din;
    }
    omp_set_num_threads(saved_threads);
    assert_memory_equal(dl_tensor_f32(&r[0].call.out), dl_tensor_f32(&r[1].call.out),
                        sizeof(dl_real) * (size_t)r[0].out_count);
    assert_memory_equal(dl_tensor_f32(&r[0].call.din[0]), dl_tensor_f32(&r[1].call.din[0]),
                        sizeof(dl_real) * (size_t)r[0].in_count);
    for (int j = 0; j < r[0].n_params; j++)
        assert_memory_equal(r[0].call.dparam[j], r[1].call.dparam[j],
                            sizeof(dl_real) * (size_t)r[0].p[j].count);
    run_free(&r[0]);
    run_free(&r[1]);
}

static void conv_threads(void **state)
{
    same_bits_any_threads(&dl_op_conv, "{filters: 6, kernel: 3, pad: 1, stride: [1, 2], groups: 2}", 5,
                          (struct dl_shape){4, 9, 8});
    same_bits_any_threads(&dl_op_conv, "{filters: 9, kernel: 3}", 3, (struct dl_shape){9, 6, 5});
}

/* embedding: y[n][c][t] = W[id(n, t)][c] ([T, C] stored [C][T] per sample),
 * and the op's shape rules. */
static void embedding_forward_and_shapes(void **state)
{
    (void)state;
    struct ot_run r;
    struct dl_shape in = dl_shape_seq(3, 1, DL_I32);
    ot_setup(&r, &dl_op_embedding, "{vocab: 4, dim: 2}", 2, 1, &in, NULL, NULL, 1);
    assert_true(dl_shape_eq(r.call.out.shape, dl_shape_seq(3, 2, DL_F32)));
    int32_t ids[6] = {3, 0, 3, 1, 2, 1};
    memcpy(dl_tensor_i32(&r.call.in[0]), ids, sizeof ids);
    dl_real w[8] = {0, 1, 10, 11, 20, 21, 30, 31};
    r.call.param[0] = w;
    dl_op_embedding.forward(&r.call);
    for (int n = 0; n < 2; n++)
        for (int t = 0; t < 3; t++)
            for (int c = 0; c < 2; c++)
                assert_true(dl_tensor_f32(&r.call.out)[n * 6 + c * 3 + t] == w[ids[n * 3 + t] * 2 + c]);
    ot_free(&r);
    struct dl_shape floats = dl_shape_seq(3, 1, DL_F32), image = {1, 3, 3};
    ot_expect_infer_error(&dl_op_embedding, 1, &floats, (const char *[]){"expected token ids [T] (i32)", "found 3", NULL});
    ot_expect_infer_error(&dl_op_embedding, 1, &image, (const char *[]){"expected token ids", "found 1x3x3", NULL});
    struct dl_param_desc p[TEST_MAX_PARAMS];
    struct embedding_probe { int vocab, dim; } a = {50257, 768};
    assert_int_equal(dl_op_embedding.params(&a, &in, dl_shape_seq(3, 768, DL_F32), NULL), 1);
    assert_int_equal(dl_op_embedding.params(&a, &in, dl_shape_seq(3, 768, DL_F32), p), 1);
    assert_string_equal(p[0].name, "weight"); /* nn.Embedding's state_dict name and [num_embeddings, dim] */
    assert_true(p[0].ndim == 2 && p[0].dims[0] == 50257 && p[0].dims[1] == 768 && p[0].init == DL_INIT_NORMAL);
    assert_int_equal(dl_op_embedding.id_limit(&a), 50257);
}

static void fc_threads(void **state)
{
    same_bits_any_threads(&dl_op_fc, "{units: 7}", 5, (struct dl_shape){3, 4, 5});
}
#endif

int main(void)
{
    static const struct CMUnitTest others[] = {
        cmocka_unit_test(conv_forward_2x2),
        cmocka_unit_test(conv_forward_pad_stride),
        cmocka_unit_test(conv_forward_dilation),
        cmocka_unit_test(conv_forward_groups),
        cmocka_unit_test(conv_forward_rect),
        cmocka_unit_test(fc_forward_flatten_order),
        cmocka_unit_test(conv_forward_vs_formula),
        cmocka_unit_test(conv_params_layout),
        cmocka_unit_test(fc_params_layout),
        cmocka_unit_test(conv_infer_errors),
        cmocka_unit_test(conv_attr_errors),
        cmocka_unit_test(fc_attr_errors),
        cmocka_unit_test(embedding_forward_and_shapes),
#ifdef _OPENMP
        cmocka_unit_test(conv_threads),
        cmocka_unit_test(fc_threads),
#endif
    };
    struct CMUnitTest tests[N_GRAD_CASES + sizeof others / sizeof others[0]];
    for (size_t i = 0; i < N_GRAD_CASES; i++)
        tests[i] = (struct CMUnitTest){.name = grad_cases[i].name, .test_func = grad,
                                       .initial_state = &grad_cases[i]};
    memcpy(tests + N_GRAD_CASES, others, sizeof others);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
