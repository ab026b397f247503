/* datafile.c: the dataset schema.  A dataset file and a network file's
 * `data:` section share the readers of the transform maps and statistics
 * here; every error carries file:line:col and the schema's own key names. */
#include "spec/datafile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/shipped.h"

const char *const dl_dataset_names[] = {"fashion-mnist", "mnist", "idx", "synthetic", "cifar10", "cifar100",
                                        "imagefolder", "text", "tokens", "npy", "csv", NULL};
const char *const dl_crop_names[] = {"random-resized", "center", NULL};
const char *const dl_bad_sample_names[] = {"skip", "fail", NULL};

static void transform_defaults(struct dl_transform_spec *train, struct dl_transform_spec *eval)
{
    *train = (struct dl_transform_spec){.crop = DL_CROP_RANDOM_RESIZED, .scale = {0.08, 1.0},
                                        .ratio = {3.0 / 4.0, 4.0 / 3.0}, .resize = 8.0 / 7.0, .flip = 1};
    *eval = *train;
    eval->crop = DL_CROP_CENTER;
    eval->flip = 0;
}

void dl_data_defaults(struct dl_data_spec *d)
{
    memset(d, 0, sizeof *d);
    d->kind = DL_DATASET_FASHION_MNIST;
    d->synthetic_train = 1024;
    d->synthetic_test = 256;
    d->normalize = 1;
    d->validation = 0.1;
    d->document_mask = -1;
    transform_defaults(&d->train_transform, &d->eval_transform);
}

/* ------------------------------------------------------------ shared readers */

/* A list of exactly n numbers in [min, max]. */
static int read_numbers(const struct dl_ynode *map, const char *key, const char *what, int n, double min,
                        double max, double *out, struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    if (!v)
        return DL_OK;
    if (v->kind != DL_Y_SEQ || v->n != n)
        return dl_yerrorf(err, DL_ERR_SPEC, v, "%s: expected a list of %d numbers, found %s%s", w, n,
                          dl_ynode_kind_name(v), v->kind == DL_Y_SEQ ? " of another length" : "");
    for (int i = 0; i < n; i++)
        if (dl_y_float(v->items[i], w, min, max, &out[i], err))
            return DL_ERR_SPEC;
    return DL_OK;
}

static int parse_transform(const struct dl_ynode *m, const char *what, struct dl_transform_spec *t,
                           struct dl_error *err)
{
    static const char *const keys[] = {"crop", "scale", "ratio", "resize", "flip", NULL};
    if (dl_y_check_keys(m, what, keys, NULL, err))
        return DL_ERR_SPEC;
    int crop = (int)t->crop;
    if (dl_ymap_enum(m, "crop", what, dl_crop_names, &crop, err) ||
        read_numbers(m, "scale", what, 2, 1e-6, 1, t->scale, err) ||
        read_numbers(m, "ratio", what, 2, 1e-3, 1e3, t->ratio, err) ||
        dl_ymap_float(m, "resize", what, 1, 16, &t->resize, err) ||
        dl_ymap_bool(m, "flip", what, &t->flip, err))
        return DL_ERR_SPEC;
    t->crop = (enum dl_crop_kind)crop;
    if (t->scale[0] > t->scale[1] || t->ratio[0] > t->ratio[1])
        return dl_yerrorf(err, DL_ERR_SPEC, m, "%s: scale and ratio are [low, high] ranges: expected low <= high",
                          what);
    return DL_OK;
}

