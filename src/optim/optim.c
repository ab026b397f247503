/* optim.c: picks the update loops for an optimizer spec on a device (the
 * one registry of them: the host's, then the GPU's in a --with-cuda build),
 * owns the optimizer's state in that device's memory, and walks the runs
 * of a step: those weight decay leaves out, a layerwise algorithm's
 * tensors. */
#include "optim/optim.h"

#include "config.h"
#include "spec/netfile.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_CUDA)
#include "optim/cuda/optim_cuda.h"
#endif

static const struct dl_optim_algo *const algos[] = {
    &dl_optim_sgd, &dl_optim_adagrad, &dl_optim_rmsprop, &dl_optim_adam, &dl_optim_adamw, &dl_optim_lars,
    &dl_optim_lamb, &dl_optim_muon,
#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_CUDA)
    DL_CUDA_OPTIM_ALGOS
#endif
    NULL,
};

const struct dl_optim_algo *dl_optim_algo_find(enum dl_optim_kind kind, enum dl_device_kind device)
{
    for (int i = 0; algos[i]; i++)
        if (algos[i]->kind == kind && algos[i]->device == device)
            return algos[i];
    return NULL;
}

int dl_optim_state_vectors(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = dl_optim_algo_find(spec->kind, DL_DEVICE_CPU);
    return a ? a->state_vectors : -1;
}

double dl_optim_state_bytes(const struct dl_optim_spec *spec, double trainable, int blocks)
{
    int vectors = spec ? dl_optim_state_vectors(spec) : 1;
    double block = blocks > 1 ? ceil(trainable / blocks) : trainable;
    return 4.0 * (vectors > 0 ? vectors : 0) * block;
}

double dl_optim_param_bytes(const struct dl_optim_spec *spec, double trainable, double held, double gradients,
                            double state, int blocks)
{
    return 4.0 * (held + gradients + state) + dl_optim_state_bytes(spec, trainable, blocks);
}

int dl_optim_layerwise(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = dl_optim_algo_find(spec->kind, DL_DEVICE_CPU);
    return a && a->tensor_step;
}

double dl_optim_sq_sum(const dl_real *x, long n)
{
    double sum = 0;
    #pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > (1L << 16))
    for (long i = 0; i < n; i++)
        sum += (double)x[i] * (double)x[i];
    return sum;
}

int dl_optim_keeps_state(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = dl_optim_algo_find(spec->kind, DL_DEVICE_CPU);
    return a && a->state_vectors > 0 && !(a == &dl_optim_sgd && spec->momentum == 0);
}

int dl_optim_init_on(struct dl_optim *o, const struct dl_optim_spec *spec, long n, const struct dl_device *device,
                     struct dl_error *err)
{
    o->algo = dl_optim_algo_find(spec->kind, device->kernels);
    o->state = NULL;
    o->no_decay = NULL;
    o->n_no_decay = 0;
    o->tensors = NULL;
    o->n_tensors = 0;
    o->offset = 0;
    o->device = device;
    if (!o->algo)
        return dl_optim_algo_find(spec->kind, DL_DEVICE_CPU)
                   ? dl_errorf(err, DL_ERR_UNSUPPORTED, "optimizer %s has no update loops on %s in this build",
                               dl_optim_names[spec->kind], device->name)
                   : dl_errorf(err, DL_ERR_SPEC, "unknown optimizer %d", (int)spec->kind);
    o->spec = *spec;
    o->n = n;
    o->t = 0;
    size_t bytes = dl_dtype_value_size(DL_F32) * (size_t)(n > 0 ? n : 1) *
                   (size_t)(o->algo->state_vectors ? o->algo->state_vectors : 1);
    o->state = device->alloc(bytes, err);
    if (!o->state)
        return DL_ERR_NOMEM;
    int rc = device->fill(o->state, 0, bytes, err);
    if (rc)
        dl_optim_free(o);
    return rc;
}

int dl_optim_init(struct dl_optim *o, const struct dl_optim_spec *spec, long n, struct dl_error *err)
{
    return dl_optim_init_on(o, spec, n, &dl_device_host, err);
}

void dl_optim_free(struct dl_optim *o)
{
    (o->device ? o->device : &dl_device_host)->free(o->state);
    o->state = NULL;
    free(o->no_decay);
    o->no_decay = NULL;
    o->n_no_decay = 0;
    free(o->tensors);
    o->tensors = NULL;
    o->n_tensors = 0;
}

static int by_begin(const void *a, const void *b)
{
    long x = ((const struct dl_optim_span *)a)->begin, y = ((const struct dl_optim_span *)b)->begin;
    return (x > y) - (x < y);
}

/* spans[0..n) in o's own indices (shifted by its offset), sorted: *out
 * (NULL when n is 0), *kept of them; *cut counts those that [0, o->n)
 * cuts, which are cut to it (those outside it dropped). */
