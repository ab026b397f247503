/* exec.c: buffer allocation, parameter initialisation, and the forward and
 * backward passes of the reference executor (see exec.h).  Backward visits
 * layers in reverse topological order; when a tensor feeds several layers,
 * the first consumer writes its gradient in place and the others write into a
 * scratch buffer that is then added, which keeps the ops' "overwrite din"
 * contract simple. */
#include "exec/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static dl_real *alloc_real(long n, struct dl_error *err)
{
    return dl_calloc((size_t)(n > 0 ? n : 1), sizeof(dl_real), err);
}

static void init_param(const struct dl_param_desc *p, dl_real *w, struct dl_rng *rng)
{
    double fan = p->fan_in > 0 ? (double)p->fan_in : 1.0;
    for (long i = 0; i < p->count; i++) {
        switch (p->init) {
        case DL_INIT_ZERO: w[i] = 0; break;
        case DL_INIT_ONE: w[i] = 1; break;
        case DL_INIT_UNIFORM_FAN_IN: {
            double bound = 1.0 / sqrt(fan);
            w[i] = (dl_real)((2.0 * dl_rng_uniform(rng) - 1.0) * bound);
            break;
        }
        case DL_INIT_HE_NORMAL: w[i] = (dl_real)(dl_rng_normal(rng) * sqrt(2.0 / fan)); break;
        }
    }
}

void dl_exec_free(struct dl_exec *e)
{
    if (!e->g)
        return;
    for (int i = 0; i < e->g->n; i++) {
        if (e->act)
            free(e->act[i]);
        if (e->grad)
            free(e->grad[i]);
        if (e->saved)
            free(e->saved[i]);
    }
    for (int k = 0; k < e->n_scratch; k++)
        free(e->scratch[k]);
    free(e->act);
    free(e->grad);
    free(e->saved);
    free(e->param);
    free(e->dparam);
    free(e->rng);
    free(e->weights);
    free(e->dweights);
    free(e->state);
    free(e->grad_ready);
    free(e->weight_begin);
    memset(e, 0, sizeof *e);
}

int dl_exec_init(struct dl_exec *e, const struct dl_graph *g, int max_batch, uint64_t seed,
                 struct dl_error *err)
{
    memset(e, 0, sizeof *e);
    e->g = g;
    e->max_batch = max_batch;
    int n = g->n;
    e->act = dl_calloc((size_t)n, sizeof *e->act, err);
    e->grad = dl_calloc((size_t)n, sizeof *e->grad, err);
    e->saved = dl_calloc((size_t)n, sizeof *e->saved, err);
    e->param = dl_calloc((size_t)n, sizeof *e->param, err);
    e->dparam = dl_calloc((size_t)n, sizeof *e->dparam, err);
    e->rng = dl_calloc((size_t)n, sizeof *e->rng, err);
    e->grad_ready = dl_calloc((size_t)n, sizeof *e->grad_ready, err);
    e->weight_begin = dl_calloc((size_t)n + 1, sizeof *e->weight_begin, err);
    if (!e->weight_begin || !e->act || !e->grad || !e->saved || !e->param || !e->dparam || !e->rng || !e->grad_ready)
        goto fail;
    long max_count = dl_shape_count(g->input);
    int max_in = 1;
    for (int i = 0; i < n; i++) {
        const struct dl_layer *l = &g->layers[i];
        long count = dl_shape_count(l->out_shape) * max_batch;
        if (dl_shape_count(l->out_shape) > max_count)
            max_count = dl_shape_count(l->out_shape);
        if (l->n_in > max_in)
            max_in = l->n_in;
        e->act[i] = alloc_real(count, err);
        e->grad[i] = alloc_real(count, err);
        long saved = l->kind->saved_size ? l->kind->saved_size(l->attr, max_batch, l->in_shape, l->out_shape) : 0;
        e->saved[i] = alloc_real(saved, err);
        if (!e->act[i] || !e->grad[i] || !e->saved[i])
            goto fail;
        for (int j = 0; j < l->n_params; j++) {
            if (l->param[j].trainable)
                e->n_weights += l->param[j].count;
            else
                e->n_state += l->param[j].count;
        }
    }
    e->n_scratch = max_in;
    for (int k = 0; k < max_in; k++)
        if (!(e->scratch[k] = alloc_real(max_count * max_batch, err)))
            goto fail;
    e->weights = alloc_real(e->n_weights, err);
    e->dweights = alloc_real(e->n_weights, err);
    e->state = alloc_real(e->n_state, err);
    if (!e->weights || !e->dweights || !e->state)
        goto fail;
    struct dl_rng init;
    dl_rng_seed(&init, seed);
    long wo = 0, so = 0;
    for (int i = 0; i < n; i++) {
        const struct dl_layer *l = &g->layers[i];
        dl_rng_seed(&e->rng[i], seed ^ (0x5bd1e995ULL * (uint64_t)(i + 1)));
        e->weight_begin[i] = wo;
        for (int j = 0; j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->trainable) {
                e->param[i][j] = e->weights + wo;
                e->dparam[i][j] = e->dweights + wo;
                wo += p->count;
            } else {
                e->param[i][j] = e->state + so;
                e->dparam[i][j] = NULL;
                so += p->count;
            }
            init_param(p, e->param[i][j], &init);
        }
    }
    e->weight_begin[n] = wo;
    return DL_OK;
