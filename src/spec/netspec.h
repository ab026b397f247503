/* netspec.h: the sections of a network file other than its layers, as plain
 * structs (filled by spec/netfile.c, overridden by command-line options).
 * Modules further down (data, optim, train, parallel) read these structs and
 * never see YAML. */
#ifndef DL_NETSPEC_H
#define DL_NETSPEC_H

#include <stdint.h>

#include "core/device_kind.h"
#include "core/shape.h"

#define DL_PATH_MAX 1024

enum dl_dataset_kind {
    DL_DATASET_FASHION_MNIST, /* gzipped IDX from dataset-fashion-mnist, or dir */
    DL_DATASET_MNIST,         /* same file names, MNIST digits */
    DL_DATASET_IDX,           /* explicit IDX file paths (raw or .gz) */
    DL_DATASET_SYNTHETIC,     /* random inputs and labels of the network's shape */
    DL_DATASET_CIFAR10,       /* CIFAR-10 binary batches (data_batch_*.bin, test_batch.bin) */
    DL_DATASET_CIFAR100,      /* CIFAR-100 binary (train.bin, test.bin; fine labels) */
    DL_DATASET_IMAGEFOLDER,   /* dir/train and dir/val: a subfolder per class, or list files */
    DL_DATASET_TEXT,          /* a file or folder of text: byte ids in windows, the next byte as labels */
    DL_DATASET_TOKENS,        /* llm.c's token files (data/tokens.h): ids in windows, the next id as labels */
    DL_DATASET_NPY,           /* NumPy .npy files of float features and float targets (a regression loss) */
    DL_DATASET_CSV            /* a CSV file, a row per sample: float features, then float targets */
};

#define DL_DATASET_NAME_MAX 64

/* How an image of any size becomes a network input (torchvision's
 * RandomResizedCrop + RandomHorizontalFlip for training, Resize + CenterCrop
 * for evaluation). */
enum dl_crop_kind {
    DL_CROP_RANDOM_RESIZED, /* a random box of area scale[] x the image's and aspect ratio[] */
    DL_CROP_CENTER          /* shorter side to resize x the input side, then the centre */
};

struct dl_transform_spec {
    enum dl_crop_kind crop;
    double scale[2];      /* random-resized: area fraction range (0.08, 1) */
    double ratio[2];      /* random-resized: width/height range (3/4, 4/3), log-uniform */
    double resize;        /* center: resize the shorter side to resize x input side (8/7) */
    int flip;             /* mirror left-right with probability 1/2 */
};

enum dl_bad_samples { DL_BAD_SKIP, DL_BAD_FAIL };

struct dl_data_spec {
    enum dl_dataset_kind kind;
    char name[DL_DATASET_NAME_MAX]; /* the dataset's name (datasets/NAME.yaml), or the kind's */
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
    int classes;                    /* the dataset's class count (0: not said) */
    int has_stats;                  /* mean/std given (dataset file): not computed */
    float mean[3], std[3];          /* per-channel statistics of pixel values in [0, 1] */
    struct dl_transform_spec train_transform, eval_transform; /* image folders */
    int threads;                    /* decode threads of image datasets (0: default) */
    int prefetch;                   /* ready batches queued ahead (0: default) */
    enum dl_bad_samples bad_samples;
    double validation;              /* text: the fraction of the bytes (the last) that make the test split */
    char train_files[DL_PATH_MAX];  /* tokens: glob patterns in --data's folder ("" = data/tokens.h's) */
    char val_files[DL_PATH_MAX];
    /* data.document_mask (--document-mask): the token id that ends each
     * document of packed token windows (it belongs to the document it
     * closes); attention stays within a document, positions restart at each
     * and the label after the separator is ignored.  -1: no masking. */
    int document_mask;
};

enum dl_optim_kind {
    DL_OPTIM_SGD, DL_OPTIM_ADAGRAD, DL_OPTIM_RMSPROP, DL_OPTIM_ADAM, DL_OPTIM_ADAMW, DL_OPTIM_LARS, DL_OPTIM_LAMB,
    DL_OPTIM_MUON
};

