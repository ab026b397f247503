/* dataset.h: a dataset split: integer labels in memory, and inputs either in
 * memory as float NCHW (IDX files of MNIST and Fashion-MNIST, CIFAR binaries,
 * synthetic data) or made on demand by a sample source (image folders:
 * decoded and transformed when the batcher asks), or token windows read
 * from mapped files with their labels (text and token datasets).  The loader checks the data
 * against the network's input shape and class count, so a mismatch is
 * reported here, by name. */
#ifndef DL_DATASET_H
#define DL_DATASET_H

#include <stdint.h>

#include "core/error.h"
#include "core/shape.h"
#include "spec/netspec.h"

/* Synthetic sample counts used when the spec leaves them at 0. */
#define DL_SYNTHETIC_DEFAULT_TRAIN 1024
#define DL_SYNTHETIC_DEFAULT_TEST 256

struct dl_sample_source;
struct dl_token_windows;

/* Samples made on demand.  load may run on several threads at once (for
 * distinct x). */
struct dl_sample_source_ops {
    /* Writes sample i (dl_shape_count floats) into x.  aug_seed seeds its
     * random transforms.  DL_ERR_DATA: this sample cannot be read (the message
     * names it); any other error is fatal. */
    int (*load)(const struct dl_sample_source *s, long i, uint64_t aug_seed, float *x,
                struct dl_error *err);
    void (*free)(struct dl_sample_source *s);
};

struct dl_sample_source {
    const struct dl_sample_source_ops *ops;
};

struct dl_dataset {
    long n;                /* number of samples */
    struct dl_shape shape; /* per-sample C, H, W */
    int classes;
    float *x;              /* n x dl_shape_count(shape) floats, NCHW; NULL with a source */
    struct dl_sample_source *source; /* owned; non-NULL: inputs made on demand */
    struct dl_token_windows *windows; /* owned; non-NULL: ids and labels read from mapped files
                                         (text and token datasets, data/token_windows.h); x, y NULL */
    int threads, prefetch; /* decode threads and ready batches queued (sources only) */
    enum dl_bad_samples bad_samples;
    int *y;                /* n x positions labels in [0, classes) */
    int positions;         /* labels per sample: 1 (0 says the same), or T (a text dataset: the next id at
                              every position): dl_dataset_positions */
    char name[64];         /* e.g. "fashion-mnist train" */
    float *mean, *std;     /* shape.c per-channel statistics subtracted and divided
                              out (always the training split's), or NULL when the
                              data are not normalised */
};

static inline int dl_dataset_positions(const struct dl_dataset *ds)
{
    return ds->positions > 0 ? ds->positions : 1;
}

/* Loads the training split (train = 1) or the test split (train = 0) described
 * by spec.  want_shape and classes are the network's input shape and output
 * count: the data must match them (IDX images must be 1 x H x W, labels
 * < classes).  seed drives the synthetic generator only.  Pixels are scaled to
 * [0, 1]; with spec->normalize, every channel is then standardised with the
 * mean and std of the training split (after limit_train), for both splits.
 * On error *out is left empty (safe to dl_dataset_free). */
int dl_dataset_load(const struct dl_data_spec *spec, int train, struct dl_shape want_shape,
                    int classes, uint64_t seed, struct dl_dataset *out, struct dl_error *err);

/* What a network reads (graph.h): its input's shape and dtype, its classes,
 * the labels per sample its loss takes, and the limit of its token ids (0:
 * the input is not ids); with document masking (doc_mask 1: the network
 * file's data.document_mask), the separator id that ends a document and
 * the label its loss ignores, which the label after each separator
 * becomes (data/token_windows.h; text and token datasets only). */
struct dl_data_want {
    struct dl_shape shape;
    int classes;
    int positions;
    int id_limit;
    int doc_mask, doc_separator, doc_ignored;
    int float_targets; /* a regression loss (graph.h's float_targets): positions float targets per sample */
};

/* dl_dataset_load for a network that may read token ids or a label per
 * position: only a text dataset gives those (data/text.h), and it gives
 * nothing else; a dataset that cannot feed the network is DL_ERR_SPEC
 * saying what each side has.  dl_dataset_load is this with positions 1
 * and no ids. */
int dl_dataset_load_for(const struct dl_data_spec *spec, int train, const struct dl_data_want *want, uint64_t seed,
                        struct dl_dataset *out, struct dl_error *err);

void dl_dataset_free(struct dl_dataset *ds);

/* The labels of sample i that are not `ignored` (at most
 * dl_dataset_positions). */
int dl_dataset_labelled(const struct dl_dataset *ds, long i, int ignored);

/* Those labels per sample over samples first..first+count-1 (0 for none):
 * a loss's divisor for a split (struct dl_op_call's label_norm). */
double dl_dataset_label_norm(const struct dl_dataset *ds, long first, long count, int ignored);

/* Whether spec's data fits a network of input shape want and `classes`
 * outputs, without loading it (IDX files: their header; CIFAR: 3x32x32;
 * image folders: 1 or 3 channels): DL_ERR_SPEC naming the dataset and
 * both sides when not, the reader's status when its files cannot be found
 * or read. */
int dl_dataset_fits(const struct dl_data_spec *spec, const struct dl_data_want *want, struct dl_error *err);

/* Per-channel population mean and standard deviation of ds->x into
 * mean[shape.c] and std[shape.c] (a constant channel gets std 1). */
void dl_dataset_channel_stats(const struct dl_dataset *ds, float *mean, float *std);

/* Standardises ds in place with the given per-channel statistics (for example
 * ones stored in a checkpoint) and records them in ds->mean / ds->std. */
int dl_dataset_normalize(struct dl_dataset *ds, const float *mean, const float *std,
                         struct dl_error *err);

/* "fashion-mnist", "mnist", "idx", "synthetic", "cifar10", "cifar100" or
 * "imagefolder". */
const char *dl_dataset_kind_name(enum dl_dataset_kind kind);

#endif
