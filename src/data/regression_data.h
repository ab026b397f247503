/* regression_data.h: a dataset of float features and float targets for a
 * regression loss (mse, l1): NumPy .npy files (features and targets in
 * two files) or a CSV file (a row per sample: its features, then its
 * targets).  The targets go into the dataset's label words as float32
 * bits (core/target_bits.h), W per sample (dataset.h's positions). */
#ifndef DL_REGRESSION_DATA_H
#define DL_REGRESSION_DATA_H

#include "data/dataset.h"

/* Loads split `train` of spec (kind npy: train_images/test_images the
 * features [N, F...], train_labels/test_labels the targets [N, W] or [N];
 * kind csv: train_images/test_images rows of F + W numbers) for a network
 * of input `want` (F values) and W = targets outputs.  A file that does
 * not fit is DL_ERR_SPEC naming it, expected against found. */
int dl_regression_load(const struct dl_data_spec *spec, int train, struct dl_shape want, int targets, long limit,
                       struct dl_dataset *ds, struct dl_error *err);

#endif
