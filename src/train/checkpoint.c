/* checkpoint.c: the run state <-> safetensors mapping (see checkpoint.h).
 * One list of entries (name, dtype, shape, where the values live) is built
 * from the graph, the executor and the optimizer; saving writes it, loading
 * checks the file against it and then copies every entry back. */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/safetensors.h"

_Static_assert(sizeof(struct dl_rng) == 4 * sizeof(uint64_t), "rng.layers stores dl_rng as 4 x U64");

/* Per-weight state vectors of each optimizer, named as in torch.optim's
 * state_dict, in the order the algorithm keeps them (optim/<algo>.c). */
static const struct {
    const char *algo;
    const char *slot[3];
} slot_names[] = {
    {"sgd", {"momentum_buffer"}},
    {"adagrad", {"sum"}},
    {"rmsprop", {"square_avg", "momentum_buffer"}},
    {"adam", {"exp_avg", "exp_avg_sq"}},
    {"adamw", {"exp_avg", "exp_avg_sq"}},
};

static void slot_name(const struct dl_optim_algo *a, int k, char *buf, size_t n)
{
    for (size_t i = 0; i < sizeof slot_names / sizeof slot_names[0]; i++)
        if (!strcmp(slot_names[i].algo, a->name) && k < 3 && slot_names[i].slot[k]) {
            snprintf(buf, n, "%s", slot_names[i].slot[k]);
            return;
        }
    snprintf(buf, n, "state%d", k);
}

struct entry {
    char name[256];
    enum dl_st_dtype dtype;
    int ndim;
    int64_t shape[DL_ST_MAX_DIMS];
    void *data;
    int optional; /* a layer's counter (op.h): a checkpoint written before it existed lacks it (left as it is) */
};

#define REAL_DTYPE (sizeof(dl_real) == 4 ? DL_ST_F32 : DL_ST_F64)

static int add(struct entry *list, int *n, enum dl_st_dtype dtype, int ndim, const int64_t *shape, void *data,
               struct dl_error *err, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static int add(struct entry *list, int *n, enum dl_st_dtype dtype, int ndim, const int64_t *shape, void *data,
               struct dl_error *err, const char *fmt, ...)
{
    struct entry *e = &list[(*n)++];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof e->name)
        return dl_errorf(err, DL_ERR_SPEC, "tensor name '%.100s...' longer than %zu characters", e->name,
                         sizeof e->name - 1);
    e->dtype = dtype;
    e->ndim = ndim;
    memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
    e->data = data;
    return DL_OK;
}

/* Every tensor of the run: parameters and state, optimizer slots, RNGs. */
static int build_entries(const struct dl_run_view *v, struct entry **out, int *count, struct dl_error *err)
{
    const struct dl_graph *g = v->g;
    const struct dl_exec *e = v->exec;
    int slots = v->optim ? v->optim->algo->state_vectors : 0;
    int cap = 1;
    for (int i = 0; i < g->n; i++)
        cap += g->layers[i].n_params * (1 + slots);
    struct entry *list = dl_calloc((size_t)cap, sizeof *list, err);
    if (!list)
        return DL_ERR_NOMEM;
    int n = 0, rc = DL_OK;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (int i = 0; i < g->n && !rc; i++) {
            const struct dl_layer *l = &g->layers[i];
            for (int j = 0; j < l->n_params && !rc; j++) {
                const struct dl_param_desc *p = &l->param[j];
                if (p->shares) /* tied: saved once, under the owner's name */
                    continue;
                int64_t shape[DL_ST_MAX_DIMS];
                for (int d = 0; d < p->ndim; d++)
                    shape[d] = p->dims[d];
                if (pass == 0) {
                    rc = add(list, &n, p->dtype == DL_I64 ? DL_ST_I64 : REAL_DTYPE, p->ndim, shape, e->param[i][j],
                             err, "%s.%s", l->name, p->name);
                    if (!rc)
                        list[n - 1].optional = p->dtype == DL_I64;
                    continue;
                }
                if (!p->trainable)
                    continue;
                long off = (long)(e->param[i][j] - e->weights);
                for (int k = 0; k < slots && !rc; k++) {
                    char slot[32];
                    slot_name(v->optim->algo, k, slot, sizeof slot);
                    rc = add(list, &n, REAL_DTYPE, p->ndim, shape, v->optim->state + (long)k * v->optim->n + off,
                             err, "optim.%s.%s.%s", l->name, p->name, slot);
                }
            }
        }
    }
    int64_t rshape[2] = {g->n, 4};
    if (!rc)
        rc = add(list, &n, DL_ST_U64, 2, rshape, e->rng, err, "rng.layers");
    if (rc) {
        free(list);
        return rc;
    }
    *out = list;
    *count = n;
    return DL_OK;
}

