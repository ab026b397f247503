/* test_op_caps.c: the capability flags of the op kinds (ops/op.h) hold for
 * their reference ops, in the double precision build: a kind marked
 * micro_batch gives the same outputs and gradients on two micro-batches as
 * on the whole batch; one marked is_relu computes max(x, 0) and passes the
 * gradient where the output is positive; one marked commutes_with_relu
 * gives the same output and input gradient with a ReLU before it as after
 * it.  The tuner and the executor act on these flags alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "optest.h"

#define TOL 1e-12 /* relative: only the order of a few double sums may differ */

/* A layer of each single-input kind: the flagged ones are checked, and a
 * flag set on any other kind fails for want of an example or in the check. */
struct example {
    const char *kind, *attrs;
    struct dl_shape in;
};

static const struct example examples[] = {
    {"conv", "{filters: 3, kernel: 3, stride: 2, pad: 1}", {4, 7, 6}},
    {"fc", "{units: 5}", {3, 2, 4}},
    {"maxpool", "{kernel: 3, stride: 2, pad: 1}", {3, 7, 8}},
    {"avgpool", "{kernel: 3, stride: 2, pad: 1}", {3, 7, 8}},
    {"global_avgpool", "{}", {3, 4, 5}},
    {"batchnorm", "{}", {3, 4, 5}},
    {"relu", "{}", {3, 4, 5}},
    {"leaky_relu", "{slope: 0.2}", {3, 4, 5}},
    {"sigmoid", "{}", {3, 4, 5}},
    {"tanh", "{}", {3, 4, 5}},
    {"dropout", "{rate: 0.5}", {3, 4, 5}},
    {"flatten", "{}", {3, 4, 5}},
};
#define N_EXAMPLES (sizeof examples / sizeof examples[0])

/* Everything one forward and backward of a batch reads and writes. */
struct pass {
    int batch;
    long nx, ny;
    dl_real *x, *y, *dy, *dx;
    int n_params;
    struct dl_param_desc p[DL_MAX_PARAMS];
    dl_real *param[DL_MAX_PARAMS], *dparam[DL_MAX_PARAMS];
};

static dl_real *vec(long n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(dl_real));
}

static void fill(dl_real *v, long n, uint64_t seed)
{
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    for (long i = 0; i < n; i++)
        v[i] = (dl_real)dl_rng_normal(&r);
}

/* Random input, output gradient and parameters (positive variances), zero
 * weight gradients, for `batch` samples of example e. */
static void pass_alloc(struct pass *t, const struct dl_op_kind *op, const struct example *e, int batch)
{
    memset(t, 0, sizeof *t);
    struct ot_run r;
    ot_setup(&r, op, e->attrs, 1, 1, &e->in, NULL, NULL, 1);
    t->batch = batch;
    t->nx = batch * dl_shape_count(e->in);
    t->ny = batch * dl_shape_count(r.call.out_shape);
    t->x = vec(t->nx), t->dx = vec(t->nx), t->y = vec(t->ny), t->dy = vec(t->ny);
    fill(t->x, t->nx, 1);
    fill(t->dy, t->ny, 2);
    t->n_params = op->params ? op->params(r.attr, &e->in, r.call.out_shape, t->p) : 0;
    for (int j = 0; j < t->n_params; j++) {
        t->param[j] = vec(t->p[j].count);
        fill(t->param[j], t->p[j].count, 3 + (uint64_t)j);
        if (strcmp(t->p[j].name, "running_var") == 0)
            for (long i = 0; i < t->p[j].count; i++)
                t->param[j][i] = 0.5 + fabs(t->param[j][i]);
        t->dparam[j] = t->p[j].trainable ? vec(t->p[j].count) : NULL;
    }
    ot_free(&r);
}

static void pass_free(struct pass *t)
{
    free(t->x), free(t->y), free(t->dy), free(t->dx);
    for (int j = 0; j < t->n_params; j++)
        free(t->param[j]), free(t->dparam[j]);
}

/* Forward then backward of samples [n0, n0 + mb) of t, in training mode:
 * outputs and input gradients into t's slices, weight gradients added up. */
static void run_slice(const struct dl_op_kind *op, const struct example *e, struct pass *t, int n0, int mb)
{
    struct ot_run r;
    long sx = t->nx / t->batch, sy = t->ny / t->batch;
    const dl_real *x = t->x + n0 * sx;
    ot_setup(&r, op, e->attrs, mb, 1, &e->in, &x, NULL, 1);
    r.call.sample0 = n0; /* as the executor's micro-batches say where their samples sit */
    memcpy((dl_real *)r.call.dout, t->dy + n0 * sy, sizeof(dl_real) * (size_t)(mb * sy));
    for (int j = 0; j < t->n_params; j++) {
        r.call.param[j] = t->param[j];
        r.call.dparam[j] = t->dparam[j];
    }
    op->forward(&r.call);
    op->backward(&r.call);
    memcpy(t->y + n0 * sy, r.call.out, sizeof(dl_real) * (size_t)(mb * sy));
    memcpy(t->dx + n0 * sx, r.call.din[0], sizeof(dl_real) * (size_t)(mb * sx));
    ot_free(&r);
}

