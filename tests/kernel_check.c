/* kernel_check.c: see kernel_check.h.  A kernel runs on its own device
 * (kernel.h's device, backends/device.h): its buffers are copies of the
 * host's, made and read back through that device's table, so the host's
 * kernels and a GPU's go through the same steps. */
#include "kernel_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

double kc_rel_err(const float *a, const float *b, long n)
{
    double num = 0, den = 1e-30;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d)
            num = d;
        if (fabs(b[i]) > den)
            den = fabs(b[i]);
    }
    return num / den;
}

void kc_fill(float *v, long n, uint64_t seed)
{
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    for (long i = 0; i < n; i++)
        v[i] = (float)dl_rng_normal(&r);
}

void kc_fill_ids(float *v, long n, int limit, uint64_t seed)
{
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    for (long i = 0; i < n; i++) {
        int32_t id = (int32_t)dl_rng_below(&r, (uint64_t)limit);
        memcpy(&v[i], &id, sizeof id);
    }
}

static float *vec(long n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(float));
}

long kc_positions(const struct dl_layer *l)
{
    return l->kind->is_loss && dl_shape_rank(l->in_shape[0]) == 2 ? l->in_shape[0].h : 1;
}

void kc_alloc(struct kc_tensors *t, const struct dl_layer *l, int batch, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    if (l->n_params > TEST_MAX_PARAMS) {
        fprintf(stderr, "layer '%s': %d parameters, more than the tests' %d\n", l->name, l->n_params, TEST_MAX_PARAMS);
        abort();
    }
    t->batch = batch;
    for (int i = 0; i < l->n_in; i++) {
        long n = batch * dl_shape_count(l->in_shape[i]);
        t->x[i] = vec(n);
        t->dx[i] = vec(n);
        if (l->in_shape[i].dtype == DL_I32) /* token ids (4-byte elements holding i32), below the kind's limit */
            kc_fill_ids(t->x[i], n, l->kind->id_limit(l->attr), seed + (uint64_t)i);
        else
            kc_fill(t->x[i], n, seed + (uint64_t)i);
    }
    if (l->kind->is_loss) {
        struct dl_rng r;
        dl_rng_seed(&r, seed + 400);
        long P = kc_positions(l);
        t->labels = calloc((size_t)(batch * P), sizeof *t->labels);
        for (long n = 0; n < batch * P; n++) /* a sequence's every 7th position ignored (ignore_index) */
            t->labels[n] = P > 1 && n % 7 == 3 ? -100 : (int)dl_rng_below(&r, (uint64_t)l->in_shape[0].c);
    }
    long ny = batch * dl_shape_count(l->out_shape);
    t->y = vec(ny);
    t->dy = vec(ny);
    kc_fill(t->dy, ny, seed + 100);
    for (int j = 0; j < l->n_params; j++) {
        long n = l->param[j].count;
        t->param[j] = vec(n);
        kc_fill(t->param[j], n, seed + 200 + (uint64_t)j);
        if (strcmp(l->param[j].name, "running_var") == 0)
            for (long i = 0; i < n; i++)
                t->param[j][i] = 0.5f + fabsf(t->param[j][i]);
        if (l->param[j].trainable) {
            t->dparam[j] = vec(n);
            kc_fill(t->dparam[j], n, seed + 300 + (uint64_t)j);
        }
    }
}

void kc_free(struct kc_tensors *t, const struct dl_layer *l)
{
    for (int i = 0; i < l->n_in; i++) {
        free(t->x[i]);
        free(t->dx[i]);
    }
    free(t->y);
    free(t->dy);
    free(t->labels);
    for (int j = 0; j < l->n_params; j++) {
        free(t->param[j]);
        free(t->dparam[j]);
    }
}

/* A buffer of n samples of s in layout lo holding plain src, or, for a
 * kernel's output, NaN everywhere: forward and backward_data overwrite their
 * outputs (kernel.h), so a value left unwritten shows as NaN; in training the
 * arena hands out buffers holding what earlier layers left. */
static float *to_layout(const float *src, enum dl_layout lo, int n, struct dl_shape s)
{
    long count = (long)n * dl_layout_count(lo, s);
    float *d = vec(count);
    if (src)
        dl_layout_reorder(src, DL_LAYOUT_PLAIN, d, lo, n, s, 0);
    else
        for (long i = 0; i < count; i++)
            d[i] = NAN;
    return d;
}

int kc_run(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb)
{
    return kc_run_offered(k, l, t, mb, DL_LAYOUT_PLAIN);
}

