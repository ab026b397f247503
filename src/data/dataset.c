/* dataset.c: loading dataset splits into memory.  IDX bytes become floats in
 * [0, 1]; synthetic data are Gaussian inputs whose class-dependent mean makes
 * the labels learnable by a linear model, so tests can show that training
 * learns.  Normalisation always uses the training split's statistics. */
#include "config.h"

#include "data/dataset.h"

#include "data/text.h"
#include "data/token_windows.h"
#include "data/tokens.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/imagefolder.h"
#include "data/regression_data.h"

/* Largest per-sample element count accepted for a network input. */
#define DL_DATA_MAX_SAMPLE (1L << 30)

const char *dl_dataset_kind_name(enum dl_dataset_kind kind)
{
    switch (kind) {
    case DL_DATASET_FASHION_MNIST: return "fashion-mnist";
    case DL_DATASET_MNIST: return "mnist";
    case DL_DATASET_IDX: return "idx";
    case DL_DATASET_SYNTHETIC: return "synthetic";
    case DL_DATASET_CIFAR10: return "cifar10";
    case DL_DATASET_CIFAR100: return "cifar100";
    case DL_DATASET_IMAGEFOLDER: return "imagefolder";
    case DL_DATASET_TEXT: return "text";
    case DL_DATASET_TOKENS: return "tokens";
    case DL_DATASET_NPY: return "npy";
    case DL_DATASET_CSV: return "csv";
    }
    return "unknown";
}

void dl_dataset_free(struct dl_dataset *ds)
{
    if (!ds)
        return;
    free(ds->x);
    free(ds->y);
    if (ds->source)
        ds->source->ops->free(ds->source);
    dl_token_windows_free(ds->windows);
    free(ds->mean);
    free(ds->std);
    memset(ds, 0, sizeof *ds);
}

int dl_dataset_labelled(const struct dl_dataset *ds, long i, int ignored)
{
    int P = dl_dataset_positions(ds), own[ds->windows ? P : 1];
    const int *y = ds->y ? ds->y + i * P : own;
    if (ds->windows)
        dl_token_windows_get(ds->windows, i, NULL, own);
    int labelled = 0;
    for (int t = 0; t < P; t++)
        labelled += y[t] != ignored;
    return labelled;
}

double dl_dataset_label_norm(const struct dl_dataset *ds, long first, long count, int ignored)
{
    long labelled = 0;
    for (long i = first; i < first + count; i++)
        labelled += dl_dataset_labelled(ds, i, ignored);
    return count > 0 ? (double)labelled / (double)count : 0;
}

/* Allocates x and y for n samples of ds->shape. */
static int alloc_samples(struct dl_dataset *ds, long n, struct dl_error *err)
{
    long count = dl_shape_count(ds->shape);
    if (n > LONG_MAX / count)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: %ld samples of %ld values do not fit in memory",
                         ds->name, n, count);
    ds->n = n;
    ds->x = dl_calloc((size_t)n * (size_t)count, sizeof *ds->x, err);
    ds->y = ds->x ? dl_calloc((size_t)n, sizeof *ds->y, err) : NULL;
    return ds->y ? DL_OK : err ? err->code : DL_ERR_NOMEM;
}

static long limit_of(const struct dl_data_spec *spec, int train)
{
    return train ? spec->limit_train : spec->limit_test;
}

/* ---------------------------------------------------------------- IDX files */

static int load_idx(const char *images_path, const char *labels_path, long limit,
                    struct dl_shape want, int classes, struct dl_dataset *ds,
                    struct dl_error *err)
{
    struct dl_idx img, lab;
    int rc = dl_idx_read_pair(images_path, labels_path, classes, &img, &lab, err);
    if (rc != DL_OK)
        return rc;
    long h = img.dims[1], w = img.dims[2];
    if (want.c != 1 || want.h != h || want.w != w) {
        char buf[64];
        rc = dl_errorf(err, DL_ERR_DATA, "network input is %s but %s images are 1x%ldx%ld (%s)",
                       dl_shape_str(want, buf, sizeof buf), ds->name, h, w, images_path);
        goto out;
    }
    long n = img.dims[0];
    if (limit > 0 && limit < n)
        n = limit;
    ds->shape = want;
    rc = alloc_samples(ds, n, err);
    if (rc != DL_OK)
        goto out;
    size_t total = (size_t)n * (size_t)(h * w);
    for (size_t i = 0; i < total; i++)
        ds->x[i] = img.data[i] * (1.0f / 255.0f);
    for (long i = 0; i < n; i++)
        ds->y[i] = lab.data[i];
out:
    dl_idx_free(&img);
    dl_idx_free(&lab);
    return rc;
}