/* Keys that a dataset file and a data: section both accept. */
static int parse_common(const struct dl_ynode *m, const char *what, struct dl_data_spec *d, struct dl_error *err)
{
    double mean[3], std[3];
    const struct dl_ynode *mn = dl_ymap_get(m, "mean"), *sd = dl_ymap_get(m, "std"), *t;
    if (!mn != !sd)
        return dl_yerrorf(err, DL_ERR_SPEC, mn ? mn : sd, "%s: mean and std go together", what);
    if (read_numbers(m, "mean", what, 3, -1e3, 1e3, mean, err) ||
        read_numbers(m, "std", what, 3, 1e-6, 1e3, std, err) ||
        dl_ymap_path(m, "dir", what, d->dir, sizeof d->dir, err) ||
        dl_ymap_bool(m, "normalize", what, &d->normalize, err) ||
        dl_ymap_path(m, "train_files", what, d->train_files, sizeof d->train_files, err) ||
        dl_ymap_path(m, "val_files", what, d->val_files, sizeof d->val_files, err) ||
        dl_ymap_float(m, "validation", what, 0.001, 0.999, &d->validation, err))
        return DL_ERR_SPEC;
    if (mn) {
        d->has_stats = 1;
        for (int c = 0; c < 3; c++) {
            d->mean[c] = (float)mean[c];
            d->std[c] = (float)std[c];
        }
    }
    char w[128];
    snprintf(w, sizeof w, "%s.train", what);
    if ((t = dl_ymap_get(m, "train")) && parse_transform(t, w, &d->train_transform, err))
        return DL_ERR_SPEC;
    snprintf(w, sizeof w, "%s.eval", what);
    if ((t = dl_ymap_get(m, "eval")) && parse_transform(t, w, &d->eval_transform, err))
        return DL_ERR_SPEC;
    return DL_OK;
}

/* ------------------------------------------------------------ dataset files */

int dl_dataset_file_find(const char *name, char *path, size_t size, char *looked, size_t looked_size)
{
    size_t len = strlen(name);
    if (looked && looked_size)
        looked[0] = '\0';
    if (len > 5 && strcmp(name + len - 5, ".yaml") == 0 && (strchr(name, '/') || access(name, R_OK) == 0)) {
        snprintf(path, size, "%s", name);
        return access(path, R_OK) == 0;
    }
    if (strchr(name, '/'))
        return 0;
    char rel[DL_PATH_MAX];
    snprintf(rel, sizeof rel, "datasets/%s%s", name, len > 5 && strcmp(name + len - 5, ".yaml") == 0 ? "" : ".yaml");
    return dl_shipped_find(rel, path, size, looked, looked_size);
}

int dl_dataset_file_load(const char *path, struct dl_data_spec *d, struct dl_error *err)
{
    struct dl_ydoc *doc;
    int rc = dl_yaml_load_file(path, &doc, err);
    if (rc)
        return rc;
    static const char *const keys[] = {"name", "description", "format", "dir", "classes", "mean", "std",
                                       "normalize", "train", "eval", "train_files", "val_files", "validation",
                                       NULL};
    const struct dl_ynode *m = doc->root;
    long classes = 0;
    int kind = -1;
    if (!m)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: empty dataset file", path);
    else if (dl_y_check_keys(m, "dataset", keys, NULL, err))
        rc = DL_ERR_SPEC;
    else if (!dl_ymap_get(m, "format"))
        rc = dl_yerrorf(err, DL_ERR_SPEC, m, "dataset: missing required key 'format'");
    else if (dl_ymap_enum(m, "format", "dataset", dl_dataset_names, &kind, err) ||
             dl_ymap_int(m, "classes", "dataset", 2, 1 << 24, &classes, err) ||
             dl_ymap_path(m, "name", "dataset", d->name, sizeof d->name, err))
        rc = DL_ERR_SPEC;
    if (!rc) {
        d->kind = (enum dl_dataset_kind)kind;
        d->classes = (int)classes;
        d->has_stats = 0;
        transform_defaults(&d->train_transform, &d->eval_transform);
        rc = parse_common(m, "dataset", d, err);
    }
    dl_ydoc_free(doc);
    return rc;
}

int dl_data_use_dataset(struct dl_data_spec *d, const char *name, const struct dl_ynode *at,
                        struct dl_error *err)
{
    char path[DL_PATH_MAX + 64], looked[4 * DL_PATH_MAX];
    if (dl_dataset_file_find(name, path, sizeof path, looked, sizeof looked)) {
        d->dir[0] = '\0';
        snprintf(d->name, sizeof d->name, "%s", name);
        int rc = dl_dataset_file_load(path, d, err);
        if (rc)
            return rc;
        if (strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".yaml") == 0 && !d->name[0])
            snprintf(d->name, sizeof d->name, "%s", dl_dataset_names[d->kind]);
        return DL_OK;
    }
    for (int k = 0; dl_dataset_names[k]; k++)
        if (strcmp(name, dl_dataset_names[k]) == 0) {
            d->kind = (enum dl_dataset_kind)k;
            snprintf(d->name, sizeof d->name, "%s", name);
            d->classes = 0;
            d->has_stats = 0;
            transform_defaults(&d->train_transform, &d->eval_transform);
            return DL_OK;
        }
    char formats[256] = "";
    for (int k = 0; dl_dataset_names[k]; k++)
        snprintf(formats + strlen(formats), sizeof formats - strlen(formats), "%s%s", k ? ", " : "",
                 dl_dataset_names[k]);
    const char *msg = "dataset '%s': no dataset file %s.yaml (looked in %s) and no format of that name (%s)";
    struct dl_short shown = dl_short(name);
    if (at)
        return dl_yerrorf(err, DL_ERR_SPEC, at, msg, shown.s, shown.s, *looked ? looked : "nowhere", formats);
    dl_errorf(err, DL_ERR_SPEC, msg, shown.s, shown.s, *looked ? looked : "nowhere", formats);
    dl_error_prefix(err, "--dataset");
    return DL_ERR_SPEC;
}

