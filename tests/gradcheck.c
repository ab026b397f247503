/* gradcheck.c: central finite differences in double precision against the
 * reference backward of one op (see gradcheck.h). */
#include "gradcheck.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/target_bits.h"
#include "spec/attrs.h"
#include "layer_params.h"

struct gc_state {
    const struct dl_op_kind *op;
    struct dl_op_call call;
    long in_count[DL_MAX_INPUTS], out_count, saved_count;
    struct dl_param_desc params[TEST_MAX_PARAMS];
    int n_params;
    dl_real *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS]; /* the call's arrays */
    dl_real *in[DL_MAX_INPUTS];
    dl_real *r;
    unsigned seed;
};

/* L = sum(out * R), plus the layer's own loss weighted by the call's
 * loss_norm (op.h's added_loss); dropout draws the same mask on every
 * evaluation (its mask is a function of the call's key). */
static double eval_loss(struct gc_state *s)
{
    s->op->forward(&s->call);
    double l = 0;
    for (long i = 0; i < s->out_count * s->call.batch; i++)
        l += (double)dl_tensor_f32(&s->call.out)[i] * s->r[i];
    if (s->op->added_loss && s->call.training)
        l += s->call.loss_norm * s->op->added_loss(&s->call);
    return l;
}

static int compare(const char *what, long idx, double analytic, double numeric, double tol,
                   char *report, size_t size)
{
    double diff = fabs(analytic - numeric);
    double bound = tol + 10 * tol * fmax(fabs(analytic), fabs(numeric));
    if (diff <= bound && !isnan(analytic))
        return 0;
    snprintf(report, size, "%s[%ld]: analytic %.10g vs numeric %.10g (|diff| %.3g > %.3g)", what, idx,
             analytic, numeric, diff, bound);
    return 1;
}

/* Perturbs up to max_checks elements of x (n elements) and compares the
 * numeric derivative of L with grad. */
static int check_tensor(struct gc_state *s, const char *what, dl_real *x, long n, const dl_real *grad,
                        const struct gc_case *c, char *report, size_t size)
{
    const double h = 1e-6;
    double tol = c->tol > 0 ? c->tol : 1e-6;
    int max_checks = c->max_checks > 0 ? c->max_checks : 200;
    struct dl_rng pick;
    dl_rng_seed(&pick, s->seed + 99);
    for (long k = 0; k < (n < max_checks ? n : max_checks); k++) {
        long i = n <= max_checks ? k : (long)dl_rng_below(&pick, (uint64_t)n);
        dl_real keep = x[i];
        x[i] = keep + h;
        double lp = eval_loss(s);
        x[i] = keep - h;
        double lm = eval_loss(s);
        x[i] = keep;
        if (compare(what, i, grad[i], (lp - lm) / (2 * h), tol, report, size))
            return 1;
    }
    return 0;
}

static dl_real *alloc_random(struct dl_rng *rng, long n, double scale)
{
    dl_real *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    for (long i = 0; i < n; i++)
        p[i] = (dl_real)(scale * dl_rng_normal(rng));
    return p;
}

