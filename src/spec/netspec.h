/* netspec.h: the sections of a network file other than its layers, as plain
 * structs (filled by spec/netfile.c, overridden by command-line options).
 * Modules further down (data, optim, train, parallel) read these structs and
 * never see YAML. */
#ifndef DL_NETSPEC_H
#define DL_NETSPEC_H

#include <stdint.h>

#include "core/shape.h"

#define DL_PATH_MAX 1024

enum dl_dataset_kind {
    DL_DATASET_FASHION_MNIST, /* gzipped IDX from dataset-fashion-mnist, or dir */
    DL_DATASET_MNIST,         /* same file names, MNIST digits */
    DL_DATASET_IDX,           /* explicit IDX file paths (raw or .gz) */
    DL_DATASET_SYNTHETIC      /* random inputs and labels of the network's shape */
};

struct dl_data_spec {
    enum dl_dataset_kind kind;
    char dir[DL_PATH_MAX];          /* folder holding the 4 IDX files ("" = default) */
    char train_images[DL_PATH_MAX]; /* DL_DATASET_IDX: explicit files */
    char train_labels[DL_PATH_MAX];
    char test_images[DL_PATH_MAX];
    char test_labels[DL_PATH_MAX];
    long synthetic_train;           /* DL_DATASET_SYNTHETIC: sample counts */
    long synthetic_test;
    int normalize;                  /* 1: standardise with the training set's mean/std */
    long limit_train;               /* >0: use only the first N training samples */
    long limit_test;                /* >0: use only the first N test samples */
};

enum dl_optim_kind {
    DL_OPTIM_SGD, DL_OPTIM_ADAGRAD, DL_OPTIM_RMSPROP, DL_OPTIM_ADAM, DL_OPTIM_ADAMW
};

struct dl_optim_spec {
    enum dl_optim_kind kind;
    double lr;
    double momentum;      /* SGD, RMSProp */
    int nesterov;         /* SGD */
    double weight_decay;  /* L2 added to the gradient; decoupled for AdamW */
    double beta1, beta2;  /* Adam, AdamW */
    double alpha;         /* RMSProp smoothing constant */
    double eps;           /* AdaGrad, RMSProp, Adam, AdamW */
};

enum dl_sched_kind { DL_SCHED_CONSTANT, DL_SCHED_STEP, DL_SCHED_COSINE };

struct dl_sched_spec {
    enum dl_sched_kind kind;
    double step_epochs;   /* STEP: multiply by gamma every step_epochs epochs */
    double gamma;
    double min_lr;        /* COSINE: floor */
    double warmup_epochs; /* linear warm-up from 0 over this many epochs (any kind) */
};

struct dl_train_spec {
    int batch;
    int epochs;
    long max_steps;       /* >0: stop after this many steps */
    uint64_t seed;
    struct dl_optim_spec optim;
    struct dl_sched_spec sched;
};

enum dl_parallel_kind { DL_PAR_AUTO, DL_PAR_NONE, DL_PAR_DATA, DL_PAR_MODEL, DL_PAR_PIPELINE, DL_PAR_HYBRID };

struct dl_parallel_spec {
    enum dl_parallel_kind kind;
    int dp, tp, pp;       /* process grid; 0 = decided at run time */
    int micro_batches;    /* pipeline micro-batches */
};

#endif
