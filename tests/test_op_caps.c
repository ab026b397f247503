/* test_op_caps.c: the capability flags of the op kinds (ops/op.h) hold for
 * their reference ops, in the double precision build: a kind marked
 * micro_batch gives the same outputs and gradients on two micro-batches as
 * on the whole batch; one marked is_relu computes max(x, 0) and passes the
 * gradient where the output is positive; one marked commutes_with_relu
 * gives the same output and input gradient with a ReLU before it as after
 * it; a loss marked tp.split_classes, run on T threads that each hold a block
 * of the classes (uneven ones too) and reduce through sync_max and sync_sum
 * as the tensor group does, gives every rank the whole loss and its block
 * of the whole gradient; a kind marked tp.row_local, run on bands of rows on
 * threads whose statistics are summed through sync_sum, gives the whole
 * run's output, gradients and running statistics band by band.  The tuner
 * and the executor act on these flags alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>

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
    {"add", "{}", {3, 4, 5}}, /* (row_local only: every input of this shape) */
    {"embedding", "{vocab: 5, dim: 3}", {1, 6, 1, 2, DL_I32}}, /* token ids [6] */
    {"position_embedding", "{context: 8}", {4, 6, 1, 2}},        /* [6, 4] */
    {"attention", "{heads: 2, dropout: 0.3}", {12, 5, 1, 2}},    /* packed q, k, v [5, 12] */
    {"layernorm", "{}", {6, 5, 1, 2}},
    {"rmsnorm", "{eps: 0.01}", {6, 5, 1, 2}},
    {"rope", "{head_dim: 4, scaling_factor: 8, original_context: 16}", {8, 5, 1, 2}},
    {"gelu", "{}", {3, 4, 5}},
    {"swiglu", "{}", {3, 4, 5}}, /* gate and up of this shape */
    {"lstm", "{hidden: 3, bidirectional: true}", {4, 5, 1, 2}},
    {"gru", "{hidden: 3, layers: 2}", {4, 5, 1, 2}},
    {"rnn", "{hidden: 3, nonlinearity: relu}", {4, 5, 1, 2}},
};
#define N_EXAMPLES (sizeof examples / sizeof examples[0])

/* Everything one forward and backward of a batch reads and writes. */
struct pass {
    int batch;
    long nx, ny;
    dl_real *x, *y, *dy, *dx;
    int32_t *ids;         /* an i32 input's token ids (x unused then) */
    int n_params;
    struct dl_param_desc p[TEST_MAX_PARAMS];
    dl_real *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS];
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
    t->ny = batch * dl_shape_count(r.call.out.shape);
    t->x = vec(t->nx), t->dx = vec(t->nx), t->y = vec(t->ny), t->dy = vec(t->ny);
    fill(t->x, t->nx, 1);
    if (e->in.dtype == DL_I32) { /* token ids below the op's limit */
        struct dl_rng ids;
        dl_rng_seed(&ids, 1);
        t->ids = calloc((size_t)t->nx, sizeof *t->ids);
        assert_non_null(t->ids);
        for (long i = 0; i < t->nx; i++)
            t->ids[i] = (int32_t)dl_rng_below(&ids, (uint64_t)op->id_limit(r.attr));
    }
    fill(t->dy, t->ny, 2);
    t->n_params = op->params ? op->params(r.attr, &e->in, r.call.out.shape, NULL) : 0;
    assert_true(t->n_params <= TEST_MAX_PARAMS);
    if (t->n_params)
        op->params(r.attr, &e->in, r.call.out.shape, t->p);
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
    free(t->x), free(t->y), free(t->dy), free(t->dx), free(t->ids);
    for (int j = 0; j < t->n_params; j++)
        free(t->param[j]), free(t->dparam[j]);
}

/* Forward then backward of samples [n0, n0 + mb) of t, in training mode:
 * outputs and input gradients into t's slices, weight gradients added up. */