int dl_checkpoint_save(const char *path, const struct dl_run_view *v, const struct dl_checkpoint_meta *meta,
                       struct dl_error *err)
{
    if (v->optim && v->optim->n != v->exec->n_weights)
        return dl_errorf(err, DL_ERR_INTERNAL, "%s: optimizer over %ld weights, executor has %ld", path,
                         v->optim->n, v->exec->n_weights);
    struct entry *list;
    int n, rc = build_entries(v, &list, &n, err);
    if (rc)
        return rc;
    struct dl_st_tensor *t = dl_calloc((size_t)n, sizeof *t, err);
    if (!t) {
        free(list);
        return DL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        t[i] = (struct dl_st_tensor){.name = list[i].name, .dtype = list[i].dtype, .ndim = list[i].ndim,
                                     .data = list[i].data};
        memcpy(t[i].shape, list[i].shape, sizeof t[i].shape);
    }
    char val[15][64];
    const char *keys[15] = {"format", "step", "epoch", "epoch_step", "seed", "epoch_loss_sum", "epoch_seen",
                            "epoch_correct", "net_crc32", "world_size", "dp", "tp", "pp", "optimizer",
                            "optimizer_step"};
    snprintf(val[0], sizeof val[0], "%s", DL_CHECKPOINT_FORMAT);
    snprintf(val[1], sizeof val[1], "%ld", meta->global_step);
    snprintf(val[2], sizeof val[2], "%ld", meta->epoch);
    snprintf(val[3], sizeof val[3], "%ld", meta->step);
    snprintf(val[4], sizeof val[4], "%" PRIu64, meta->seed);
    snprintf(val[5], sizeof val[5], "%.17g", meta->epoch_loss_sum);
    snprintf(val[6], sizeof val[6], "%ld", meta->epoch_seen);
    snprintf(val[7], sizeof val[7], "%ld", meta->epoch_correct);
    snprintf(val[8], sizeof val[8], "%08" PRIx32, meta->net_crc32);
    snprintf(val[9], sizeof val[9], "%d", meta->world_size);
    snprintf(val[10], sizeof val[10], "%d", meta->dp);
    snprintf(val[11], sizeof val[11], "%d", meta->tp);
    snprintf(val[12], sizeof val[12], "%d", meta->pp);
    snprintf(val[13], sizeof val[13], "%s", v->optim ? v->optim->algo->name : "");
    snprintf(val[14], sizeof val[14], "%ld", v->optim ? v->optim->t : 0L);
    struct dl_st_meta md[15];
    for (int i = 0; i < 15; i++)
        md[i] = (struct dl_st_meta){keys[i], val[i]};
    rc = dl_st_write(path, t, n, md, 15, err);
    free(t);
    free(list);
    return rc;
}

/* ---------------------------------------------------------------- loading */

static int meta_long(const struct dl_st_file *f, const char *key, long min, long max, long *out,
                     struct dl_error *err)
{
    const char *s = dl_st_meta_get(f, key);
    if (!s)
        return dl_errorf(err, DL_ERR_DATA, "%s: not a dltrain checkpoint: metadata '%s' is missing", f->name, key);
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < min || x > max)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata '%s': expected an integer in %ld..%ld, found '%.40s'",
                         f->name, key, min, max, s);
    *out = (long)x;
    return DL_OK;
}

