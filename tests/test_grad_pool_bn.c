/* test_grad_pool_bn.c: maxpool, avgpool (fixed and adaptive), global_avgpool
 * and batchnorm: finite-difference gradient checks (double build of the ops),
 * forward and backward values on small hand-computed examples, running
 * statistics, thread-count independence, and attribute/shape errors. */
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

#include "gradcheck.h"
#include "ops/kinds.h"
#include "spec/attrs.h"

/* ------------------------------------------------------------ helpers */

/* One op call on given input values; parameters start at their init values
 * (ONE / ZERO), gradients and dout at zero. */
struct run {
    struct dl_op_call call;
    dl_real *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS]; /* the call's arrays */
    void *attr;
    long n_in, n_out;
};

static void setup(struct run *r, const struct dl_op_kind *op, const char *attrs, int batch,
                  struct dl_shape in, const dl_real *x, int training)
{
    struct dl_error err = {0};
    struct dl_op_call *c = &r->call;
    memset(r, 0, sizeof *r);
    c->param = r->param;
    c->dparam = r->dparam;
    r->attr = calloc(1, op->attr_size ? op->attr_size : 1);
    if (dl_attrs_from_string(op, attrs, r->attr, &err))
        fail_msg("%s %s: %s", op->name, attrs, err.msg);
    c->attr = r->attr;
    c->batch = batch;
    c->n_in = 1;
    c->in[0].shape = in;
    c->training = training;
    if (op->infer(r->attr, 1, &in, &c->out.shape, &err))
        fail_msg("%s %s: %s", op->name, attrs, err.msg);
    r->n_in = batch * dl_shape_count(in);
    r->n_out = batch * dl_shape_count(c->out.shape);
    dl_real *xin = calloc((size_t)r->n_in, sizeof *xin);
    memcpy(xin, x, sizeof *xin * (size_t)r->n_in);
    c->in[0].data = xin;
    c->din[0] = dl_tensor_of(calloc((size_t)r->n_in, sizeof(dl_real)), in);
    c->out.data = calloc((size_t)r->n_out, sizeof(dl_real));
    c->dout = dl_tensor_of(calloc((size_t)r->n_out, sizeof(dl_real)), c->out.shape);
    long ns = op->saved_size ? op->saved_size(r->attr, batch, &in, c->out.shape) : 0;
    c->saved = calloc((size_t)(ns > 0 ? ns : 1), sizeof(dl_real));
    struct dl_param_desc p[TEST_MAX_PARAMS];
    int np = op->params ? op->params(r->attr, &in, c->out.shape, NULL) : 0;
    assert_true(np <= TEST_MAX_PARAMS);
    if (np)
        op->params(r->attr, &in, c->out.shape, p);
    for (int j = 0; j < np; j++) {
        c->param[j] = calloc((size_t)p[j].count, sizeof(dl_real));
        c->dparam[j] = calloc((size_t)p[j].count, sizeof(dl_real));
        for (long i = 0; i < p[j].count; i++)
            c->param[j][i] = p[j].init == DL_INIT_ONE ? 1 : 0;
    }
}

static void teardown(struct run *r)
{
    free(r->call.in[0].data);
    free(r->call.din[0].data);
    free(r->call.out.data);
    free(r->call.dout.data);
    free(r->call.saved);
    for (int j = 0; j < TEST_MAX_PARAMS; j++) {
        free(r->call.param[j]);
        free(r->call.dparam[j]);
    }
    free(r->attr);
}

static void expect_values(const char *what, const dl_real *got, const double *want, long n, double tol)
{
    for (long i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol))
            fail_msg("%s[%ld] = %.10g, expected %.10g", what, i, (double)got[i], want[i]);
}

static void expect_shape(const struct run *r, int c, int h, int w)
{
    struct dl_shape s = r->call.out.shape;
    if (s.c != c || s.h != h || s.w != w)
        fail_msg("output shape %dx%dx%d, expected %dx%dx%d", s.c, s.h, s.w, c, h, w);
}

