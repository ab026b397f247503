/* regression_data.c: a split of float features and targets from .npy or
 * CSV files (regression_data.h), checked against the network's input
 * width and target count. */
#include "data/regression_data.h"

#include <stdlib.h>
#include <string.h>

#include "core/target_bits.h"
#include "data/float_table.h"

/* The features table into ds->x and the targets table into ds->y (their
 * rows from row 0, `cols` apart, features first at column fcol, targets at
 * tcol), n samples. */
static int fill(struct dl_dataset *ds, long n, long F, int W, const struct dl_float_table *xf, long fcol,
                const struct dl_float_table *tf, long tcol, struct dl_error *err)
{
    ds->n = n;
    ds->positions = W;
    ds->x = dl_calloc((size_t)(n > 0 ? n : 1) * (size_t)F, sizeof *ds->x, err);
    ds->y = ds->x ? dl_calloc((size_t)(n > 0 ? n : 1) * (size_t)W, sizeof *ds->y, err) : NULL;
    if (!ds->y)
        return DL_ERR_NOMEM;
    for (long i = 0; i < n; i++) {
        memcpy(ds->x + i * F, xf->v + i * xf->cols + fcol, (size_t)F * sizeof *ds->x);
        for (int k = 0; k < W; k++)
            ds->y[i * W + k] = dl_target_bits(tf->v[i * tf->cols + tcol + k]);
    }
    return DL_OK;
}

/* The tables fit a network of F inputs and W targets: x's rows hold F
 * features (npy; t then W targets per row, as many rows) or F + W values
 * (csv, t unused), and there is at least one. */
static int check_tables(int npy, const char *inputs, const char *labels, const struct dl_float_table *x,
                        const struct dl_float_table *t, long F, int W, struct dl_error *err)
{
    struct dl_short in_name = dl_short(inputs), lab_name = dl_short(labels);
    if (x->rows < 1)
        return dl_errorf(err, DL_ERR_SPEC, "%s: no samples", in_name.s);
    if (npy && x->cols != F)
        return dl_errorf(err, DL_ERR_SPEC, "%s: %ld features per sample, but the network's input takes %ld", in_name.s,
                         x->cols, F);
    if (npy && t->cols != W)
        return dl_errorf(err, DL_ERR_SPEC, "%s: %ld targets per sample, but the network has %d outputs "
                         "(input.classes)", lab_name.s, t->cols, W);
    if (npy && t->rows != x->rows)
        return dl_errorf(err, DL_ERR_SPEC, "%s holds %ld samples but %s %ld: expected as many targets as features",
                         in_name.s, x->rows, lab_name.s, t->rows);
    if (!npy && x->cols != F + W)
        return dl_errorf(err, DL_ERR_SPEC, "%s: rows of %ld values, but the network takes %ld features and %d "
                         "targets (input.classes): expected %ld", in_name.s, x->cols, F, W, F + W);
    return DL_OK;
}

int dl_regression_load(const struct dl_data_spec *spec, int train, struct dl_shape want, int targets, long limit,
                       struct dl_dataset *ds, struct dl_error *err)
{
    const char *inputs = train ? spec->train_images : spec->test_images;
    const char *labels = train ? spec->train_labels : spec->test_labels;
    const char *which = train ? "train" : "test";
    int npy = spec->kind == DL_DATASET_NPY;
    long F = dl_shape_count(want);
    ds->shape = want;
    if (!inputs[0] || (npy && !labels[0]))
        return dl_errorf(err, DL_ERR_SPEC, "%s: dataset %s needs data.%s_images (%s)%s", ds->name,
                         npy ? "npy" : "csv", which, npy ? "the features, a .npy file" : "a CSV file: a row per "
                         "sample, its features then its targets", npy ? " and data.*_labels (the targets, a .npy file)"
                         : "");
    struct dl_float_table x = {0}, t = {0};
    int rc = npy ? dl_npy_read(inputs, &x, err) : dl_csv_read(inputs, &x, err);
    if (!rc && npy)
        rc = dl_npy_read(labels, &t, err);
    if (!rc)
        rc = check_tables(npy, inputs, labels, &x, &t, F, targets, err);
    if (!rc) {
        long n = limit > 0 && limit < x.rows ? limit : x.rows;
        rc = npy ? fill(ds, n, F, targets, &x, 0, &t, 0, err) : fill(ds, n, F, targets, &x, 0, &x, F, err);
    }
    dl_float_table_free(&x);
    dl_float_table_free(&t);
    return rc;
}