static int parse_meta(const struct dl_st_file *f, struct dl_checkpoint_meta *m, struct dl_error *err)
{
    memset(m, 0, sizeof *m);
    const char *fmt = dl_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, DL_CHECKPOINT_FORMAT) != 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: not a dltrain checkpoint: metadata 'format' is '%.40s', "
                         "expected '%s'", f->name, fmt ? fmt : "(missing)", DL_CHECKPOINT_FORMAT);
    if (!f->has_checksum)
        return dl_errorf(err, DL_ERR_DATA, "%s: the checksum (metadata '%s') is missing", f->name,
                         DL_ST_CHECKSUM_KEY);
    long world = 0, dp = 0, tp = 0, pp = 0, crc = 0;
    int rc = meta_long(f, "step", 0, LONG_MAX, &m->global_step, err);
    if (!rc)
        rc = meta_long(f, "epoch", 0, INT_MAX, &m->epoch, err);
    if (!rc)
        rc = meta_long(f, "epoch_step", 0, LONG_MAX, &m->step, err);
    if (!rc)
        rc = meta_long(f, "epoch_seen", 0, LONG_MAX, &m->epoch_seen, err);
    if (!rc)
        rc = meta_long(f, "epoch_correct", 0, LONG_MAX, &m->epoch_correct, err);
    if (!rc)
        rc = meta_long(f, "world_size", 0, INT_MAX, &world, err);
    if (!rc)
        rc = meta_long(f, "dp", 0, INT_MAX, &dp, err);
    if (!rc)
        rc = meta_long(f, "tp", 0, INT_MAX, &tp, err);
    if (!rc)
        rc = meta_long(f, "pp", 0, INT_MAX, &pp, err);
    if (!rc)
        rc = meta_long(f, "optimizer_step", 0, LONG_MAX, &m->optimizer_step, err);
    if (rc)
        return rc;
    m->world_size = (int)world;
    m->dp = (int)dp;
    m->tp = (int)tp;
    m->pp = (int)pp;
    const char *s = dl_st_meta_get(f, "seed"), *l = dl_st_meta_get(f, "epoch_loss_sum"),
               *h = dl_st_meta_get(f, "net_crc32"), *o = dl_st_meta_get(f, "optimizer");
    char *end;
    errno = 0;
    unsigned long long seed = s && *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *s == '-' || *end || errno)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'seed': expected an unsigned integer, found '%.40s'",
                         f->name, s ? s : "(missing)");
    m->seed = seed;
    m->epoch_loss_sum = l ? strtod(l, &end) : 0;
    if (!l || !*l || *end || !isfinite(m->epoch_loss_sum))
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'epoch_loss_sum': expected a finite number, found '%.40s'",
                         f->name, l ? l : "(missing)");
    crc = h && strlen(h) == 8 ? (long)strtoul(h, &end, 16) : -1;
    if (crc < 0 || *end)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'net_crc32': expected 8 hex digits, found '%.40s'",
                         f->name, h ? h : "(missing)");
    m->net_crc32 = (uint32_t)crc;
    if (!o || strlen(o) >= sizeof m->optimizer)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'optimizer' is missing or too long", f->name);
    snprintf(m->optimizer, sizeof m->optimizer, "%s", o);
    return DL_OK;
}

static int out_of_range(const char *name, const char *key, long x, long lo, long hi, const char *why,
                        struct dl_error *err)
{
    return dl_errorf(err, DL_ERR_DATA, "%s: metadata '%s': expected %ld..%ld (%s), found %ld", name, key, lo, hi,
                     why, x);
}