struct dl_optim_spec {
    enum dl_optim_kind kind;
    double lr;
    double momentum;      /* SGD, RMSProp, LARS */
    int nesterov;         /* SGD */
    double weight_decay;  /* L2 added to the gradient; decoupled for AdamW */
    double beta1, beta2;  /* Adam, AdamW, LAMB */
    double alpha;         /* RMSProp smoothing constant */
    double eps;           /* AdaGrad, RMSProp, Adam, AdamW, LAMB */
    double trust_coefficient; /* LARS: eta of the local rate eta ||w|| / (||g|| + wd ||w||) */
    unsigned no_decay;    /* DL_NO_DECAY_* bits: weights the weight decay leaves out (train/no_decay.h) */
};

/* Kinds of weights that weight decay can leave out (train.optimizer.no_decay,
 * dl_no_decay_names in that order): every parameter named bias; the
 * parameters of normalisation layers (layernorm, batchnorm); those of
 * embedding and position_embedding layers. */
enum { DL_NO_DECAY_BIAS = 1, DL_NO_DECAY_NORM = 2, DL_NO_DECAY_EMBEDDING = 4 };

enum dl_sched_kind { DL_SCHED_CONSTANT, DL_SCHED_STEP, DL_SCHED_COSINE, DL_SCHED_WSD };

struct dl_sched_spec {
    enum dl_sched_kind kind;
    double step_epochs;   /* STEP: multiply by gamma every step_epochs epochs */
    double gamma;
    double min_lr;        /* COSINE, WSD: floor */
    double decay_fraction; /* WSD: the share of the steps that decays (linearly to min_lr), at the end */
    double warmup_epochs; /* linear warm-up from 0 over this many epochs (any kind) */
};

/* train.lr_scaling: the base rate for train.batch from the rate for
 * train.reference_batch (Goyal et al. 2017's linear rule; Krizhevsky
 * 2014's square root): lr x batch / reference or x sqrt(batch / reference). */
enum dl_lr_scaling { DL_LR_SCALING_NONE, DL_LR_SCALING_LINEAR, DL_LR_SCALING_SQRT };

struct dl_train_spec {
    int batch;
    enum dl_lr_scaling lr_scaling;
    int reference_batch;  /* the batch train.optimizer.lr was tuned for (0: not said) */
    int epochs;
    long max_steps;       /* >0: stop after this many steps */
    uint64_t seed;
    enum dl_device_kind device; /* where the executor runs */
    struct dl_optim_spec optim;
    struct dl_sched_spec sched;
    double clip_grad_norm; /* >0: the gradient scaled to this L2 norm when above it (PyTorch's clip_grad_norm_) */
    int precision;        /* index in dl_train_precision_names (core/dtype.h): 0 fp32, 1 bf16 (the autocast ops in
                             bf16), DL_PRECISION_AUTO until train/precision_auto.h measures which is faster */
};

/* train.precision as the dtype layers compute in (its index in
 * dl_precision_names is the dtype: core/dtype.h).  train/ builds its
 * executors' kernel choices with it; the commands that make executors of
 * their own (check, bench, generate, ...) read it the same way.  auto
 * computes in f32 until it is resolved (train/precision_auto.h). */
static inline enum dl_dtype dl_train_precision(const struct dl_train_spec *t)
{
    return t->precision == DL_PRECISION_AUTO ? DL_F32 : (enum dl_dtype)t->precision;
}

enum dl_parallel_kind { DL_PAR_AUTO, DL_PAR_NONE, DL_PAR_DATA, DL_PAR_MODEL, DL_PAR_PIPELINE, DL_PAR_HYBRID };

struct dl_parallel_spec {
    enum dl_parallel_kind kind;
    int dp, tp, pp;       /* process grid; 0 = decided at run time */
    int ep;               /* expert ranks within dp (plan/rank_grid.h); 0 = none */
    int micro_batches;    /* pipeline micro-batches */
    int sequence_parallel; /* layers that treat positions independently run on the tensor rank's
                              positions (Korthikanti et al. 2022; plan/tp_split.c) */
    int zero;             /* ZeRO stage: 0, or 1 (the optimizer's state cut over the data-parallel
                             ranks: parallel/zero.h) */
    int recompute;        /* index in dl_recompute_names: activation recomputation (exec.h) */
};

/* "none", "selective", "full": parallel.recompute's values (exec.h's
 * enum dl_recompute order), NULL-terminated. */
extern const char *const dl_recompute_names[];

#endif