/* Finds dir/base or dir/base.gz (the plain file first). */
static int find_file(const char *dir, const char *base, const char *hint, char *path, size_t n,
                     const struct dl_dataset *ds, struct dl_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dl_errorf(err, DL_ERR_IO, "%s: data folder %s not found: %s", ds->name, dl_short(dir).s, hint);
    const char *suffix[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(path, n, "%s/%s%s", dir, base, suffix[i]) >= n)
            return dl_errorf(err, DL_ERR_SPEC, "%s: data folder path too long: %s", ds->name,
                             dl_short(dir).s);
        if (stat(path, &st) == 0)
            return DL_OK;
    }
    struct dl_short shown = dl_short(dir);
    return dl_errorf(err, DL_ERR_IO, "%s: neither %s/%s nor %s/%s.gz exists: %s", ds->name, shown.s,
                     base, shown.s, base, hint);
}

/* The images and labels files of an MNIST-like folder's split. */
static int mnist_files(const struct dl_data_spec *spec, int train, char *images, char *labels, size_t size,
                       const struct dl_dataset *ds, struct dl_error *err)
{
    int fashion = spec->kind == DL_DATASET_FASHION_MNIST;
    const char *dir = spec->dir[0] ? spec->dir : fashion ? DL_FASHION_MNIST_DIR : NULL;
    const char *hint = fashion
        ? "install the Debian package dataset-fashion-mnist or pass --data DIR"
        : "download the four MNIST IDX files into a folder and pass --data DIR";
    if (!dir)
        return dl_errorf(err, DL_ERR_SPEC, "%s: no data folder given: %s", ds->name, hint);
    int rc = find_file(dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte", hint, images, size, ds,
                       err);
    if (rc == DL_OK)
        rc = find_file(dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte", hint, labels, size, ds,
                       err);
    return rc;
}

static int load_mnist_dir(const struct dl_data_spec *spec, int train, struct dl_shape want,
                          int classes, struct dl_dataset *ds, struct dl_error *err)
{
    char images[DL_PATH_MAX + 64], labels[DL_PATH_MAX + 64];
    int rc = mnist_files(spec, train, images, labels, sizeof images, ds, err);
    if (rc == DL_OK)
        rc = load_idx(images, labels, limit_of(spec, train), want, classes, ds, err);
    return rc;
}

static int load_idx_paths(const struct dl_data_spec *spec, int train, struct dl_shape want,
                          int classes, struct dl_dataset *ds, struct dl_error *err)
{
    const char *images = train ? spec->train_images : spec->test_images;
    const char *labels = train ? spec->train_labels : spec->test_labels;
    if (!images[0] || !labels[0])
        return dl_errorf(err, DL_ERR_SPEC, "%s: the %s images and labels files must both be given",
                         ds->name, train ? "training" : "test");
    return load_idx(images, labels, limit_of(spec, train), want, classes, ds, err);
}

/* ---------------------------------------------------------------- synthetic */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Sample i of class k is (z + a * m_k) / sqrt(1 + a^2) with z ~ N(0, I) and
 * m_k a fixed pattern of +-1 per element (hashed from the seed, so no
 * classes x count table is stored): every element keeps unit variance, and
 * the class means are far apart, so a linear classifier can learn the labels.
 * Each split has its own stream, and the first N samples do not depend on how
 * many follow (limits take a prefix). */