int dl_checkpoint_meta_check(const char *name, const struct dl_checkpoint_meta *m,
                             const struct dl_checkpoint_limits *lim, struct dl_error *err)
{
    const struct dl_checkpoint_limits none = {0};
    if (!lim)
        lim = &none;
    char why[160];
    if (m->step > m->global_step)
        return out_of_range(name, "epoch_step", m->step, 0, m->global_step, "at most the run's step", err);
    if (m->epoch > m->global_step)
        return out_of_range(name, "epoch", m->epoch, 0, m->global_step, "each epoch took a step", err);
    if (lim->steps_per_epoch > 0 && m->step > lim->steps_per_epoch) {
        snprintf(why, sizeof why, "the steps of an epoch of this run's data");
        return out_of_range(name, "epoch_step", m->step, 0, lim->steps_per_epoch, why, err);
    }
    if (lim->epoch_samples > 0 && m->epoch_seen > lim->epoch_samples)
        return out_of_range(name, "epoch_seen", m->epoch_seen, 0, lim->epoch_samples,
                            "the samples of an epoch of this run's data", err);
    long positions = lim->positions > 0 ? lim->positions : 1;
    long most = m->epoch_seen > LONG_MAX / positions ? LONG_MAX : m->epoch_seen * positions;
    if ((lim->positions > 0 || m->epoch_seen == 0) && m->epoch_correct > most) {
        snprintf(why, sizeof why, "epoch_seen %ld x %ld label%s per sample", m->epoch_seen, positions,
                 positions == 1 ? "" : "s");
        return out_of_range(name, "epoch_correct", m->epoch_correct, 0, most, why, err);
    }
    if (m->epoch_seen == 0 && m->epoch_loss_sum != 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'epoch_loss_sum': expected 0 (epoch_seen is 0), found %g",
                         name, m->epoch_loss_sum);
    if (m->world_size > 0) {
        const char *key[3] = {"dp", "tp", "pp"};
        long v[3] = {m->dp, m->tp, m->pp}, product = 1;
        for (int i = 0; i < 3; i++) {
            if (v[i] > m->world_size)
                return out_of_range(name, key[i], v[i], 0, m->world_size, "at most world_size", err);
            product *= v[i] > 0 ? v[i] : 1; /* < 2^62: each factor and each product <= world_size */
            if (product > m->world_size)
                return dl_errorf(err, DL_ERR_DATA, "%s: metadata 'dp', 'tp', 'pp': expected a product of at most "
                                 "world_size %d, found %d x %d x %d", name, m->world_size, m->dp, m->tp, m->pp);
        }
    }
    if (!m->optimizer[0] && m->optimizer_step != 0)
        return out_of_range(name, "optimizer_step", m->optimizer_step, 0, 0, "no optimizer was saved", err);
    return DL_OK;
}

long dl_checkpoint_first_nonfinite(const struct dl_st_entry *t, double *value)
{
    const unsigned char *p = t->data;
    for (uint64_t i = 0; i < t->count && (t->dtype == DL_ST_F32 || t->dtype == DL_ST_F64); i++) {
        double x;
        if (t->dtype == DL_ST_F32) { /* the mapped file need not align it */
            float f;
            memcpy(&f, p + 4 * i, 4);
            x = f;
        } else {
            memcpy(&x, p + 8 * i, 8);
        }
        if (!isfinite(x)) {
            *value = x;
            return (long)i;
        }
    }
    return -1;
}

static int same_shape(const struct dl_st_entry *t, const struct entry *e)
{
    if (t->ndim != e->ndim)
        return 0;
    for (int d = 0; d < e->ndim; d++)
        if (t->shape[d] != e->shape[d])
            return 0;
    return 1;
}