/* The attributes (range table or check()) or, failing that, infer() on `in`
 * must reject the layer with a message containing every word. */
static void expect_error(const struct dl_op_kind *op, const char *attrs, struct dl_shape in,
                         const char *const *words)
{
    struct dl_error err = {0};
    void *attr = calloc(1, op->attr_size ? op->attr_size : 1);
    int rc = dl_attrs_from_string(op, attrs, attr, &err);
    struct dl_shape out;
    if (rc == DL_OK)
        rc = op->infer(attr, 1, &in, &out, &err);
    free(attr);
    if (rc != DL_ERR_SPEC)
        fail_msg("%s %s on %dx%dx%d: expected DL_ERR_SPEC, got %d", op->name, attrs, in.c, in.h, in.w, rc);
    for (int i = 0; words[i]; i++)
        if (!strstr(err.msg, words[i]))
            fail_msg("message \"%s\" lacks \"%s\"", err.msg, words[i]);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ------------------------------------------------------------ gradient checks */

/* Each row is one cmocka test, named after the op and its attributes. */
static const struct gc_case grad_cases[] = {
#define G(op_, attrs_, batch_, c_, h_, w_, training_) \
    {.op = &op_, .attrs = attrs_, .batch = batch_, .n_in = 1, .in = {{c_, h_, w_}}, .training = training_}
    G(dl_op_maxpool, "{kernel: 2}", 2, 3, 4, 6, 1),
    G(dl_op_maxpool, "{kernel: 3, stride: 2}", 2, 2, 7, 9, 1), /* overlapping windows */
    G(dl_op_maxpool, "{kernel: 3, stride: 2, pad: 1}", 3, 2, 5, 7, 1),
    G(dl_op_maxpool, "{kernel: 3, stride: 2, ceil_mode: true}", 2, 2, 6, 8, 1),
    G(dl_op_maxpool, "{kernel: 2, stride: 2, pad: 1, ceil_mode: true}", 2, 1, 5, 5, 1),
    G(dl_op_maxpool, "{kernel: [2, 3], stride: [1, 2], pad: [1, 1]}", 2, 2, 5, 7, 1),
    G(dl_op_avgpool, "{kernel: 2}", 2, 3, 4, 6, 1),
    G(dl_op_avgpool, "{kernel: 3, stride: 2}", 2, 2, 7, 9, 1),
    G(dl_op_avgpool, "{kernel: [3, 2], stride: [2, 1]}", 2, 2, 5, 6, 1),
    G(dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1}", 2, 2, 5, 7, 1),
    G(dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1, count_include_pad: false}", 2, 2, 5, 7, 1),
    G(dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1, ceil_mode: true}", 2, 2, 4, 6, 1),
    G(dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1, ceil_mode: true, count_include_pad: false}", 2, 2,
      4, 6, 1),
    G(dl_op_avgpool, "{kernel: [2, 3], stride: [2, 2], pad: [1, 0], ceil_mode: true}", 3, 1, 5, 6, 1),
    G(dl_op_avgpool, "{output: [3, 2]}", 2, 3, 5, 7, 1),
    G(dl_op_avgpool, "{output: 6}", 1, 2, 13, 13, 1),      /* AlexNet */
    G(dl_op_avgpool, "{output: [4, 5]}", 2, 1, 3, 3, 1),   /* more outputs than inputs */
    G(dl_op_global_avgpool, "{}", 3, 4, 5, 7, 1),
    G(dl_op_global_avgpool, "{}", 2, 6, 1, 1, 1),
    G(dl_op_batchnorm, "{}", 4, 3, 5, 7, 1),               /* training */
    G(dl_op_batchnorm, "{eps: 0.001, momentum: 0.5}", 4, 2, 3, 1, 1),
    G(dl_op_batchnorm, "{}", 4, 5, 1, 1, 1),               /* BatchNorm1d, training */
    G(dl_op_batchnorm, "{}", 4, 3, 5, 7, 0),               /* inference */
    G(dl_op_batchnorm, "{eps: 0.01}", 4, 5, 1, 1, 0),      /* BatchNorm1d, inference */
#undef G
};
#define N_GRAD_CASES (sizeof grad_cases / sizeof grad_cases[0])

