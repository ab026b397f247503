/* measure.c: times one kernel on one layer for one micro-batch size, every
 * direction asked for: buffers of random values in the layouts the kernel
 * negotiates from plain inputs, one forward first (kernel state for the
 * backward passes), then for each direction warm-up calls and the median of
 * the timed ones.  Kernels are called through kernel.h; the buffers are
 * allocated on the kernel's device and filled by copies from the host, and
 * each call is timed between two marks of that device's clock (device.h:
 * the host's monotonic clock, CUDA events on a GPU), so a device kernel is
 * timed by what the device ran, not by when the host queued it. */
#include "tune/tune_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/device.h"
#include "core/clock.h"
#include "core/rng.h"

/* The buffers of one measurement on one device, in one list so they are
 * freed together. */
struct bufs {
    const struct dl_device *dev;
    int n;
    void **p;         /* room for 3 a layer's input, 2 a parameter and 8 more */
    dl_real **params; /* the call's param and dparam arrays */
};

/* bytes on the device: uniform values in [-0.1, 0.1) when fill, else zeros. */
static void *buf(struct bufs *b, size_t bytes, struct dl_rng *r, int fill)
{
    struct dl_error err = {0};
    void *p = b->dev->alloc(bytes, &err);
    if (!p)
        return NULL;
    b->p[b->n++] = p;
    if (!fill)
        return b->dev->fill(p, 0, bytes, &err) ? NULL : p;
    size_t n = bytes / dl_dtype_value_size(DL_F32);
    dl_real *x = malloc(n ? n * sizeof *x : 1);
    if (!x)
        return NULL;
    for (size_t i = 0; i < n; i++)
        x[i] = (dl_real)(0.1 * (2.0 * dl_rng_uniform(r) - 1.0));
    int rc = b->dev->copy(p, x, n * sizeof *x, DL_COPY_TO_DEVICE, &err);
    free(x);
    return rc ? NULL : p;
}

/* Shape s as kernel k stores it (its dtype: dl_kernel_tensor_dtype). */
static struct dl_shape kernel_shape(const struct dl_kernel *k, struct dl_shape s)
{
    s.dtype = dl_kernel_tensor_dtype(k, s);
    return s;
}

static int fill_args(const struct dl_kernel *k, const struct dl_layer *l, const struct dl_kernel_config *cfg,
                     size_t saved, size_t ws, struct bufs *b, struct dl_rng *r, struct dl_kernel_args *a)
{
    struct dl_op_call *c = &a->c;
    size_t real = dl_dtype_value_size(DL_F32), mb = (size_t)cfg->mb;
    c->attr = l->attr;
    c->batch = cfg->mb;
    c->n_in = l->n_in;
    c->out = dl_tensor_of(NULL, kernel_shape(k, l->out_shape));
    c->dout = c->out;
    int ok = 1;
    for (int j = 0; j < l->n_in; j++) {
        size_t n = mb * (size_t)dl_layout_count(cfg->in[j], l->in_shape[j]) * real;
        c->in[j].shape = c->din[j].shape = kernel_shape(k, l->in_shape[j]);
        ok &= (c->in[j].data = buf(b, n, r, 1)) != NULL;
        ok &= (c->din[j].data = buf(b, n, r, 0)) != NULL;
    }
    size_t n = mb * (size_t)dl_layout_count(cfg->out, l->out_shape) * real;
    ok &= (c->out.data = buf(b, n, r, 0)) != NULL;
    ok &= (c->dout.data = buf(b, n, r, 1)) != NULL;
    c->param = b->params;
    c->dparam = b->params + l->n_params;
    for (int j = 0; j < l->n_params; j++) {
        ok &= (c->param[j] = buf(b, (size_t)l->param[j].count * real, r, 1)) != NULL;
        ok &= (c->dparam[j] = l->param[j].trainable ? buf(b, (size_t)l->param[j].count * real, r, 0) : NULL) ||
              !l->param[j].trainable;
    }
    ok &= (c->saved = buf(b, saved, r, 0)) != NULL;
    ok &= (a->workspace = buf(b, ws, r, 0)) != NULL;
    c->training = 1;
    return ok;
}

/* Seconds of one call of direction dir, between two marks of the device's
 * clock; NAN when the clock fails. */