static void run_slice(const struct dl_op_kind *op, const struct example *e, struct pass *t, int n0, int mb)
{
    struct ot_run r;
    long sx = t->nx / t->batch, sy = t->ny / t->batch;
    const dl_real *x = t->ids ? NULL : t->x + n0 * sx;
    ot_setup(&r, op, e->attrs, mb, 1, &e->in, &x, NULL, 1);
    if (t->ids) /* the slice's token ids into the call's i32 input */
        memcpy(dl_tensor_i32(&r.call.in[0]), t->ids + n0 * sx, sizeof *t->ids * (size_t)(mb * sx));
    r.call.sample0 = n0; /* as the executor's micro-batches say where their samples sit */
    memcpy(dl_tensor_f32(&r.call.dout), t->dy + n0 * sy, sizeof(dl_real) * (size_t)(mb * sy));
    for (int j = 0; j < t->n_params; j++) {
        r.call.param[j] = t->param[j];
        r.call.dparam[j] = t->dparam[j];
    }
    op->forward(&r.call);
    op->backward(&r.call);
    memcpy(t->y + n0 * sy, dl_tensor_f32(&r.call.out), sizeof(dl_real) * (size_t)(mb * sy));
    memcpy(t->dx + n0 * sx, dl_tensor_const_any(&r.call.din[0]), sizeof(dl_real) * (size_t)(mb * sx));
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

/* ---------------------------------------------------------------- split classes */
#define MAX_GROUP 4

/* A tensor group of threads: each reduction publishes every member's
 * vector, reduces them in member order, and waits until all have read. */
struct group {
    int T;
    pthread_barrier_t bar;
    double *v[MAX_GROUP];
};

struct member {
    struct group *g;
    int t, c0;
    struct ot_run r;
};

static void group_reduce(struct member *m, double *v, int n, int max)
{
    struct group *g = m->g;
    double out[n > 0 ? n : 1];
    g->v[m->t] = v;
    pthread_barrier_wait(&g->bar);
    for (int i = 0; i < n; i++) {
        out[i] = g->v[0][i];
        for (int t = 1; t < g->T; t++)
            out[i] = max ? fmax(out[i], g->v[t][i]) : out[i] + g->v[t][i];
    }
    pthread_barrier_wait(&g->bar);
    memcpy(v, out, sizeof *v * (size_t)n);
}

static void group_sum(void *ctx, double *v, int n)
{
    group_reduce(ctx, v, n, 0);
}

static void group_max(void *ctx, double *v, int n)
{
    group_reduce(ctx, v, n, 1);
}

struct member_job {
    struct member *m;
    const struct dl_op_kind *op;
};

static void *member_pass(void *arg)
{
    struct member_job *j = arg;
    j->op->forward(&j->m->r.call);
    j->op->backward(&j->m->r.call);
    return NULL;
}

/* Forward and backward of op on every member's call, one thread each, as
 * one group (sync_ctx: the member). */
static void group_run(const struct dl_op_kind *op, struct member *m, int T)
{
    struct group g = {.T = T};
    struct member_job job[MAX_GROUP];
    pthread_t th[MAX_GROUP];
    pthread_barrier_init(&g.bar, NULL, (unsigned)T);
    for (int t = 0; t < T; t++) {
        m[t].g = &g;
        m[t].t = t;
        m[t].r.call.sync_ctx = &m[t];
        job[t] = (struct member_job){&m[t], op};
    }
    for (int t = 0; t < T; t++)
        assert_int_equal(pthread_create(&th[t], NULL, member_pass, &job[t]), 0);
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g.bar);
}

/* Loss and input gradient of N samples of C classes x (whole), split into
 * T blocks, against the whole op. */
static void check_split_classes(const struct dl_op_kind *op, const char *attrs, int C, int T, double scale)
{
    enum { N = 5 };
    const struct dl_shape whole_shape = {C, 1, 1};
    dl_real x[N * C], dy[N];
    int y[N];
    fill(x, N * C, 7 + (uint64_t)C);
    fill(dy, N, 8);
    for (int i = 0; i < N * C; i++)
        x[i] *= (dl_real)scale;
    for (int n = 0; n < N; n++)
        y[n] = (n * 5 + C) % C;
    struct ot_run whole;
    const dl_real *xp = x;
    ot_setup(&whole, op, attrs, N, 1, &whole_shape, &xp, y, 1);
    memcpy(dl_tensor_f32(&whole.call.dout), dy, sizeof dy);
    op->forward(&whole.call);
    op->backward(&whole.call);
    struct member m[MAX_GROUP];
    for (int t = 0; t < T; t++) { /* classes [t*C/T, (t+1)*C/T): uneven when T does not divide C */
        int c0 = t * C / T, cl = (t + 1) * C / T - c0;
        dl_real block[N * C];
        for (int n = 0; n < N; n++)
            memcpy(block + n * cl, x + n * C + c0, sizeof *block * (size_t)cl);
        const struct dl_shape part = {cl, 1, 1};
        const dl_real *bp = block;
        m[t] = (struct member){.c0 = c0};
        ot_setup(&m[t].r, op, attrs, N, 1, &part, &bp, y, 1);
        memcpy(dl_tensor_f32(&m[t].r.call.dout), dy, sizeof dy);
        m[t].r.call.channel0 = c0;
        m[t].r.call.sync_sum = group_sum;
        m[t].r.call.sync_max = group_max;
    }
    group_run(op, m, T);
    char what[96];
    for (int t = 0; t < T; t++) {
        int c0 = m[t].c0, cl = m[t].r.call.in[0].shape.c;
        dl_real dx[N * C];
        for (int n = 0; n < N; n++)
            memcpy(dx + n * cl, dl_tensor_f32(&whole.call.din[0]) + n * C + c0, sizeof *dx * (size_t)cl);
        snprintf(what, sizeof what, "%s, %d classes, rank %d of %d: loss", attrs, C, t, T);
        expect_close(op->name, what, dl_tensor_f32(&m[t].r.call.out), dl_tensor_f32(&whole.call.out), N);
        snprintf(what, sizeof what, "%s, %d classes, rank %d of %d: gradient", attrs, C, t, T);
        expect_close(op->name, what, dl_tensor_f32(&m[t].r.call.din[0]), dx, (long)N * cl);
        ot_free(&m[t].r);
    }
    ot_free(&whole);
}