static int load_synthetic(const struct dl_data_spec *spec, int train, struct dl_shape want,
                          int classes, uint64_t seed, struct dl_dataset *ds,
                          struct dl_error *err)
{
    long n = train ? spec->synthetic_train : spec->synthetic_test;
    if (n < 0)
        return dl_errorf(err, DL_ERR_SPEC, "synthetic: %s sample count is %ld: expected >= 0",
                         train ? "training" : "test", n);
    if (n == 0)
        n = train ? DL_SYNTHETIC_DEFAULT_TRAIN : DL_SYNTHETIC_DEFAULT_TEST;
    long limit = limit_of(spec, train);
    if (limit > 0 && limit < n)
        n = limit;
    ds->shape = want;
    int rc = alloc_samples(ds, n, err);
    if (rc != DL_OK)
        return rc;
    const double a = 0.5, scale = 1.0 / sqrt(1.0 + a * a);
    uint64_t pattern_seed = mix64(seed ^ 0x5eed0000000000a1ULL);
    struct dl_rng r;
    dl_rng_seed(&r, mix64(seed + (train ? 0x7261696eULL : 0x74657374ULL)));
    long count = dl_shape_count(want);
    for (long i = 0; i < n; i++) {
        int k = (int)dl_rng_below(&r, (uint64_t)classes);
        ds->y[i] = k;
        float *xi = ds->x + i * count;
        uint64_t base = pattern_seed + (uint64_t)k * (uint64_t)count;
        for (long j = 0; j < count; j++) {
            double m = (mix64(base + (uint64_t)j) >> 63) ? a : -a;
            xi[j] = (float)((dl_rng_normal(&r) + m) * scale);
        }
    }
    return DL_OK;
}

/* ---------------------------------------------------------------- image folders */

/* ImageNet's channel statistics, torchvision's usual Normalize values: the
 * default of image folders whose dataset file gives none. */