static double timed_call(const struct dl_device *dev, struct dl_device_mark m[2], const struct dl_kernel *k,
                         void *inst, const struct dl_kernel_args *a, enum dl_dir dir, int has_params)
{
    struct dl_error err = {0};
    double t = NAN;
    if (dev->mark_record(&m[0], &err))
        return NAN;
    dl_kernel_run(k, inst, a, dir, has_params, 1);
    if (dev->mark_record(&m[1], &err) || dev->mark_elapsed(&m[0], &m[1], &t, &err))
        return NAN;
    return t;
}

int dl_tune_measure(const struct dl_kernel *k, const struct dl_layer *l, int mb, const int want[DL_N_DIRS],
                    int warmup, int repeats, size_t ws_cap, struct dl_tune_row row[DL_N_DIRS], struct dl_error *err)
{
    struct dl_kernel_config cfg;
    void *inst;
    int rc = dl_kernel_create_plain(k, l, mb, &cfg, &inst, err);
    if (rc)
        return rc;
    size_t ws = 0, saved = dl_kernel_saved_bytes(k, inst);
    for (int d = 0; d < DL_N_DIRS; d++) {
        row[d] = (struct dl_tune_row){.time_s = 0, .saved = saved};
        row[d].ws = dl_kernel_workspace_bytes(k, inst, (enum dl_dir)d);
        if (want[d] && row[d].ws > ws)
            ws = row[d].ws;
    }
    if (ws > ws_cap) {
        for (int d = 0; d < DL_N_DIRS; d++)
            row[d].time_s = NAN;
        k->destroy(inst);
        return DL_OK;
    }
    struct bufs b = {.dev = dl_device_get(k->device)};
    if (!b.dev) {
        k->destroy(inst);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "kernel %s runs on %s, which this build lacks", k->name,
                         dl_device_names[k->device]);
    }
    b.p = dl_calloc((size_t)(3 * l->n_in + 2 * l->n_params + 8), sizeof *b.p, err);
    b.params = b.p ? dl_calloc((size_t)(2 * l->n_params + 1), sizeof *b.params, err) : NULL;
    if (!b.params) {
        free(b.p);
        k->destroy(inst);
        return DL_ERR_NOMEM;
    }
    struct dl_device_mark marks[2];
    rc = b.dev->mark_init(&marks[0], err);
    if (!rc && (rc = b.dev->mark_init(&marks[1], err)) != DL_OK)
        b.dev->mark_release(&marks[0]);
    if (rc) {
        k->destroy(inst);
        return rc;
    }
    struct dl_rng r;
    dl_rng_seed(&r, 12345);
    struct dl_kernel_args a;
    memset(&a, 0, sizeof a);
    a.c.key = 12345;
    struct dl_kernel_fault fault = {0}; /* a failed call: an error, not a time */
    a.fault = &fault;
    double t[64];
    if (repeats > 64)
        repeats = 64;
    if (!fill_args(k, l, &cfg, saved, ws, &b, &r, &a)) {
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory measuring layer '%s' (kernel %s, %d samples)", l->name,
                       k->name, mb);
    } else {
        k->forward(inst, &a);
        rc = dl_kernel_fault_error(&fault, l, DL_DIR_FORWARD, err);
        int has_params = l->n_params > 0;
        for (int d = 0; d < DL_N_DIRS && !rc; d++) { /* every input gradient wanted (fill_args) */
            enum dl_dir dir = (enum dl_dir)d;
            if (!want[d] || !dl_kernel_runs(k, dir, has_params, 1))
                continue;
            for (int i = 0; i < warmup; i++)
                dl_kernel_run(k, inst, &a, dir, has_params, 1);
            int n = 0;
            for (double spent = 0; n < repeats; n++) {
                t[n] = timed_call(b.dev, marks, k, inst, &a, dir, has_params);
                if (isnan(t[n])) {
                    rc = dl_errorf(err, DL_ERR_INTERNAL, "the %s clock failed timing layer '%s' (kernel %s)",
                                   b.dev->name, l->name, k->name);
                    break;
                }
                spent += t[n];
                if (n >= 2 && spent > 1.0) /* slow calls: three are enough for a median */
                    break;
            }
            if (rc || (rc = dl_kernel_fault_error(&fault, l, dir, err)) != DL_OK)
                break;
            n += n < repeats;
            row[d].time_s = dl_median(t, n);
        }
    }
    for (int i = 0; i < b.n; i++)
        b.dev->free(b.p[i]);
    free(b.p);
    free(b.params);
    b.dev->mark_release(&marks[0]);
    b.dev->mark_release(&marks[1]);
    k->destroy(inst);
    return rc;
}