fail:
    dl_exec_free(e);
    return err->code ? err->code : DL_ERR_NOMEM;
}

static void fill_call(const struct dl_exec *e, int i, struct dl_op_call *c, int training)
{
    const struct dl_layer *l = &e->g->layers[i];
    memset(c, 0, sizeof *c);
    c->attr = l->attr;
    c->batch = e->batch;
    c->n_in = l->n_in;
    for (int k = 0; k < l->n_in; k++) {
        c->in_shape[k] = l->in_shape[k];
        c->in[k] = l->in[k] == DL_GRAPH_INPUT ? e->input : e->act[l->in[k]];
    }
    c->out_shape = l->out_shape;
    c->out = e->act[i];
    for (int j = 0; j < l->n_params; j++) {
        c->param[j] = e->param[i][j];
        c->dparam[j] = e->dparam[i][j];
    }
    c->saved = e->saved[i];
    c->training = training;
    c->rng = &e->rng[i];
    c->labels = e->labels;
}

void dl_exec_forward(struct dl_exec *e, const dl_real *x, const int *labels, int batch, int training)
{
    e->input = x;
    e->labels = labels;
    e->batch = batch;
    for (int i = 0; i < e->g->n; i++) {
        struct dl_op_call c;
        fill_call(e, i, &c, training);
        e->g->layers[i].kind->forward(&c);
    }
}

void dl_exec_zero_grad(struct dl_exec *e)
{
    memset(e->dweights, 0, sizeof(dl_real) * (size_t)(e->n_weights > 0 ? e->n_weights : 1));
}

void dl_exec_backward(struct dl_exec *e)
{
    const struct dl_graph *g = e->g;
    memset(e->grad_ready, 0, sizeof *e->grad_ready * (size_t)g->n);
    /* d(mean loss)/d(per-sample loss) = 1/N */
    for (int n = 0; n < e->batch; n++)
        e->grad[g->loss][n] = (dl_real)(1.0 / e->batch);
    e->grad_ready[g->loss] = 1;
    for (int i = g->n - 1; i >= 0; i--) {
        const struct dl_layer *l = &g->layers[i];
        struct dl_op_call c;
        fill_call(e, i, &c, 1);
        c.dout = e->grad[i];
        int add_back[DL_MAX_INPUTS] = {0};
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            if (src == DL_GRAPH_INPUT) {
                c.din[k] = NULL;
            } else if (!e->grad_ready[src]) {
                c.din[k] = e->grad[src];
                e->grad_ready[src] = 1;
            } else {
                c.din[k] = e->scratch[k];
                add_back[k] = 1;
            }
        }
        l->kind->backward(&c);
        if (e->grad_hook)
            e->grad_hook(e->grad_hook_ctx, i);
        for (int k = 0; k < l->n_in; k++) {
            if (!add_back[k])
                continue;
            long count = dl_shape_count(l->in_shape[k]) * e->batch;
            dl_real *dst = e->grad[l->in[k]];
            const dl_real *s = e->scratch[k];
            for (long t = 0; t < count; t++)
                dst[t] += s[t];
        }
    }
}

double dl_exec_loss_sum(const struct dl_exec *e)
{
    double s = 0;
    for (int n = 0; n < e->batch; n++)
        s += e->act[e->g->loss][n];
    return s;
}

int dl_exec_correct(const struct dl_exec *e)
{
    const struct dl_layer *l = &e->g->layers[e->g->logits];
    long c = dl_shape_count(l->out_shape);
    const dl_real *z = e->act[e->g->logits];
    int correct = 0;
    for (int n = 0; n < e->batch; n++) {
        long best = 0;
        for (long k = 1; k < c; k++)
            if (z[n * c + k] > z[n * c + best])
                best = k;
        correct += best == e->labels[n];
    }
    return correct;
}