static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* The statistics per network channel: as given, or their luminance mix for
 * a 1-channel network (PIL's L weights), or none (0, 1) without normalize. */
static void image_stats(const struct dl_data_spec *spec, int channels, float *mean, float *std)
{
    const float *m = spec->has_stats ? spec->mean : imagenet_mean;
    const float *sd = spec->has_stats ? spec->std : imagenet_std;
    static const float lum[3] = {0.299f, 0.587f, 0.114f};
    for (int c = 0; c < channels; c++) {
        mean[c] = 0;
        std[c] = 1;
    }
    if (!spec->normalize)
        return;
    if (channels == 3) {
        for (int c = 0; c < 3; c++) {
            mean[c] = m[c];
            std[c] = sd[c];
        }
    } else {
        mean[0] = std[0] = 0;
        for (int c = 0; c < 3; c++) {
            mean[0] += lum[c] * m[c];
            std[0] += lum[c] * sd[c];
        }
    }
}

/* DIR/SPLIT (a folder of class folders) or DIR/SPLIT.txt (a list file). */
static int split_path(const struct dl_data_spec *spec, const char *split, char *path, size_t n, int *is_list,
                      const struct dl_dataset *ds, struct dl_error *err)
{
    struct stat st;
    if (!spec->dir[0])
        return dl_errorf(err, DL_ERR_SPEC, "%s: no data folder given: pass --data DIR (DIR/train and DIR/val, "
                         "each with a subfolder per class, or list files DIR/train.txt and DIR/val.txt)", ds->name);
    if (stat(spec->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dl_errorf(err, DL_ERR_IO, "%s: data folder %s not found", ds->name, dl_short(spec->dir).s);
    for (*is_list = 0; *is_list < 2; ++*is_list) {
        if ((size_t)snprintf(path, n, "%s/%s%s", spec->dir, split, *is_list ? ".txt" : "") >= n)
            return dl_errorf(err, DL_ERR_SPEC, "%s: data folder path too long: %s", ds->name,
                             dl_short(spec->dir).s);
        if (stat(path, &st) == 0 && (*is_list ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode)))
            return DL_OK;
    }
    return dl_errorf(err, DL_ERR_IO, "%s: neither the folder %s/%s nor the list file %s/%s.txt exists", ds->name,
                     spec->dir, split, spec->dir, split);
}

static int load_imagefolder(const struct dl_data_spec *spec, int train, struct dl_shape want, int classes,
                            struct dl_dataset *ds, struct dl_error *err)
{
    char path[DL_PATH_MAX + 16];
    int is_list;
    int rc = split_path(spec, train ? "train" : "val", path, sizeof path, &is_list, ds, err);
    if (rc)
        return rc;
    struct dl_file_list files, like = {0};
    if (!train && !is_list) { /* validation classes are numbered as the training ones */
        char tpath[DL_PATH_MAX + 16];
        int tlist;
        rc = split_path(spec, "train", tpath, sizeof tpath, &tlist, ds, err);
        if (!rc && !tlist)
            rc = dl_file_list_classes(tpath, &like, err);
        if (rc)
            return rc;
    }
    rc = dl_file_list_read(is_list ? NULL : path, is_list ? path : NULL, like.class_names ? &like : NULL, &files, err);
    dl_file_list_free(&like);
    if (rc)
        return rc;
    if (files.classes > classes) {
        rc = dl_errorf(err, DL_ERR_DATA, "%s: %s has %d classes but the network has %d outputs", ds->name, path,
                       files.classes, classes);
        dl_file_list_free(&files);
        return rc;
    }
    dl_file_list_thin(&files, limit_of(spec, train));
    ds->shape = want;
    ds->n = files.n;
    ds->y = dl_calloc((size_t)files.n, sizeof *ds->y, err);
    ds->mean = dl_calloc(3, sizeof *ds->mean, err);
    ds->std = dl_calloc(3, sizeof *ds->std, err);
    if (!ds->y || !ds->mean || !ds->std) {
        dl_file_list_free(&files);
        return DL_ERR_NOMEM;
    }
    memcpy(ds->y, files.labels, (size_t)files.n * sizeof *ds->y);
    image_stats(spec, want.c, ds->mean, ds->std);
    rc = dl_imagefolder_source(&files, train ? &spec->train_transform : &spec->eval_transform, want, ds->mean,
                               ds->std, &ds->source, err);
    dl_file_list_free(&files);
    ds->threads = spec->threads;
    ds->prefetch = spec->prefetch;
    ds->bad_samples = spec->bad_samples;
    return rc;
}

/* ---------------------------------------------------------------- CIFAR */

static int load_cifar(const struct dl_data_spec *spec, int train, struct dl_shape want, int classes,
                      struct dl_dataset *ds, struct dl_error *err)
{
    int hundred = spec->kind == DL_DATASET_CIFAR100;
    if (!spec->dir[0])
        return dl_errorf(err, DL_ERR_SPEC, "%s: no data folder given: pass --data DIR (the folder of the binary "
                         "version's %s; see datasets/README.md)", ds->name,
                         hundred ? "train.bin and test.bin" : "data_batch_1.bin ... test_batch.bin");
    if (want.c != 3 || want.h != DL_CIFAR_SIDE || want.w != DL_CIFAR_SIDE) {
        char buf[64];
        return dl_errorf(err, DL_ERR_DATA, "network input is %s but %s images are 3x32x32", dl_shape_str(want, buf,
                         sizeof buf), ds->name);
    }
    struct dl_cifar c;
    int rc = dl_cifar_read(spec->dir, hundred, train, classes, &c, err);
    if (rc)
        return rc;
    long n = c.n, limit = limit_of(spec, train);
    if (limit > 0 && limit < n)
        n = limit;
    ds->shape = want;
    rc = alloc_samples(ds, n, err);
    if (!rc) {
        size_t total = (size_t)n * DL_CIFAR_SAMPLE_BYTES;
        for (size_t i = 0; i < total; i++)
            ds->x[i] = c.pixels[i] * (1.0f / 255.0f);
        memcpy(ds->y, c.labels, (size_t)n * sizeof *ds->y);
    }
    dl_cifar_free(&c);
    return rc;
}

/* ---------------------------------------------------------------- normalisation */

void dl_dataset_channel_stats(const struct dl_dataset *ds, float *mean, float *std)
{
    long plane = (long)ds->shape.h * ds->shape.w;
    double cnt = (double)ds->n * (double)plane;
    for (int c = 0; c < ds->shape.c; c++) {
        /* Two passes (mean, then squared deviations) for accuracy. */
        double s = 0, s2 = 0;
        for (long i = 0; i < ds->n; i++) {
            const float *p = ds->x + (i * ds->shape.c + c) * plane;
            for (long j = 0; j < plane; j++)
                s += p[j];
        }
        double m = cnt > 0 ? s / cnt : 0;
        for (long i = 0; i < ds->n; i++) {
            const float *p = ds->x + (i * ds->shape.c + c) * plane;
            for (long j = 0; j < plane; j++)
                s2 += (p[j] - m) * (p[j] - m);
        }
        double sd = cnt > 0 ? sqrt(s2 / cnt) : 0;
        mean[c] = (float)m;
        std[c] = sd > 1e-12 ? (float)sd : 1.0f;
    }
}

int dl_dataset_normalize(struct dl_dataset *ds, const float *mean, const float *std,
                         struct dl_error *err)
{
    int nc = ds->shape.c;
    if (!ds->mean) {
        ds->mean = dl_calloc((size_t)nc, sizeof *ds->mean, err);
        ds->std = ds->mean ? dl_calloc((size_t)nc, sizeof *ds->std, err) : NULL;
        if (!ds->std) {
            free(ds->mean);
            ds->mean = NULL;
            return err ? err->code : DL_ERR_NOMEM;
        }
    }
    /* mean and std may alias ds->mean / ds->std. */
    memmove(ds->mean, mean, (size_t)nc * sizeof *mean);
    memmove(ds->std, std, (size_t)nc * sizeof *std);
    long plane = (long)ds->shape.h * ds->shape.w;
    for (long i = 0; i < ds->n; i++) {
        for (int c = 0; c < nc; c++) {
            float *p = ds->x + (i * nc + c) * plane;
            float m = ds->mean[c], inv = 1.0f / ds->std[c];
            for (long j = 0; j < plane; j++)
                p[j] = (p[j] - m) * inv;
        }
    }
    return DL_OK;
}

/* ---------------------------------------------------------------- entry point */

/* Token ids and labels per position come from a text dataset only, and it
 * gives nothing else: DL_ERR_SPEC when spec's kind cannot feed want. */
static int feeds(const struct dl_data_spec *spec, const char *name, const struct dl_data_want *want,
                 struct dl_error *err)
{
    char buf[64];
    dl_shape_str(want->shape, buf, sizeof buf);
    int text = spec->kind == DL_DATASET_TEXT || spec->kind == DL_DATASET_TOKENS, ids = !dl_dtype_traits(want->shape.dtype)->is_float;
    int floats = spec->kind == DL_DATASET_NPY || spec->kind == DL_DATASET_CSV;
    if (floats != want->float_targets)
        return dl_errorf(err, DL_ERR_SPEC, floats ? "%s: a %s dataset gives float targets, for a regression loss (mse, "
                         "l1); the network's loss takes class ids" : "%s: the network's loss (mse, l1) takes float "
                         "targets, which a %s dataset does not give (dataset npy or csv does)", name,
                         dl_dataset_kind_name(spec->kind));
    if (floats)
        return DL_OK; /* the targets per sample: the network's outputs, checked by the reader */
    if (text && (!ids || want->positions != want->shape.h))
        return dl_errorf(err, DL_ERR_SPEC, "%s: a %s dataset gives token ids [T] (i32) and the next id at every "
                         "position (a loss over [T, classes]); the network reads %s with %d label%s per sample",
                         name, dl_dataset_kind_name(spec->kind), buf, want->positions, want->positions == 1 ? "" : "s");
    if (!text && (ids || want->positions > 1))
        return dl_errorf(err, DL_ERR_SPEC, "%s: the network reads %s with %d labels per sample; %s gives %s and one "
                         "label per sample (token ids and per-position labels: dataset text or tokens)", name, buf,
                         want->positions, name, "float inputs");
    return DL_OK;
}

int dl_dataset_fits(const struct dl_data_spec *spec, const struct dl_data_want *w, struct dl_error *err)
{
    struct dl_dataset ds = {0};
    snprintf(ds.name, sizeof ds.name, "%s", spec->name[0] ? spec->name : dl_dataset_kind_name(spec->kind));
    char buf[64], images[DL_PATH_MAX + 64], labels[DL_PATH_MAX + 64];
    struct dl_shape want = w->shape;
    int classes = w->classes;
    dl_shape_str(want, buf, sizeof buf);
    if (spec->classes > classes)
        return dl_errorf(err, DL_ERR_SPEC, "%s: the dataset has %d classes but the network only %d outputs "
                         "(input.classes)", ds.name, spec->classes, classes);
    int rc = feeds(spec, ds.name, w, err);
    if (rc)
        return rc;
    struct dl_idx idx;
    struct stat st;
    switch (spec->kind) {
    case DL_DATASET_FASHION_MNIST:
    case DL_DATASET_MNIST:
    case DL_DATASET_IDX:
        if (spec->kind == DL_DATASET_IDX)
            snprintf(images, sizeof images, "%s", spec->train_images);
        else
            rc = mnist_files(spec, 1, images, labels, sizeof images, &ds, err);
        if (!rc)
            rc = dl_idx_read_header(images, 3, &idx, err);
        if (!rc && (want.c != 1 || want.h != idx.dims[1] || want.w != idx.dims[2]))
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: the network's input is %s but the images are 1x%ldx%ld (%s)",
                           ds.name, buf, idx.dims[1], idx.dims[2], images);
        return rc;
    case DL_DATASET_CIFAR10:
    case DL_DATASET_CIFAR100:
        if (want.c != 3 || want.h != DL_CIFAR_SIDE || want.w != DL_CIFAR_SIDE)
            return dl_errorf(err, DL_ERR_SPEC, "%s: the network's input is %s but the images are 3x32x32", ds.name,
                             buf);
        if (!spec->dir[0])
            return dl_errorf(err, DL_ERR_SPEC, "%s: no data folder given: pass --data DIR", ds.name);
        if (stat(spec->dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return dl_errorf(err, DL_ERR_IO, "%s: data folder %s not found", ds.name, spec->dir);
        return DL_OK;
    case DL_DATASET_TEXT:
        if (stat(spec->dir, &st) != 0)
            return dl_errorf(err, DL_ERR_IO, "%s: %s not found (pass --data FILE or DIR)", ds.name,
                             spec->dir[0] ? spec->dir : "no text given:");
        return DL_OK;
    case DL_DATASET_TOKENS:
        return dl_tokens_check(spec, err);
    case DL_DATASET_NPY:
    case DL_DATASET_CSV:
        return DL_OK; /* read whole when loaded: their checks are the reader's */
    case DL_DATASET_IMAGEFOLDER:
        if (want.c != 1 && want.c != 3)
            return dl_errorf(err, DL_ERR_SPEC, "%s: the network's input is %s but image folders give 1 or 3 "
                             "channels", ds.name, buf);
        if (!spec->dir[0])
            return dl_errorf(err, DL_ERR_SPEC, "%s: no data folder given: pass --data DIR", ds.name);
        if (stat(spec->dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return dl_errorf(err, DL_ERR_IO, "%s: data folder %s not found", ds.name, spec->dir);
        return DL_OK;
    default:
        return DL_OK; /* synthetic data takes any shape */
    }
}

static int load_split(const struct dl_data_spec *spec, int train, const struct dl_data_want *w, uint64_t seed,
                      struct dl_dataset *ds, struct dl_error *err)
{
    struct dl_shape want = w->shape;
    int classes = w->classes;
    memset(ds, 0, sizeof *ds);
    ds->positions = 1;
    snprintf(ds->name, sizeof ds->name, "%s %s", spec->name[0] ? spec->name : dl_dataset_kind_name(spec->kind),
             train ? "train" : "test");
    ds->classes = classes;
    if (want.c < 1 || want.h < 1 || want.w < 1 || want.c > DL_DATA_MAX_SAMPLE ||
        want.h > DL_DATA_MAX_SAMPLE / want.c ||
        want.w > DL_DATA_MAX_SAMPLE / ((long)want.c * want.h))
        return dl_errorf(err, DL_ERR_SPEC, "%s: network input shape %dx%dx%d is not usable",
                         ds->name, want.c, want.h, want.w);
    if (classes < 1)
        return dl_errorf(err, DL_ERR_SPEC, "%s: the network has %d classes: expected >= 1",
                         ds->name, classes);
    if (spec->classes > classes)
        return dl_errorf(err, DL_ERR_SPEC, "%s: the dataset has %d classes but the network only %d outputs "
                         "(input.classes)", ds->name, spec->classes, classes);
    int rc = feeds(spec, ds->name, w, err);
    if (rc)
        return rc;
    switch (spec->kind) {
    case DL_DATASET_FASHION_MNIST:
    case DL_DATASET_MNIST:
        rc = load_mnist_dir(spec, train, want, classes, ds, err);
        break;
    case DL_DATASET_IDX:
        rc = load_idx_paths(spec, train, want, classes, ds, err);
        break;
    case DL_DATASET_SYNTHETIC:
        rc = load_synthetic(spec, train, want, classes, seed, ds, err);
        break;
    case DL_DATASET_CIFAR10:
    case DL_DATASET_CIFAR100:
        rc = load_cifar(spec, train, want, classes, ds, err);
        break;
    case DL_DATASET_IMAGEFOLDER:
        rc = load_imagefolder(spec, train, want, classes, ds, err);
        break;
    case DL_DATASET_TEXT:
        ds->shape = want;
        rc = dl_text_load(spec->dir, spec->validation, train, want.h, w->id_limit, classes, limit_of(spec, train), ds,
                          err);
        break;
    case DL_DATASET_TOKENS:
        ds->shape = want;
        rc = dl_tokens_load(spec, train, want.h, w->id_limit, classes, limit_of(spec, train), ds, err);
        break;
    case DL_DATASET_NPY:
    case DL_DATASET_CSV:
        rc = dl_regression_load(spec, train, want, classes, limit_of(spec, train), ds, err);
        break;
    default:
        rc = dl_errorf(err, DL_ERR_INTERNAL, "unknown dataset kind %d", (int)spec->kind);
    }
    if (rc != DL_OK)
        dl_dataset_free(ds);
    return rc;
}

int dl_dataset_load(const struct dl_data_spec *spec, int train, struct dl_shape want_shape,
                    int classes, uint64_t seed, struct dl_dataset *out, struct dl_error *err)
{
    struct dl_data_want want = {want_shape, classes, 1, 0};
    return dl_dataset_load_for(spec, train, &want, seed, out, err);
}

int dl_dataset_load_for(const struct dl_data_spec *spec, int train, const struct dl_data_want *w, uint64_t seed,
                        struct dl_dataset *out, struct dl_error *err)
{
    struct dl_shape want_shape = w->shape;
    int rc = load_split(spec, train, w, seed, out, err);
    if (rc == DL_OK && w->doc_mask && !out->windows) {
        dl_dataset_free(out);
        return dl_errorf(err, DL_ERR_SPEC, "data.document_mask: %s holds no documents of token ids (expected "
                         "format text or tokens)", spec->name);
    }
    if (rc == DL_OK && w->doc_mask) { /* the labels across a document boundary: the loss's ignored one */
        out->windows->doc_mask = 1;
        out->windows->doc_separator = w->doc_separator;
        out->windows->doc_ignored = w->doc_ignored;
    }
    if (rc != DL_OK || !spec->normalize || out->source || spec->kind == DL_DATASET_TEXT ||
        spec->kind == DL_DATASET_TOKENS)
        return rc; /* token ids are not normalised */
    if (spec->has_stats && want_shape.c == 3) { /* the dataset file's statistics */
        rc = dl_dataset_normalize(out, spec->mean, spec->std, err);
        if (rc != DL_OK)
            dl_dataset_free(out);
        return rc;
    }
    struct dl_dataset tr;
    const struct dl_dataset *src = out;
    if (!train) {
        rc = load_split(spec, 1, w, seed, &tr, err);
        if (rc != DL_OK) {
            dl_error_prefix(err, "%s: computing the training statistics", out->name);
            dl_dataset_free(out);
            return rc;
        }
        src = &tr;
    }
    int nc = want_shape.c;
    float *mean = dl_calloc((size_t)nc, sizeof *mean, err);
    float *std = mean ? dl_calloc((size_t)nc, sizeof *std, err) : NULL;
    if (!std)
        rc = err ? err->code : DL_ERR_NOMEM;
    if (rc == DL_OK) {
        dl_dataset_channel_stats(src, mean, std);
        rc = dl_dataset_normalize(out, mean, std, err);
    }
    free(mean);
    free(std);
    if (!train)
        dl_dataset_free(&tr);
    if (rc != DL_OK)
        dl_dataset_free(out);
    return rc;
}