static void grad_test(void **state)
{
    gc_assert(*state);
}

/* ------------------------------------------------------------ values: maxpool */

static void maxpool_values(void **state)
{
    (void)state;
    const dl_real x[16] = {1, 9, 2, 0,
                           3, 4, 8, 5,
                           7, 6, -1, -2,
                           0, 11, -3, 10};
    struct run r;
    setup(&r, &dl_op_maxpool, "{kernel: 2}", 1, (struct dl_shape){1, 4, 4}, x, 1);
    expect_shape(&r, 1, 2, 2);
    dl_op_maxpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){9, 8, 11, 10}, 4, 0);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    for (int i = 0; i < 4; i++)
        dy[i] = (dl_real)(i + 1);
    dl_op_maxpool.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]),
                  (const double[]){0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4}, 16, 0);
    teardown(&r);
}

/* Padding is -inf, not 0: an all-negative input keeps its own maxima. */
static void maxpool_values_pad(void **state)
{
    (void)state;
    const dl_real x[4] = {-1, -2, -3, -4};
    struct run r;
    setup(&r, &dl_op_maxpool, "{kernel: 2, stride: 1, pad: 1}", 1, (struct dl_shape){1, 2, 2}, x, 1);
    expect_shape(&r, 1, 3, 3);
    dl_op_maxpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){-1, -1, -2, -1, -1, -2, -3, -3, -4}, 9, 0);
    teardown(&r);

    /* A NaN in a window wins (PyTorch propagates it), wherever it sits. */
    setup(&r, &dl_op_maxpool, "{kernel: [1, 2]}", 1, (struct dl_shape){1, 1, 6},
          (const dl_real[]){1, NAN, NAN, 3, 2, 0}, 1);
    dl_op_maxpool.forward(&r.call);
    assert_true(isnan(dl_tensor_f32(&r.call.out)[0]) && isnan(dl_tensor_f32(&r.call.out)[1]));
    expect_values("out", dl_tensor_f32(&r.call.out) + 2, (const double[]){2}, 1, 0);
    teardown(&r);
}

/* An element that wins two overlapping windows receives both gradients;
 * ceil_mode keeps a partial last window. */
static void maxpool_values_overlap_ceil(void **state)
{
    (void)state;
    struct run r;
    setup(&r, &dl_op_maxpool, "{kernel: [1, 2], stride: 1}", 1, (struct dl_shape){1, 1, 4},
          (const dl_real[]){0, 5, 1, 2}, 1);
    dl_op_maxpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){5, 5, 2}, 3, 0);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    dy[0] = dy[1] = dy[2] = 1;
    dl_op_maxpool.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]), (const double[]){0, 2, 0, 1}, 4, 0);
    teardown(&r);

    setup(&r, &dl_op_maxpool, "{kernel: [1, 2], ceil_mode: true}", 1, (struct dl_shape){1, 1, 3},
          (const dl_real[]){1, 2, 3}, 1);
    expect_shape(&r, 1, 1, 2);
    dl_op_maxpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){2, 3}, 2, 0);
    teardown(&r);
}

/* PyTorch's output sizes, including the ceil_mode rule that the last window
 * must start inside the input or the left padding. */