int kc_run_offered(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                   enum dl_layout offer)
{
    return kc_run_fused(k, l, t, mb, offer, 0);
}

/* The buffers of one run on the kernel's device: each a copy of a host
 * buffer, copied back after the run where the kernel writes. */
struct kc_device_bufs {
    const struct dl_device *dev;
    int n, failed;
    void *p[3 * DL_MAX_INPUTS + 2 * TEST_MAX_PARAMS + 8];
};

/* bytes on the device holding host's bytes (zeros when host is NULL). */
static void *on_device(struct kc_device_bufs *b, const void *host, size_t bytes)
{
    struct dl_error err = {0};
    void *p = b->dev->alloc(bytes, &err);
    if (!p || (host ? b->dev->copy(p, host, bytes, DL_COPY_TO_DEVICE, &err) : b->dev->fill(p, 0, bytes, &err))) {
        b->failed = 1;
        b->dev->free(p);
        return NULL;
    }
    return b->p[b->n++] = p;
}

static void to_host(struct kc_device_bufs *b, void *host, const void *dev, size_t bytes)
{
    struct dl_error err = {0};
    if (host && dev && b->dev->copy(host, dev, bytes, DL_COPY_TO_HOST, &err))
        b->failed = 1;
}

int kc_run_fused(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                 enum dl_layout offer, int relu)
{
    struct dl_error err = {0};
    struct kc_device_bufs b = {.dev = dl_device_get(k->device)};
    if (!b.dev)
        return DL_ERR_UNSUPPORTED;
    struct dl_kernel_config cfg = {.mb = mb, .relu = relu};
    enum dl_layout offered[DL_MAX_INPUTS] = {offer};
    dl_kernel_layouts(k, l, offered, cfg.in, &cfg.out);
    void *inst = NULL;
    int rc = dl_kernel_create(k, l, &cfg, &inst, &err);
    if (rc)
        return rc;
    size_t ws_bytes = dl_kernel_workspace_max(k, inst), saved_bytes = dl_kernel_saved_bytes(k, inst);
    int slices = t->batch / mb;
    unsigned char *ws = on_device(&b, NULL, ws_bytes), *saved = on_device(&b, NULL, (size_t)slices * saved_bytes);
    float *x[DL_MAX_INPUTS] = {0}, *dx[DL_MAX_INPUTS] = {0}, *xd[DL_MAX_INPUTS] = {0}, *dxd[DL_MAX_INPUTS] = {0};
    size_t xbytes[DL_MAX_INPUTS] = {0};
    for (int i = 0; i < l->n_in; i++) {
        x[i] = to_layout(t->x[i], cfg.in[i], t->batch, l->in_shape[i]);
        dx[i] = to_layout(NULL, cfg.in[i], t->batch, l->in_shape[i]);
        xbytes[i] = sizeof(float) * (size_t)t->batch * (size_t)dl_layout_count(cfg.in[i], l->in_shape[i]);
        xd[i] = on_device(&b, x[i], xbytes[i]);
        dxd[i] = on_device(&b, dx[i], xbytes[i]);
    }
    float *y = to_layout(NULL, cfg.out, t->batch, l->out_shape);
    float *dy = to_layout(t->dy, cfg.out, t->batch, l->out_shape);
    long ycount = dl_layout_count(cfg.out, l->out_shape);
    size_t ybytes = sizeof(float) * (size_t)t->batch * (size_t)ycount;
    float *yd = on_device(&b, y, ybytes), *dyd = on_device(&b, dy, ybytes);
    long P = kc_positions(l);
    const int *labels = t->labels ? on_device(&b, t->labels, sizeof *t->labels * (size_t)(t->batch * P)) : NULL;
    float *param[TEST_MAX_PARAMS] = {0}, *dparam[TEST_MAX_PARAMS] = {0};
    for (int j = 0; j < l->n_params; j++) {
        size_t bytes = sizeof(float) * (size_t)l->param[j].count;
        param[j] = on_device(&b, t->param[j], bytes);
        dparam[j] = t->dparam[j] ? on_device(&b, t->dparam[j], bytes) : NULL;
    }
    /* a loss's divisor over the slices: the whole batch's labelled positions
     * a sample, as the trainer gives it (op.h's label_norm) */
    double label_norm = 0;
    int ignored;
    if (t->labels && l->kind->ignored_label && l->kind->ignored_label(l->attr, &ignored)) {
        long labelled = 0;
        for (long i = 0; i < t->batch * P; i++)
            labelled += t->labels[i] != ignored;
        label_norm = (double)labelled / t->batch;
    }
    struct dl_kernel_fault fault = {0};
    enum dl_dir fault_dir = DL_DIR_FORWARD;
    for (int pass = 0; pass < 2 && !b.failed; pass++)
        for (int sl = 0; sl < slices && !fault.failed; sl++) {
            struct dl_kernel_args a;
            memset(&a, 0, sizeof a);
            struct dl_op_call *c = &a.c;
            c->attr = l->attr;
            c->batch = mb;
            c->n_in = l->n_in;
            for (int i = 0; i < l->n_in; i++) {
                long cnt = dl_layout_count(cfg.in[i], l->in_shape[i]);
                c->in[i] = dl_tensor_of(xd[i] + (long)sl * mb * cnt, l->in_shape[i]);
                c->din[i] = dl_tensor_of(dxd[i] + (long)sl * mb * cnt, l->in_shape[i]);
            }
            c->out = dl_tensor_of(yd + (long)sl * mb * ycount, l->out_shape);
            c->dout = dl_tensor_of(dyd + (long)sl * mb * ycount, l->out_shape);
            c->param = param;
            c->dparam = dparam;
            c->saved = (float *)(saved + (size_t)sl * saved_bytes);
            c->labels = labels ? labels + (long)sl * mb * P : NULL;
            c->doc_start = t->doc_start ? t->doc_start + (long)sl * mb * l->out_shape.h : NULL; /* host memory */
            c->label_norm = label_norm;
            c->training = 1;
            c->key = KC_KEY; /* dropout's mask: the whole batch's, whatever the slices */
            c->sample0 = (long)sl * mb;
            a.workspace = ws;
            a.fault = &fault;
            for (int d = pass ? DL_DIR_BACKWARD_DATA : DL_DIR_FORWARD; d <= (pass ? DL_DIR_BACKWARD_WEIGHTS : DL_DIR_FORWARD)
                 && !fault.failed; d++) {
                dl_kernel_run(k, inst, &a, (enum dl_dir)d, l->n_params > 0, 1);
                fault_dir = (enum dl_dir)d;
            }
        }
    to_host(&b, y, yd, ybytes);
    for (int j = 0; j < l->n_params; j++) { /* training updates running statistics; gradients accumulate */
        to_host(&b, t->param[j], param[j], sizeof(float) * (size_t)l->param[j].count);
        to_host(&b, t->dparam[j], dparam[j], sizeof(float) * (size_t)l->param[j].count);
    }
    dl_layout_reorder(y, cfg.out, t->y, DL_LAYOUT_PLAIN, t->batch, l->out_shape, 0);
    for (int i = 0; i < l->n_in; i++) {
        to_host(&b, dx[i], dxd[i], xbytes[i]);
        dl_layout_reorder(dx[i], cfg.in[i], t->dx[i], DL_LAYOUT_PLAIN, t->batch, l->in_shape[i], 0);
        free(x[i]);
        free(dx[i]);
    }
    free(y);
    free(dy);
    for (int i = 0; i < b.n; i++)
        b.dev->free(b.p[i]);
    k->destroy(inst);
    if (fault.failed) {
        rc = dl_kernel_fault_error(&fault, l, fault_dir, &err);
        fprintf(stderr, "# %s\n", err.msg);
        return rc;
    }
    return b.failed ? DL_ERR_NOMEM : DL_OK;
}

#ifdef TEST_ON_CUDA
struct kc_device_bufs *kc_device_bufs_new(const struct dl_kernel *k)
{
    struct kc_device_bufs *b = calloc(1, sizeof *b);
    if (b)
        b->dev = dl_device_get(k->device);
    if (b && !b->dev) {
        free(b);
        return NULL;
    }
    return b;
}

void *kc_device_copy(struct kc_device_bufs *b, const void *host, size_t bytes)
{
    if (b->n == (int)(sizeof b->p / sizeof b->p[0])) {
        b->failed = 1;
        return NULL;
    }
    return on_device(b, host, bytes);
}

void kc_device_read(struct kc_device_bufs *b, void *host, const void *dev, size_t bytes)
{
    to_host(b, host, dev, bytes);
}

int kc_device_release(struct kc_device_bufs *b)
{
    int rc = b->failed ? DL_ERR_NOMEM : DL_OK;
    for (int i = 0; i < b->n; i++)
        b->dev->free(b->p[i]);
    free(b);
    return rc;
}
#endif