static int own_spans(const struct dl_optim *o, const struct dl_optim_span *spans, int n, struct dl_optim_span **out,
                     int *kept, int *cut, struct dl_error *err)
{
    *out = NULL;
    *kept = *cut = 0;
    if (n <= 0)
        return DL_OK;
    struct dl_optim_span *s = dl_calloc((size_t)n, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    for (int i = 0; i < n; i++) { /* in the optimizer's own indices: a ZeRO block's part of each */
        struct dl_optim_span c = {spans[i].begin - o->offset, spans[i].end - o->offset, spans[i].rows};
        if (spans[i].begin < 0 || spans[i].begin > spans[i].end) {
            free(s);
            return dl_errorf(err, DL_ERR_INTERNAL, "a run of weights [%ld, %ld)", spans[i].begin, spans[i].end);
        }
        int inside = c.begin < o->n && c.end > 0;
        *cut += inside && (c.begin < 0 || c.end > o->n);
        c.begin = c.begin < 0 ? 0 : c.begin;
        c.end = c.end > o->n ? o->n : c.end;
        if (c.begin < c.end)
            s[(*kept)++] = c;
    }
    qsort(s, (size_t)*kept, sizeof *s, by_begin);
    *out = s;
    return DL_OK;
}

int dl_optim_set_no_decay(struct dl_optim *o, const struct dl_optim_span *spans, int n, struct dl_error *err)
{
    free(o->no_decay);
    o->no_decay = NULL;
    o->n_no_decay = 0;
    struct dl_optim_span *s;
    int cut, rc = own_spans(o, spans, n, &s, &n, &cut, err);
    if (rc || !s)
        return rc;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && s[i].begin <= s[m - 1].end)
            s[m - 1].end = s[i].end > s[m - 1].end ? s[i].end : s[m - 1].end;
        else
            s[m++] = s[i];
    }
    o->no_decay = s;
    o->n_no_decay = m;
    return DL_OK;
}

int dl_optim_set_tensors(struct dl_optim *o, const struct dl_optim_span *spans, int n, struct dl_error *err)
{
    free(o->tensors);
    o->tensors = NULL;
    o->n_tensors = 0;
    struct dl_optim_span *s;
    int cut, rc = own_spans(o, spans, n, &s, &n, &cut, err);
    for (int i = 1; !rc && i < n; i++)
        if (s[i].begin < s[i - 1].end)
            rc = dl_errorf(err, DL_ERR_INTERNAL, "parameter tensors [%ld, %ld) and [%ld, %ld) overlap",
                           s[i - 1].begin, s[i - 1].end, s[i].begin, s[i].end);
    if (!rc && cut)
        rc = dl_errorf(err, DL_ERR_UNSUPPORTED, "%s: %d parameter tensor%s cut by this rank's block of the "
                       "weights: the trust ratio needs each whole tensor's norm", o->algo->name, cut,
                       cut == 1 ? " is" : "s are");
    if (rc) {
        free(s);
        return rc;
    }
    o->tensors = s;
    o->n_tensors = n;
    return DL_OK;
}

/* Whether [begin, end) lies in one of o's no_decay runs; *at (a cursor into
 * them, for tensors visited in order) moves on past the runs before it. */
static int left_out(const struct dl_optim *o, long begin, long end, int *at)
{
    while (*at < o->n_no_decay && o->no_decay[*at].end <= begin)
        (*at)++;
    return *at < o->n_no_decay && o->no_decay[*at].begin <= begin && end <= o->no_decay[*at].end;
}

int dl_optim_tensors_left_out(const struct dl_optim *o)
{
    int n = 0, cursor = 0;
    for (int i = 0; i < o->n_tensors; i++)
        n += left_out(o, o->tensors[i].begin, o->tensors[i].end, &cursor);
    return n;
}

/* A layerwise step: each tensor's update on its own, the gaps between
 * tensors (weights of no parameter it was told of) each one tensor. */
static int layerwise_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g)
{
    struct dl_optim_span whole = {0, o->n};
    const struct dl_optim_span *ts = o->n_tensors ? o->tensors : &whole;
    int nt = o->n_tensors ? o->n_tensors : 1, cursor = 0, rc = DL_OK;
    long at = 0;
    for (int i = 0; i <= nt && !rc; i++) {
        struct dl_optim_span gap = {at, i < nt ? ts[i].begin : o->n};
        for (int k = 0; k < 2 && !rc; k++) {
            const struct dl_optim_span *r = k ? (i < nt ? &ts[i] : NULL) : &gap;
            if (!r || r->end <= r->begin)
                continue;
            int adapt = !left_out(o, r->begin, r->end, &cursor);
            rc = o->algo->tensor_step(&o->spec, lr, o->t, w + r->begin, g + r->begin, o->state + r->begin,
                                      r->end - r->begin, o->n, adapt, r->rows);
        }
        if (i < nt)
            at = ts[i].end;
    }
    return rc;
}

int dl_optim_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g)
{
    const struct dl_device *dev = o->device ? o->device : &dl_device_host;
    o->t++;
    dl_device_work_begin(dev);
    int rc = DL_OK;
    if (o->algo->tensor_step) {
        rc = layerwise_step(o, lr, w, g);
    } else if (!o->n_no_decay || o->spec.weight_decay == 0) {
        rc = o->algo->step(&o->spec, lr, o->t, w, g, o->state, o->n, o->n);
    } else { /* runs that decay and runs that do not, in order */
        struct dl_optim_spec plain = o->spec;
        plain.weight_decay = 0;
        long at = 0;
        for (int i = 0; i <= o->n_no_decay && !rc; i++) {
            long end = i < o->n_no_decay ? o->no_decay[i].begin : o->n;
            if (end > at)
                rc = o->algo->step(&o->spec, lr, o->t, w + at, g + at, o->state + at, end - at, o->n);
            if (i < o->n_no_decay && !rc && o->no_decay[i].end > end)
                rc = o->algo->step(&plain, lr, o->t, w + end, g + end, o->state + end, o->no_decay[i].end - end,
                                   o->n);
            if (i < o->n_no_decay)
                at = o->no_decay[i].end;
        }
    }
    dl_device_work_end(dev);
    return rc;
}