static void pool_output_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *attrs;
        int h, w, oh, ow;
    } cases[] = {
        {"{kernel: 3, stride: 2}", 6, 7, 2, 3},
        {"{kernel: 3, stride: 2, ceil_mode: true}", 6, 7, 3, 3},
        {"{kernel: 2, stride: 2, pad: 1}", 5, 5, 3, 3},
        {"{kernel: 2, stride: 2, pad: 1, ceil_mode: true}", 5, 5, 3, 3}, /* 4 -> 3 by the rule */
        {"{kernel: 3, stride: 2, pad: 1, ceil_mode: true}", 4, 4, 3, 3},
        {"{kernel: 3, stride: 2, pad: 1}", 4, 4, 2, 2},
        {"{kernel: [3, 1], stride: [1, 2], pad: [1, 0]}", 5, 6, 5, 3},
        {"{kernel: [2, 3], stride: 0}", 4, 9, 2, 3},          /* 0 = the kernel */
        {"{kernel: 3, stride: [0, 1]}", 6, 5, 2, 3},
        {"{kernel: 3, stride: 2, pad: 1}", 224, 224, 112, 112}, /* ResNet stem */
        {"{kernel: 3, stride: 2}", 55, 55, 27, 27},             /* AlexNet */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 2; k++) {
            const struct dl_op_kind *op = k ? &dl_op_avgpool : &dl_op_maxpool;
            dl_real *x = calloc((size_t)(cases[i].h * cases[i].w), sizeof *x);
            struct run r;
            setup(&r, op, cases[i].attrs, 1, (struct dl_shape){1, cases[i].h, cases[i].w}, x, 1);
            if (r.call.out.shape.h != cases[i].oh || r.call.out.shape.w != cases[i].ow)
                fail_msg("%s %s on %dx%d: output %dx%d, expected %dx%d", op->name, cases[i].attrs,
                         cases[i].h, cases[i].w, r.call.out.shape.h, r.call.out.shape.w, cases[i].oh,
                         cases[i].ow);
            teardown(&r);
            free(x);
        }
}

/* ------------------------------------------------------------ values: avgpool */

/* Ones, kernel 3, stride 2, pad 1, ceil_mode on 4x4: the last window covers
 * input 3 and padding 4 only (padded length 2, not 3). */
static void avgpool_values_count_include_pad(void **state)
{
    (void)state;
    dl_real x[16];
    for (int i = 0; i < 16; i++)
        x[i] = 1;
    struct run r;
    setup(&r, &dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1, ceil_mode: true}", 1,
          (struct dl_shape){1, 4, 4}, x, 1);
    expect_shape(&r, 1, 3, 3);
    dl_op_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out),
                  (const double[]){4.0 / 9, 6.0 / 9, 2.0 / 6, 6.0 / 9, 1, 3.0 / 6, 2.0 / 6, 3.0 / 6,
                                   1.0 / 4},
                  9, 1e-12);
    teardown(&r);

    setup(&r, &dl_op_avgpool, "{kernel: 3, stride: 2, pad: 1, ceil_mode: true, count_include_pad: false}",
          1, (struct dl_shape){1, 4, 4}, x, 1);
    dl_op_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, 9, 1e-12);
    teardown(&r);
}

static void avgpool_values(void **state)
{
    (void)state;
    /* batch 2 of 1x2x4: windows [2, 2] */
    const dl_real x[16] = {1, 2, 3, 4, 5, 6, 7, 8, /* sample 0 */
                           0, 0, 4, 4, 0, 8, 4, 4};
    struct run r;
    setup(&r, &dl_op_avgpool, "{kernel: 2}", 2, (struct dl_shape){1, 2, 4}, x, 1);
    dl_op_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){3.5, 5.5, 2, 4}, 4, 1e-12);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    dy[0] = 4;
    dy[3] = 8;
    dl_op_avgpool.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]),
                  (const double[]){1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0, 2, 2}, 16, 1e-12);
    teardown(&r);
}

