/* optest.h: small helpers for forward-value and error-message tests of one
 * op (include after <cmocka.h>).  ot_setup builds a dl_op_call for given
 * attributes, input shapes and data, and allocates out, saved, dout and din;
 * ot_expect_error checks that an attribute string or an input-shape list is
 * rejected with a message containing the given words. */
#ifndef DL_TEST_OPTEST_H
#define DL_TEST_OPTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/op.h"
#include "spec/attrs.h"
#include "layer_params.h"

struct ot_run {
    struct dl_op_call call;
    dl_real *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS]; /* the call's arrays (the test sets them) */
    void *attr;
    long in_count[DL_MAX_INPUTS], out_count, saved_count;
};

/* x[i] holds batch x in[i] values (or NULL: zeros); labels may be NULL. */
static inline void ot_setup(struct ot_run *r, const struct dl_op_kind *op, const char *attrs,
                            int batch, int n_in, const struct dl_shape *in, const dl_real *const *x,
                            const int *labels, int training)
{
    struct dl_error err = {0};
    memset(r, 0, sizeof *r);
    struct dl_op_call *c = &r->call;
    c->param = r->param;
    c->dparam = r->dparam;
    r->attr = calloc(1, op->attr_size ? op->attr_size : 1);
    if (dl_attrs_from_string(op, attrs, r->attr, &err))
        fail_msg("attributes %s: %s", attrs, err.msg);
    c->attr = r->attr;
    c->batch = batch;
    c->n_in = n_in;
    c->training = training;
    c->key = 42;
    c->labels = labels;
    struct dl_shape out;
    if (op->infer(r->attr, n_in, in, &out, &err))
        fail_msg("infer: %s", err.msg);
    for (int i = 0; i < n_in; i++) {
        r->in_count[i] = (long)batch * dl_shape_count(in[i]);
        dl_real *p = calloc((size_t)r->in_count[i], sizeof *p);
        if (x && x[i])
            memcpy(p, x[i], sizeof *p * (size_t)r->in_count[i]);
        c->in[i] = dl_tensor_of(p, in[i]);
        c->din[i] = dl_tensor_of(calloc((size_t)r->in_count[i], sizeof(dl_real)), in[i]);
    }
    r->out_count = (long)batch * dl_shape_count(out);
    c->out = dl_tensor_of(calloc((size_t)r->out_count, sizeof(dl_real)), out);
    c->dout = dl_tensor_of(calloc((size_t)r->out_count, sizeof(dl_real)), out);
    r->saved_count = op->saved_size ? op->saved_size(r->attr, batch, in, out) : 0;
    c->saved = calloc((size_t)(r->saved_count > 0 ? r->saved_count : 1), sizeof(dl_real));
}

static inline void ot_free(struct ot_run *r)
{
    for (int i = 0; i < r->call.n_in; i++) {
        free(r->call.in[i].data);
        free(r->call.din[i].data);
    }
    free(r->call.out.data);
    free(r->call.dout.data);
    free(r->call.saved);
    free(r->attr);
}

static inline void ot_expect_words(const char *msg, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (!strstr(msg, words[i]))
            fail_msg("message \"%s\" lacks \"%s\"", msg, words[i]);
}

/* The attribute string must be rejected (by the range table or check()). */
static inline void ot_expect_attr_error(const struct dl_op_kind *op, const char *attrs,
                                        const char *const *words)
{
    struct dl_error err = {0};
    void *attr = calloc(1, op->attr_size ? op->attr_size : 1);
    int rc = dl_attrs_from_string(op, attrs, attr, &err);
    free(attr);
    if (rc != DL_ERR_SPEC)
        fail_msg("%s %s: expected DL_ERR_SPEC, got %d", op->name, attrs, rc);
    ot_expect_words(err.msg, words);
}

/* infer() must reject these input shapes. */
static inline void ot_expect_infer_error(const struct dl_op_kind *op, int n_in,
                                         const struct dl_shape *in, const char *const *words)
{
    struct dl_error err = {0};
    void *attr = calloc(1, op->attr_size ? op->attr_size : 1);
    dl_attrs_defaults(op, attr);
    struct dl_shape out;
    int rc = op->infer(attr, n_in, in, &out, &err);
    free(attr);
    if (rc != DL_ERR_SPEC)
        fail_msg("%s: expected infer to fail with DL_ERR_SPEC, got %d", op->name, rc);
    ot_expect_words(err.msg, words);
}

#endif