int gc_run(const struct gc_case *c, unsigned seed, char *report, size_t size)
{
    struct gc_state s;
    memset(&s, 0, sizeof s);
    s.op = c->op;
    s.seed = seed;
    struct dl_error err = {0};
    void *attr = calloc(1, c->op->attr_size ? c->op->attr_size : 1);
    if (dl_attrs_from_string(c->op, c->attrs, attr, &err)) {
        snprintf(report, size, "attributes: %s", err.msg);
        free(attr);
        return 1;
    }
    struct dl_op_call *call = &s.call;
    call->param = s.param;
    call->dparam = s.dparam;
    call->attr = attr;
    call->batch = c->batch;
    call->n_in = c->n_in;
    call->training = c->training;
    call->key = s.seed + 17;
    call->loss_norm = 0.37; /* a weight of the layer's own loss other than 1/batch */
    if (c->op->infer(attr, c->n_in, c->in, &call->out.shape, &err)) {
        snprintf(report, size, "infer: %s", err.msg);
        free(attr);
        return 1;
    }
    struct dl_rng rng;
    dl_rng_seed(&rng, seed);
    int32_t *ids = NULL; /* an i32 input: token ids below the op's limit, no gradient (core/shape.h) */
    for (int i = 0; i < c->n_in; i++) {
        s.in_count[i] = dl_shape_count(c->in[i]);
        if (c->in[i].dtype == DL_I32) {
            ids = calloc((size_t)(s.in_count[i] * c->batch), sizeof *ids);
            for (long k = 0; k < s.in_count[i] * c->batch; k++)
                ids[k] = (int32_t)dl_rng_below(&rng, (uint64_t)c->op->id_limit(attr));
            call->in[i] = dl_tensor_of(ids, c->in[i]);
            continue;
        }
        s.in[i] = alloc_random(&rng, s.in_count[i] * c->batch, 1.0);
        call->in[i] = dl_tensor_of(s.in[i], c->in[i]);
        call->din[i] = dl_tensor_of(alloc_random(&rng, s.in_count[i] * c->batch, 100.0), c->in[i]); /* must be overwritten */
    }
    s.out_count = dl_shape_count(call->out.shape);
    call->out.data = calloc((size_t)(s.out_count * c->batch), sizeof(dl_real));
    s.r = alloc_random(&rng, s.out_count * c->batch, 1.0);
    call->dout = dl_tensor_of(s.r, call->out.shape);
    /* a label per position of a sequence's scores [T, C] (T per sample; with
     * ignore_some, every third one the loss's default ignore_index), else one;
     * a regression loss's float targets, one per input value */
    int P = dl_shape_rank(c->in[0]) == 2 ? c->in[0].h : 1;
    long classes = P > 1 ? c->in[0].c : s.in_count[0];
    if (c->op->float_targets) /* a regression loss: a standard normal target per input value */
        P = (int)s.in_count[0];
    int *labels = calloc((size_t)c->batch * (size_t)P, sizeof *labels);
    for (long n = 0; n < (long)c->batch * P; n++)
        labels[n] = c->op->float_targets ? dl_target_bits((float)dl_rng_normal(&rng))
                  : c->ignore_some && n % 3 == 1 ? -100 : (int)dl_rng_below(&rng, (uint64_t)(classes > 0 ? classes : 1));
    call->labels = labels;
    call->doc_start = c->doc_start;
    s.n_params = c->op->params ? c->op->params(attr, c->in, call->out.shape, NULL) : 0;
    assert_true(s.n_params <= TEST_MAX_PARAMS);
    if (s.n_params)
        c->op->params(attr, c->in, call->out.shape, s.params);
    dl_real *pre[TEST_MAX_PARAMS] = {0};
    for (int j = 0; j < s.n_params; j++) {
        call->param[j] = alloc_random(&rng, s.params[j].count, 0.5);
        if (!s.params[j].trainable) /* running statistics: keep variances positive */
            for (long i = 0; i < s.params[j].count; i++)
                call->param[j][i] = (dl_real)(fabs((double)call->param[j][i]) + 0.5);
        pre[j] = alloc_random(&rng, s.params[j].count, 1.0); /* backward must add to this */
        call->dparam[j] = calloc((size_t)s.params[j].count, sizeof(dl_real));
        memcpy(call->dparam[j], pre[j], sizeof(dl_real) * (size_t)s.params[j].count);
    }
    s.saved_count = c->op->saved_size ? c->op->saved_size(attr, c->batch, c->in, call->out.shape) : 0;
    call->saved = calloc((size_t)(s.saved_count > 0 ? s.saved_count : 1), sizeof(dl_real));

    eval_loss(&s);
    c->op->backward(call);

    int bad = 0;
    char what[64];
    for (int i = 0; i < c->n_in && !bad; i++) {
        if (!s.in[i])
            continue; /* ids take no gradient */
        snprintf(what, sizeof what, "din[%d]", i);
        bad = check_tensor(&s, what, s.in[i], s.in_count[i] * c->batch, dl_tensor_f32(&call->din[i]), c, report, size);
    }
    for (int j = 0; j < s.n_params && !bad; j++) {
        if (!s.params[j].trainable)
            continue;
        for (long i = 0; i < s.params[j].count; i++) /* analytic = accumulated - pre-fill */
            call->dparam[j][i] -= pre[j][i];
        snprintf(what, sizeof what, "d%s", s.params[j].name);
        bad = check_tensor(&s, what, call->param[j], s.params[j].count, call->dparam[j], c, report, size);
    }

    for (int i = 0; i < c->n_in; i++) {
        free(s.in[i]);
        free(call->din[i].data);
    }
    for (int j = 0; j < s.n_params; j++) {
        free(call->param[j]);
        free(call->dparam[j]);
        free(pre[j]);
    }
    free(call->out.data);
    free(call->saved);
    free(s.r);
    free(labels);
    free(ids);
    free(attr);
    return bad;
}

void gc_assert(const struct gc_case *c)
{
    char report[1024] = "";
    if (gc_run(c, 1234, report, sizeof report)) {
        print_error("gradient check %s %s batch %d: %s\n", c->op->name, c->attrs, c->batch, report);
        fail();
    }
}