/* Adaptive 5 -> 3: windows [0,2), [1,4), [3,5) (overlapping). */
static void avgpool_values_adaptive(void **state)
{
    (void)state;
    struct run r;
    setup(&r, &dl_op_avgpool, "{output: [1, 3]}", 1, (struct dl_shape){1, 1, 5},
          (const dl_real[]){0, 1, 2, 3, 4}, 1);
    expect_shape(&r, 1, 1, 3);
    dl_op_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){0.5, 2, 3.5}, 3, 1e-12);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    dy[0] = dy[1] = dy[2] = 1;
    dl_op_avgpool.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]),
                  (const double[]){0.5, 0.5 + 1.0 / 3, 1.0 / 3, 1.0 / 3 + 0.5, 0.5}, 5, 1e-12);
    teardown(&r);

    /* 5x7 -> 3x2 with x = 7h + w: rows [0,2) [1,4) [3,5), columns [0,4) [3,7). */
    dl_real x[35];
    for (int i = 0; i < 35; i++)
        x[i] = (dl_real)i;
    setup(&r, &dl_op_avgpool, "{output: [3, 2]}", 1, (struct dl_shape){1, 5, 7}, x, 1);
    expect_shape(&r, 1, 3, 2);
    dl_op_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){5, 8, 15.5, 18.5, 26, 29}, 6, 1e-12);
    teardown(&r);
}

static void global_avgpool_values(void **state)
{
    (void)state;
    struct run r;
    setup(&r, &dl_op_global_avgpool, "{}", 2, (struct dl_shape){2, 1, 3},
          (const dl_real[]){1, 2, 6, -3, 0, 0, 5, 5, 5, 1, 2, 3}, 1);
    expect_shape(&r, 2, 1, 1);
    dl_op_global_avgpool.forward(&r.call);
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){3, -1, 5, 2}, 4, 1e-12);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    dy[0] = 3;
    dy[3] = -6;
    dl_op_global_avgpool.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]), (const double[]){1, 1, 1, 0, 0, 0, 0, 0, 0, -2, -2, -2}, 12,
                  1e-12);
    teardown(&r);
}

/* ------------------------------------------------------------ values: batchnorm */

/* BatchNorm1d, batch 4, two channels: channel 0 = 1,2,3,4 (mean 2.5, biased
 * variance 1.25, unbiased 5/3); channel 1 = 0,0,0,8 (mean 2, 12, 16). */
static void batchnorm_values_training(void **state)
{
    (void)state;
    const dl_real x[8] = {1, 0, 2, 0, 3, 0, 4, 8};
    struct run r;
    setup(&r, &dl_op_batchnorm, "{}", 4, (struct dl_shape){2, 1, 1}, x, 1);
    dl_real *w = r.call.param[0], *b = r.call.param[1];
    w[0] = 2;
    w[1] = 0.5;
    b[0] = 1;
    b[1] = -1;
    dl_op_batchnorm.forward(&r.call);
    double s0 = 2 / sqrt(1.25 + 1e-5), s1 = 0.5 / sqrt(12 + 1e-5);
    double want[8];
    for (int n = 0; n < 4; n++) {
        want[2 * n] = (x[2 * n] - 2.5) * s0 + 1;
        want[2 * n + 1] = (x[2 * n + 1] - 2.0) * s1 - 1;
    }
    expect_values("out", dl_tensor_f32(&r.call.out), want, 8, 1e-12);
    /* PyTorch: running = 0.9 * running + 0.1 * batch, unbiased variance */
    expect_values("running_mean", r.call.param[2], (const double[]){0.25, 0.2}, 2, 1e-12);
    expect_values("running_var", r.call.param[3], (const double[]){0.9 + 0.1 * 5 / 3, 0.9 + 1.6}, 2,
                  1e-12);
    teardown(&r);
}

/* 4-D input, batch 2 of 2x2x3, momentum 0.3, non-default starting running
 * statistics: the update against a direct evaluation of PyTorch's formula. */