/* ------------------------------------------------------------ the data: section */

int dl_data_section_parse(const struct dl_ynode *m, struct dl_data_spec *d, struct dl_error *err)
{
    static const char *const keys[] = {"dataset", "dir", "train_images", "train_labels", "test_images",
                                       "test_labels", "train_samples", "test_samples", "normalize", "mean", "std",
                                       "train", "eval", "threads", "prefetch", "bad_samples", "limit_train",
                                       "limit_test", "validation", "train_files", "val_files", "document_mask",
                                       NULL};
    if (dl_y_check_keys(m, "data", keys, NULL, err))
        return DL_ERR_SPEC;
    const struct dl_ynode *ds = dl_ymap_get(m, "dataset");
    if (ds) {
        const char *name;
        if (dl_y_string(ds, "data.dataset", &name, err) || dl_data_use_dataset(d, name, ds, err))
            return DL_ERR_SPEC;
    }
    long threads = d->threads, prefetch = d->prefetch, separator = d->document_mask;
    int bad = (int)d->bad_samples;
    if (dl_ymap_path(m, "train_images", "data", d->train_images, sizeof d->train_images, err) ||
        dl_ymap_path(m, "train_labels", "data", d->train_labels, sizeof d->train_labels, err) ||
        dl_ymap_path(m, "test_images", "data", d->test_images, sizeof d->test_images, err) ||
        dl_ymap_path(m, "test_labels", "data", d->test_labels, sizeof d->test_labels, err) ||
        dl_ymap_int(m, "train_samples", "data", 1, 1L << 40, &d->synthetic_train, err) ||
        dl_ymap_int(m, "test_samples", "data", 1, 1L << 40, &d->synthetic_test, err) ||
        dl_ymap_int(m, "threads", "data", 1, 1024, &threads, err) ||
        dl_ymap_int(m, "prefetch", "data", 1, 1024, &prefetch, err) ||
        dl_ymap_int(m, "limit_train", "data", 1, 1L << 40, &d->limit_train, err) ||
        dl_ymap_int(m, "limit_test", "data", 1, 1L << 40, &d->limit_test, err) ||
        dl_ymap_enum(m, "bad_samples", "data", dl_bad_sample_names, &bad, err) ||
        dl_ymap_int(m, "document_mask", "data", -1, INT32_MAX, &separator, err) ||
        parse_common(m, "data", d, err))
        return DL_ERR_SPEC;
    d->threads = (int)threads;
    d->prefetch = (int)prefetch;
    d->document_mask = (int)separator;
    d->bad_samples = (enum dl_bad_samples)bad;
    if ((d->kind == DL_DATASET_IDX || d->kind == DL_DATASET_NPY) && (!d->train_images[0] || !d->train_labels[0] ||
                                                                     !d->test_images[0] || !d->test_labels[0]))
        return dl_yerrorf(err, DL_ERR_SPEC, m, "data: dataset '%s' needs train_images, train_labels, test_images and "
                          "test_labels%s", dl_dataset_names[d->kind],
                          d->kind == DL_DATASET_NPY ? " (.npy files: the features, then the targets)" : "");
    if (d->kind == DL_DATASET_CSV && (!d->train_images[0] || !d->test_images[0]))
        return dl_yerrorf(err, DL_ERR_SPEC, m, "data: dataset 'csv' needs train_images and test_images (CSV files: "
                          "a row per sample, its features then its targets)");
    return DL_OK;
}