/* Every input x[k] of shape e->in (min_inputs of them) for N samples cut
 * into T bands of rows, run on T threads whose statistics go through
 * group_sum, against the whole: each band of the output and input
 * gradients, the weight gradients summed over the bands, and every band's
 * state (batch norm's running statistics) equal the whole run's. */
static void check_row_local(const struct dl_op_kind *op, const struct example *e, int T)
{
    enum { N = 2 };
    const int n_in = op->min_inputs, C = e->in.c, H = e->in.h, W = e->in.w;
    const long per = (long)N * C * H * W;
    struct dl_shape shapes[DL_MAX_INPUTS];
    dl_real *x[DL_MAX_INPUTS];
    for (int k = 0; k < n_in; k++) {
        shapes[k] = e->in;
        x[k] = vec(per);
        fill(x[k], per, 11 + (uint64_t)k);
    }
    struct ot_run whole;
    ot_setup(&whole, op, e->attrs, N, n_in, shapes, (const dl_real *const *)x, NULL, 1);
    fill(dl_tensor_f32(&whole.call.dout), per, 12);
    struct dl_param_desc p[TEST_MAX_PARAMS];
    int n_params = op->params ? op->params(whole.attr, shapes, whole.call.out.shape, NULL) : 0;
    assert_true(n_params <= TEST_MAX_PARAMS);
    if (n_params)
        op->params(whole.attr, shapes, whole.call.out.shape, p);
    dl_real *init[TEST_MAX_PARAMS], *dwhole[TEST_MAX_PARAMS], *state[MAX_GROUP][TEST_MAX_PARAMS], *dpart[MAX_GROUP][TEST_MAX_PARAMS];
    for (int j = 0; j < n_params; j++) {
        init[j] = vec(p[j].count);
        fill(init[j], p[j].count, 13 + (uint64_t)j);
        for (long i = 0; strcmp(p[j].name, "running_var") == 0 && i < p[j].count; i++)
            init[j][i] = 0.5 + fabs(init[j][i]);
        whole.call.param[j] = vec(p[j].count);
        memcpy(whole.call.param[j], init[j], sizeof(dl_real) * (size_t)p[j].count);
        whole.call.dparam[j] = dwhole[j] = p[j].trainable ? vec(p[j].count) : NULL;
    }
    op->forward(&whole.call);
    op->backward(&whole.call);
    struct member m[MAX_GROUP];
    for (int t = 0; t < T; t++) {
        int lo = t * H / T, rows = (t + 1) * H / T - lo;
        struct dl_shape band[DL_MAX_INPUTS];
        dl_real *bx[DL_MAX_INPUTS];
        for (int k = 0; k < n_in; k++) {
            band[k] = e->in; /* its rank too: a band of a sequence's positions is a sequence */
            band[k].h = rows;
            bx[k] = vec((long)N * C * rows * W);
            for (long pl = 0; pl < (long)N * C; pl++)
                memcpy(bx[k] + pl * rows * W, x[k] + (pl * H + lo) * W, sizeof(dl_real) * (size_t)(rows * W));
        }
        m[t] = (struct member){.c0 = lo};
        ot_setup(&m[t].r, op, e->attrs, N, n_in, band, (const dl_real *const *)bx, NULL, 1);
        for (int k = 0; k < n_in; k++)
            free(bx[k]);
        for (long pl = 0; pl < (long)N * C; pl++)
            memcpy(dl_tensor_f32(&m[t].r.call.dout) + pl * rows * W, dl_tensor_const_f32(&whole.call.dout) + (pl * H + lo) * W,
                   sizeof(dl_real) * (size_t)(rows * W));
        for (int j = 0; j < n_params; j++) {
            m[t].r.call.param[j] = state[t][j] = vec(p[j].count);
            memcpy(state[t][j], init[j], sizeof(dl_real) * (size_t)p[j].count);
            m[t].r.call.dparam[j] = dpart[t][j] = p[j].trainable ? vec(p[j].count) : NULL;
        }
        m[t].r.call.sync_sum = group_sum;
    }
    group_run(op, m, T);
    char what[96];
    dl_real *part = vec(per), *din[DL_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        din[k] = vec(per);
    for (int t = 0; t < T; t++) {
        int lo = m[t].c0, rows = m[t].r.call.in[0].shape.h;
        for (long pl = 0; pl < (long)N * C; pl++) {
            memcpy(part + (pl * H + lo) * W, dl_tensor_f32(&m[t].r.call.out) + pl * rows * W, sizeof(dl_real) * (size_t)(rows * W));
            for (int k = 0; k < n_in; k++)
                memcpy(din[k] + (pl * H + lo) * W, dl_tensor_f32(&m[t].r.call.din[k]) + pl * rows * W,
                       sizeof(dl_real) * (size_t)(rows * W));
        }
    }
    snprintf(what, sizeof what, "row_local on %d bands: output", T);
    expect_close(op->name, what, part, dl_tensor_f32(&whole.call.out), per);
    for (int k = 0; k < n_in; k++) {
        snprintf(what, sizeof what, "row_local on %d bands: input %d gradient", T, k);
        expect_close(op->name, what, din[k], dl_tensor_f32(&whole.call.din[k]), per);
    }
    for (int j = 0; j < n_params; j++) {
        for (int t = 1; t < T && dpart[0][j]; t++)
            for (long i = 0; i < p[j].count; i++)
                dpart[0][j][i] += dpart[t][j][i];
        snprintf(what, sizeof what, "row_local on %d bands: %s%s", T, p[j].name, dpart[0][j] ? " gradient" : "");
        if (dpart[0][j])
            expect_close(op->name, what, dpart[0][j], dwhole[j], p[j].count);
        for (int t = 0; t < T && !dpart[0][j]; t++)
            expect_close(op->name, what, state[t][j], whole.call.param[j], p[j].count);
    }
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < n_params; j++)
            free(state[t][j]), free(dpart[t][j]);
        ot_free(&m[t].r);
    }
    for (int j = 0; j < n_params; j++)
        free(init[j]), free(whole.call.param[j]), free(dwhole[j]);
    for (int k = 0; k < n_in; k++)
        free(x[k]), free(din[k]);
    free(part);
    ot_free(&whole);
}