static void batchnorm_running_stats_4d(void **state)
{
    (void)state;
    dl_real x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (dl_real)((i * 7) % 11) - (dl_real)(i % 3) * 0.5;
    struct run r;
    setup(&r, &dl_op_batchnorm, "{momentum: 0.3}", 2, (struct dl_shape){2, 2, 3}, x, 1);
    r.call.param[2][0] = 0.5;
    r.call.param[2][1] = -1;
    r.call.param[3][0] = 2;
    r.call.param[3][1] = 0.25;
    dl_op_batchnorm.forward(&r.call);
    double want_mean[2], want_var[2];
    const double rm0[2] = {0.5, -1}, rv0[2] = {2, 0.25};
    for (int ch = 0; ch < 2; ch++) {
        double sum = 0, sq = 0;
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 6; i++)
                sum += x[(n * 2 + ch) * 6 + i];
        double mean = sum / 12;
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 6; i++)
                sq += (x[(n * 2 + ch) * 6 + i] - mean) * (x[(n * 2 + ch) * 6 + i] - mean);
        want_mean[ch] = 0.7 * rm0[ch] + 0.3 * mean;
        want_var[ch] = 0.7 * rv0[ch] + 0.3 * sq / 11;
        /* the output is normalised with the biased variance */
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 6; i++) {
                long k = (n * 2 + ch) * 6 + i;
                double y = (x[k] - mean) / sqrt(sq / 12 + 1e-5);
                if (fabs(dl_tensor_f32(&r.call.out)[k] - y) > 1e-12)
                    fail_msg("out[%ld] = %.10g, expected %.10g", k, (double)dl_tensor_f32(&r.call.out)[k], y);
            }
    }
    expect_values("running_mean", r.call.param[2], want_mean, 2, 1e-12);
    expect_values("running_var", r.call.param[3], want_var, 2, 1e-12);
    teardown(&r);
}

/* Inference: running statistics, which stay unchanged. */
static void batchnorm_values_inference(void **state)
{
    (void)state;
    struct run r;
    setup(&r, &dl_op_batchnorm, "{eps: 0}", 2, (struct dl_shape){2, 1, 2},
          (const dl_real[]){1, 3, -1, 0, 5, -3, 1, -2}, 0);
    dl_real *p[4] = {r.call.param[0], r.call.param[1], r.call.param[2], r.call.param[3]};
    p[0][0] = 3;
    p[0][1] = 2;
    p[1][0] = 0.5;
    p[1][1] = 0;
    p[2][0] = 1;
    p[2][1] = -1;
    p[3][0] = 4;
    p[3][1] = 0.25;
    dl_op_batchnorm.forward(&r.call);
    /* channel 0: (x - 1) / 2 * 3 + 0.5; channel 1: (x + 1) / 0.5 * 2 */
    expect_values("out", dl_tensor_f32(&r.call.out), (const double[]){0.5, 3.5, 0, 4, 6.5, -5.5, 8, -4}, 8, 1e-12);
    expect_values("running_mean", p[2], (const double[]){1, -1}, 2, 0);
    expect_values("running_var", p[3], (const double[]){4, 0.25}, 2, 0);
    dl_real *dy = dl_tensor_f32(&r.call.dout);
    for (int i = 0; i < 8; i++)
        dy[i] = 1;
    dl_op_batchnorm.backward(&r.call);
    expect_values("din", dl_tensor_f32(&r.call.din[0]), (const double[]){1.5, 1.5, 4, 4, 1.5, 1.5, 4, 4}, 8, 1e-12);
    expect_values("dbias", r.call.dparam[1], (const double[]){4, 4}, 2, 1e-12);
    /* sum of xhat: channel 0 (0 + 2 + 4 - 4) / 2, channel 1 (0 + 1 + 2 - 1) * 2 */
    expect_values("dweight", r.call.dparam[0], (const double[]){1, 4}, 2, 1e-12);
    teardown(&r);
}

