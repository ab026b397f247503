/* datafile.h: the dataset schema: the `data:` section of a network file and
 * the dataset files datasets/NAME.yaml (format, folder, classes, channel
 * statistics, train and eval transforms) that `dataset: NAME` and
 * `--dataset NAME` load by name.  See dltrain-data(5). */
#ifndef DL_DATAFILE_H
#define DL_DATAFILE_H

#include "core/error.h"
#include "spec/netspec.h"
#include "spec/yaml.h"

/* The defaults: Fashion-MNIST, normalised with its training statistics,
 * torchvision's ImageNet transforms for image folders. */
void dl_data_defaults(struct dl_data_spec *d);

/* Parses a `data:` mapping into d (keys absent keep d's values). */
int dl_data_section_parse(const struct dl_ynode *m, struct dl_data_spec *d, struct dl_error *err);

/* Makes d describe dataset `name`: the dataset file found for it (a path to
 * a .yaml file, or NAME.yaml in the datasets folders, see
 * dl_dataset_file_find), else the format of that name with its defaults.
 * Sets kind, name, folder, classes, statistics and transforms; leaves
 * limits, thread counts and the like alone.  `at` locates errors (NULL:
 * the message starts with --dataset). */
int dl_data_use_dataset(struct dl_data_spec *d, const char *name, const struct dl_ynode *at,
                        struct dl_error *err);

/* The dataset file of name: name itself when it is a path to a .yaml
 * file, else datasets/NAME.yaml among the shipped files (core/shipped.h:
 * from any folder).  Returns 1 when found.  `looked` (may be NULL)
 * receives the folders searched. */
int dl_dataset_file_find(const char *name, char *path, size_t size, char *looked, size_t looked_size);

/* Reads a dataset file into d (as dl_data_use_dataset does for a found file). */
int dl_dataset_file_load(const char *path, struct dl_data_spec *d, struct dl_error *err);

/* Names of the formats (enum dl_dataset_kind order), crops (enum
 * dl_crop_kind) and bad_samples choices (enum dl_bad_samples). */
extern const char *const dl_dataset_names[];
extern const char *const dl_crop_names[];
extern const char *const dl_bad_sample_names[];

#endif