/* Checks the file against the run's entries; copies nothing. */
static int check_tensors(const struct dl_st_file *f, const struct dl_run_view *v, const struct dl_checkpoint_meta *m,
                         const struct entry *list, int n, struct dl_error *err)
{
    const char *run_opt = v->optim ? v->optim->algo->name : NULL;
    if (run_opt && strcmp(run_opt, m->optimizer) != 0)
        return dl_errorf(err, DL_ERR_SPEC, "%s: optimizer state is for '%s', this run uses '%s'", f->name,
                         m->optimizer[0] ? m->optimizer : "(none)", run_opt);
    for (int i = 0; i < n; i++) {
        const struct dl_st_entry *t = dl_st_find(f, list[i].name);
        char want[160], got[160];
        if (!t && list[i].optional)
            continue;
        if (!t)
            return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s' is missing: the checkpoint is of a different "
                             "network", f->name, list[i].name);
        dl_st_shape_str(list[i].ndim, list[i].shape, want, sizeof want);
        dl_st_shape_str(t->ndim, t->shape, got, sizeof got);
        if (t->dtype != list[i].dtype)
            return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected dtype %s, found %s", f->name,
                             list[i].name, dl_st_dtype_name(list[i].dtype), dl_st_dtype_name(t->dtype));
        if (!same_shape(t, &list[i]))
            return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected shape %s, found %s", f->name,
                             list[i].name, want, got);
        double x;
        long at = dl_checkpoint_first_nonfinite(t, &x);
        if (at >= 0)
            return dl_errorf(err, DL_ERR_DATA, "%s: tensor '%s': element %ld is %g: expected finite values (the run "
                             "that wrote it had diverged, or the file was altered)", f->name, list[i].name, at, x);
    }
    for (int i = 0; i < f->n; i++) {
        const char *name = f->t[i].name;
        if (!v->optim && !strncmp(name, "optim.", 6))
            continue; /* loading weights only, e.g. for evaluation */
        int known = 0;
        for (int k = 0; k < n && !known; k++)
            known = !strcmp(list[k].name, name);
        if (!known)
            return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%.200s' is not part of this network: the checkpoint "
                             "is of a different network", f->name, name);
    }
    return DL_OK;
}

static int load_file(struct dl_st_file *f, const struct dl_run_view *v, struct dl_checkpoint_meta *meta,
                     struct dl_error *err)
{
    struct dl_checkpoint_meta m;
    struct entry *list = NULL;
    int n = 0;
    int rc = parse_meta(f, &m, err);
    if (!rc)
        rc = dl_checkpoint_meta_check(f->name, &m, v->limits, err);
    if (!rc)
        rc = build_entries(v, &list, &n, err);
    if (!rc)
        rc = check_tensors(f, v, &m, list, n, err);
    if (!rc) {
        for (int i = 0; i < n; i++) {
            const struct dl_st_entry *t = dl_st_find(f, list[i].name);
            if (t) /* an optional one may be missing */
                memcpy(list[i].data, t->data, (size_t)(t->end - t->begin));
        }
        if (v->optim)
            v->optim->t = m.optimizer_step;
        *meta = m;
    }
    free(list);
    return rc;
}

int dl_checkpoint_load(const char *path, const struct dl_run_view *v, struct dl_checkpoint_meta *meta,
                       struct dl_error *err)
{
    struct dl_st_file f;
    int rc = dl_st_open(path, &f, err);
    if (rc)
        return rc;
    rc = load_file(&f, v, meta, err);
    dl_st_close(&f);
    return rc;
}

int dl_checkpoint_load_memory(const char *name, const void *buf, size_t size, const struct dl_run_view *v,
                              struct dl_checkpoint_meta *meta, struct dl_error *err)
{
    struct dl_st_file f;
    int rc = dl_st_open_memory(name, buf, size, &f, err);
    if (rc)
        return rc;
    rc = load_file(&f, v, meta, err);
    dl_st_close(&f);
    return rc;
}

int dl_checkpoint_probe(const char *path, struct dl_checkpoint_meta *meta, struct dl_error *err)
{
    struct dl_st_file f;
    int rc = dl_st_open(path, &f, err);
    if (rc)
        return rc;
    rc = parse_meta(&f, meta, err);
    if (!rc)
        rc = dl_checkpoint_meta_check(f.name, meta, NULL, err);
    dl_st_close(&f);
    return rc;
}

int dl_checkpoint_net_hash(const char *path, uint32_t *crc, struct dl_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uLong c = crc32_z(0L, Z_NULL, 0);
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, fp)) > 0)
        c = crc32_z(c, buf, got);
    int bad = ferror(fp);
    fclose(fp);
    if (bad)
        return dl_errorf(err, DL_ERR_IO, "%s: read error", path);
    *crc = (uint32_t)c;
    return DL_OK;
}