/* Forward and backward give the same bits with 1 and 3 threads. */
static void batchnorm_thread_independent(void **state)
{
    (void)state;
#ifdef _OPENMP
    enum { N = 3, C = 5, HW = 35 };
    dl_real x[N * C * HW], out[2][N * C * HW], dx[2][N * C * HW], dw[2][C];
    for (int i = 0; i < N * C * HW; i++)
        x[i] = (dl_real)sin(i * 0.37) * 3;
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t ? 3 : 1);
        struct run r;
        setup(&r, &dl_op_batchnorm, "{}", N, (struct dl_shape){C, 5, 7}, x, 1);
        dl_real *dy = dl_tensor_f32(&r.call.dout);
        for (int i = 0; i < N * C * HW; i++)
            dy[i] = (dl_real)cos(i * 0.11);
        dl_op_batchnorm.forward(&r.call);
        dl_op_batchnorm.backward(&r.call);
        memcpy(out[t], dl_tensor_f32(&r.call.out), sizeof out[t]);
        memcpy(dx[t], dl_tensor_f32(&r.call.din[0]), sizeof dx[t]);
        memcpy(dw[t], r.call.dparam[0], sizeof dw[t]);
        teardown(&r);
    }
    omp_set_num_threads(2);
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    assert_memory_equal(dx[0], dx[1], sizeof dx[0]);
    assert_memory_equal(dw[0], dw[1], sizeof dw[0]);
#else
    skip();
#endif
}

static void batchnorm_params_layout(void **state)
{
    (void)state;
    struct dl_param_desc p[TEST_MAX_PARAMS];
    struct dl_shape in = {7, 3, 3};
    void *attr = calloc(1, dl_op_batchnorm.attr_size);
    dl_attrs_defaults(&dl_op_batchnorm, attr);
    assert_int_equal(dl_op_batchnorm.params(attr, &in, in, NULL), 5);
    assert_int_equal(dl_op_batchnorm.params(attr, &in, in, p), 5);
    free(attr);
    /* PyTorch's fifth entry of a BatchNorm2d state_dict: a scalar i64 count of training forwards */
    assert_string_equal(p[4].name, "num_batches_tracked");
    assert_true(p[4].dtype == DL_I64 && p[4].ndim == 0 && p[4].count == 1 && !p[4].trainable && p[4].counts_forwards);
    static const char *const names[] = {"weight", "bias", "running_mean", "running_var"};
    static const enum dl_init init[] = {DL_INIT_ONE, DL_INIT_ZERO, DL_INIT_ZERO, DL_INIT_ONE};
    for (int j = 0; j < 4; j++) {
        assert_string_equal(p[j].name, names[j]);
        assert_int_equal(p[j].count, 7);
        assert_int_equal(p[j].ndim, 1);
        assert_int_equal(p[j].dims[0], 7);
        assert_int_equal(p[j].init, init[j]);
        assert_int_equal(p[j].trainable, j < 2);
    }
}

/* ------------------------------------------------------------ errors */

static void pool_attr_errors(void **state)
{
    (void)state;
    struct dl_shape in = {3, 8, 8};
    expect_error(&dl_op_maxpool, "{}", in, WORDS("kernel", "missing"));
    expect_error(&dl_op_maxpool, "{kernel: 0}", in, WORDS("kernel", "found 0"));
    expect_error(&dl_op_maxpool, "{kernel: [2, 3], stride: -1}", in, WORDS("stride", "found -1"));
    expect_error(&dl_op_maxpool, "{kernel: 3, pad: 2}", in, WORDS("pad [2, 2]", "kernel [3, 3]", "[1, 1]"));
    expect_error(&dl_op_maxpool, "{kernel: 3, dilation: 2}", in, WORDS("dilation"));
    expect_error(&dl_op_avgpool, "{kernel: [4, 2], pad: [2, 2]}", in, WORDS("pad [2, 2]", "kernel [4, 2]"));
    expect_error(&dl_op_avgpool, "{}", in, WORDS("kernel", "output", "neither"));
    expect_error(&dl_op_avgpool, "{kernel: 2, output: 3}", in, WORDS("kernel", "output", "both"));
    expect_error(&dl_op_avgpool, "{output: 6, stride: 2}", in, WORDS("stride", "adaptive", "[6, 6]"));
    expect_error(&dl_op_avgpool, "{output: 6, ceil_mode: true}", in, WORDS("ceil_mode"));
    expect_error(&dl_op_avgpool, "{output: 6, stride: [0, 1]}", in, WORDS("stride"));
    expect_error(&dl_op_avgpool, "{output: [6, 0]}", in, WORDS("output", "found 0"));
}