static double rel_err(const dl_real *a, const dl_real *b, long n)
{
    double num = 0, den = 1e-300;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        num = d > num || d != d ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return num / den;
}

static void expect_close(const char *kind, const char *what, const dl_real *a, const dl_real *b, long n)
{
    double e = rel_err(a, b, n);
    print_message("# %-15s %-34s relative difference %.1e\n", kind, what, e);
    if (!(e <= TOL))
        fail_msg("%s: %s differs by %.2e (relative)", kind, what, e);
}

/* Samples 0-2 and 3-5 as two micro-batches against all six at once. */
static void check_micro_batch(const struct dl_op_kind *op, const struct example *e)
{
    struct pass whole, split;
    pass_alloc(&whole, op, e, 6);
    pass_alloc(&split, op, e, 6);
    run_slice(op, e, &whole, 0, 6);
    run_slice(op, e, &split, 0, 3);
    run_slice(op, e, &split, 3, 3);
    expect_close(op->name, "micro-batches: output", split.y, whole.y, whole.ny);
    expect_close(op->name, "micro-batches: input gradient", split.dx, whole.dx, whole.nx);
    for (int j = 0; j < whole.n_params; j++)
        expect_close(op->name, whole.p[j].name, split.dparam[j] ? split.dparam[j] : split.param[j],
                     whole.dparam[j] ? whole.dparam[j] : whole.param[j], whole.p[j].count);
    pass_free(&whole);
    pass_free(&split);
}

/* max(x, 0) with NaN as 0, gradient where the output is positive, on
 * random values, signed zeros and NaNs. */
static void check_is_relu(const struct dl_op_kind *op, const struct example *e)
{
    struct pass t, want;
    pass_alloc(&t, op, e, 2);
    pass_alloc(&want, op, e, 2);
    for (long i = 0; i < t.nx; i += 7)
        t.x[i] = i % 3 == 0 ? (dl_real)NAN : i % 3 == 1 ? (dl_real)-0.0 : 0;
    run_slice(op, e, &t, 0, 2);
    for (long i = 0; i < t.nx; i++) {
        want.y[i] = t.x[i] > 0 ? t.x[i] : 0;
        want.dx[i] = want.y[i] > 0 ? t.dy[i] : 0;
    }
    expect_close(op->name, "is_relu: output max(x, 0)", t.y, want.y, t.ny);
    expect_close(op->name, "is_relu: gradient where out > 0", t.dx, want.dx, t.nx);
    pass_free(&t);
    pass_free(&want);
}

static void relu_inplace(dl_real *v, long n)
{
    for (long i = 0; i < n; i++)
        v[i] = v[i] > 0 ? v[i] : 0;
}

/* op(relu(x)) against relu(op(x)), and the input gradients of both. */
static void check_commutes_with_relu(const struct dl_op_kind *op, const struct example *e)
{
    struct pass before, after;
    pass_alloc(&before, op, e, 2);
    pass_alloc(&after, op, e, 2);
    /* ReLU first: the op sees relu(x); its gradient is masked by x > 0. */
    relu_inplace(before.x, before.nx);
    run_slice(op, e, &before, 0, 2);
    for (long i = 0; i < before.nx; i++)
        before.dx[i] = after.x[i] > 0 ? before.dx[i] : 0;
    /* ReLU after: the op's output clamped, the gradient masked by it. */
    struct pass plain;
    pass_alloc(&plain, op, e, 2);
    run_slice(op, e, &plain, 0, 2);
    for (long i = 0; i < after.ny; i++)
        after.dy[i] = plain.y[i] > 0 ? after.dy[i] : 0;
    run_slice(op, e, &after, 0, 2);
    relu_inplace(after.y, after.ny);
    expect_close(op->name, "commutes_with_relu: output", after.y, before.y, before.ny);
    expect_close(op->name, "commutes_with_relu: input gradient", after.dx, before.dx, before.nx);
    pass_free(&before);
    pass_free(&after);
    pass_free(&plain);
}

static const struct example *example_of(const struct dl_op_kind *op)
{
    for (size_t i = 0; i < N_EXAMPLES; i++)
        if (strcmp(examples[i].kind, op->name) == 0)
            return &examples[i];
    return NULL;
}

static void flags_hold(void **state)
{
    int checked = 0;
    for (int i = 0; dl_op_kinds[i]; i++) {
        const struct dl_op_kind *op = dl_op_kinds[i];
        if (!op->micro_batch && !op->is_relu && !op->commutes_with_relu)
            continue;
        const struct example *e = example_of(op);
        if (!e)
            fail_msg("op kind %s has capability flags but no example layer here", op->name);
        if (op->micro_batch)
            check_micro_batch(op, e), checked++;
        if (op->is_relu)
            check_is_relu(op, e), checked++;
        if (op->commutes_with_relu)
            check_commutes_with_relu(op, e), checked++;
    }
    print_message("# %d flags checked\n", checked);
    assert_true(checked > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flags_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