static void row_local_holds(void **state)
{
    int checked = 0;
    for (int i = 0; dl_op_kinds[i]; i++) {
        const struct dl_op_kind *op = dl_op_kinds[i];
        if (!op->tp.row_local)
            continue;
        const struct example *e = example_of(op);
        if (!e)
            fail_msg("op kind %s is row_local but has no example layer here", op->name);
        check_row_local(op, e, 2);
        check_row_local(op, e, 3); /* 4 rows: bands of 1, 1 and 2 */
        checked++;
    }
    print_message("# %d row-local kinds checked\n", checked);
    assert_true(checked >= 6);
}

static void split_classes_hold(void **state)
{
    int checked = 0;
    for (int i = 0; dl_op_kinds[i]; i++) {
        const struct dl_op_kind *op = dl_op_kinds[i];
        if (!op->tp.split_classes)
            continue;
        static const int shapes[][2] = {{6, 2}, {6, 3}, {7, 2}, {7, 3}, {10, 4}, {9, 4}};
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            check_split_classes(op, "{}", shapes[k][0], shapes[k][1], 1);
            check_split_classes(op, "{label_smoothing: 0.1}", shapes[k][0], shapes[k][1], 1);
            check_split_classes(op, "{}", shapes[k][0], shapes[k][1], 40); /* exp overflows without the maximum */
        }
        checked++;
    }
    assert_true(checked > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flags_hold),
        cmocka_unit_test(split_classes_hold),
        cmocka_unit_test(row_local_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