static void pool_shape_errors(void **state)
{
    (void)state;
    expect_error(&dl_op_maxpool, "{kernel: 5}", (struct dl_shape){3, 4, 4},
                 WORDS("output would be 0x0", "3x4x4", "kernel [5, 5]", "pad [0, 0]"));
    expect_error(&dl_op_avgpool, "{kernel: [2, 9], stride: 2}", (struct dl_shape){3, 4, 8},
                 WORDS("output would be 2x0", "3x4x8", "kernel [2, 9]", "stride [2, 2]"));
    expect_error(&dl_op_avgpool, "{kernel: 5, pad: 1, ceil_mode: true}", (struct dl_shape){1, 2, 2},
                 WORDS("output would be 0x0", "pad [1, 1]"));
    expect_error(&dl_op_maxpool, "{kernel: 2}", (struct dl_shape){1, 5000, 5000},
                 WORDS("5000x5000", "16777216"));
}

static void batchnorm_attr_errors(void **state)
{
    (void)state;
    struct dl_shape in = {3, 4, 4};
    expect_error(&dl_op_batchnorm, "{eps: -1}", in, WORDS("eps", "found -1"));
    expect_error(&dl_op_batchnorm, "{momentum: 1.5}", in, WORDS("momentum", "found 1.5"));
    expect_error(&dl_op_batchnorm, "{affine: false}", in, WORDS("affine"));
}

int main(void)
{
    static const struct CMUnitTest value_tests[] = {
        cmocka_unit_test(maxpool_values),
        cmocka_unit_test(maxpool_values_pad),
        cmocka_unit_test(maxpool_values_overlap_ceil),
        cmocka_unit_test(pool_output_sizes),
        cmocka_unit_test(avgpool_values_count_include_pad),
        cmocka_unit_test(avgpool_values),
        cmocka_unit_test(avgpool_values_adaptive),
        cmocka_unit_test(global_avgpool_values),
        cmocka_unit_test(batchnorm_values_training),
        cmocka_unit_test(batchnorm_running_stats_4d),
        cmocka_unit_test(batchnorm_values_inference),
        cmocka_unit_test(batchnorm_thread_independent),
        cmocka_unit_test(batchnorm_params_layout),
        cmocka_unit_test(pool_attr_errors),
        cmocka_unit_test(pool_shape_errors),
        cmocka_unit_test(batchnorm_attr_errors),
    };
    enum { N_VALUE = sizeof value_tests / sizeof value_tests[0] };
    static struct CMUnitTest tests[N_GRAD_CASES + N_VALUE];
    static char names[N_GRAD_CASES][128];
    for (size_t i = 0; i < N_GRAD_CASES; i++) {
        const struct gc_case *g = &grad_cases[i];
        snprintf(names[i], sizeof names[i], "grad %s %s batch %d %dx%dx%d %s", g->op->name, g->attrs,
                 g->batch, g->in[0].c, g->in[0].h, g->in[0].w, g->training ? "training" : "inference");
        tests[i] = (struct CMUnitTest){.name = names[i], .test_func = grad_test,
                                       .initial_state = (void *)g};
    }
    memcpy(tests + N_GRAD_CASES, value_tests, sizeof value_tests);
    return _cmocka_run_group_tests("test_grad_pool_bn", tests, N_GRAD_CASES + N_VALUE, NULL, NULL);
}
