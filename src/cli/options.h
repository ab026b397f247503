/* options.h: command-line options shared by the subcommands that load a
 * network (train, check, bench step): --net and every option that overrides a
 * value of the network file.  Values are validated with the same ranges as the
 * file's schema; bad values exit with status 2 and a message naming the option. */
#ifndef DL_CLI_OPTIONS_H
#define DL_CLI_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

#include "exec/exec.h"
#include "spec/netfile.h"
#include "train/precision_auto.h"
#include "tune/tune.h"

/* getopt_long codes of the shared options (above the ASCII range). */
enum {
    DL_OPT_NET = 1000, DL_OPT_EPOCHS, DL_OPT_BATCH, DL_OPT_LR, DL_OPT_OPTIMIZER, DL_OPT_MOMENTUM,
    DL_OPT_NESTEROV, DL_OPT_WEIGHT_DECAY, DL_OPT_SCHEDULE, DL_OPT_WARMUP, DL_OPT_SEED, DL_OPT_DATA,
    DL_OPT_DATASET, DL_OPT_LIMIT_TRAIN, DL_OPT_LIMIT_TEST, DL_OPT_MAX_STEPS, DL_OPT_THREADS,
    DL_OPT_HELP, DL_OPT_VERSION, DL_OPT_KERNEL, DL_OPT_NO_FUSION,
    DL_OPT_TUNE, DL_OPT_WORKSPACE_LIMIT, DL_OPT_WORKSPACE_TOTAL, DL_OPT_TUNE_DB, DL_OPT_TUNE_POLICY,
    DL_OPT_DATA_THREADS, DL_OPT_BAD_SAMPLES, DL_OPT_DEVICE, DL_OPT_SET, DL_OPT_CLIP_GRAD_NORM,
    DL_OPT_CONTEXT, DL_OPT_PRECISION, DL_OPT_SEQUENCE_PARALLEL, DL_OPT_ZERO, DL_OPT_RECOMPUTE,
    DL_OPT_DOCUMENT_MASK, DL_OPT_LR_SCALING, DL_OPT_REFERENCE_BATCH,
    DL_OPT_FIRST_LOCAL /* subcommands number their own options from here */
};

#define DL_NET_OPTIONS \
    {"net", required_argument, 0, DL_OPT_NET}, {"epochs", required_argument, 0, DL_OPT_EPOCHS}, \
    {"batch", required_argument, 0, DL_OPT_BATCH}, {"lr", required_argument, 0, DL_OPT_LR}, \
    {"optimizer", required_argument, 0, DL_OPT_OPTIMIZER}, {"momentum", required_argument, 0, DL_OPT_MOMENTUM}, \
    {"nesterov", no_argument, 0, DL_OPT_NESTEROV}, {"weight-decay", required_argument, 0, DL_OPT_WEIGHT_DECAY}, \
    {"clip-grad-norm", required_argument, 0, DL_OPT_CLIP_GRAD_NORM}, \
    {"schedule", required_argument, 0, DL_OPT_SCHEDULE}, {"warmup-epochs", required_argument, 0, DL_OPT_WARMUP}, \
    {"seed", required_argument, 0, DL_OPT_SEED}, {"data", required_argument, 0, DL_OPT_DATA}, \
    {"dataset", required_argument, 0, DL_OPT_DATASET}, {"limit-train", required_argument, 0, DL_OPT_LIMIT_TRAIN}, \
    {"limit-test", required_argument, 0, DL_OPT_LIMIT_TEST}, {"max-steps", required_argument, 0, DL_OPT_MAX_STEPS}, \
    {"threads", required_argument, 0, DL_OPT_THREADS}, {"help", no_argument, 0, DL_OPT_HELP}, \
    {"version", no_argument, 0, DL_OPT_VERSION}, {"kernel", required_argument, 0, DL_OPT_KERNEL}, \
    {"no-fusion", no_argument, 0, DL_OPT_NO_FUSION}, \
    {"tune", no_argument, 0, DL_OPT_TUNE}, {"workspace-limit", required_argument, 0, DL_OPT_WORKSPACE_LIMIT}, \
    {"workspace-total", required_argument, 0, DL_OPT_WORKSPACE_TOTAL}, \
    {"tune-db", required_argument, 0, DL_OPT_TUNE_DB}, {"tune-policy", required_argument, 0, DL_OPT_TUNE_POLICY}, \
    {"data-threads", required_argument, 0, DL_OPT_DATA_THREADS}, {"bad-samples", required_argument, 0, DL_OPT_BAD_SAMPLES}, \
    {"device", required_argument, 0, DL_OPT_DEVICE}, {"set", required_argument, 0, DL_OPT_SET}, \
    {"context", required_argument, 0, DL_OPT_CONTEXT}, {"precision", required_argument, 0, DL_OPT_PRECISION}, \
    {"sequence-parallel", no_argument, 0, DL_OPT_SEQUENCE_PARALLEL}, {"zero", required_argument, 0, DL_OPT_ZERO}, \
    {"recompute", required_argument, 0, DL_OPT_RECOMPUTE}, {"document-mask", required_argument, 0, DL_OPT_DOCUMENT_MASK}, \
    {"lr-scaling", required_argument, 0, DL_OPT_LR_SCALING}, \
    {"reference-batch", required_argument, 0, DL_OPT_REFERENCE_BATCH}

struct dl_net_options {
    const char *net_path;        /* --net; after dl_net_options_load, the file found */
    char net_found[1200];
    int threads;                 /* 0 = all available cores */
    int n;                       /* --set and the options standing for a key, in command-line order */
    int codes[DL_NET_MAX_SETS];  /* DL_OPT_SET or the option's code */
    const char *values[DL_NET_MAX_SETS];
    struct dl_kernel_choices kernels; /* --kernel, --no-fusion; its precision from train.precision */
    struct dl_tune_options tune;      /* --workspace-limit, --workspace-total, --tune-db, --tune-policy */
    int tune_on;                      /* --tune: executors are planned by the tuner */
    struct dl_tune_defaults tune_defaults; /* without --tune: the database's per-CPU choices (layers: how many) */
    const struct dl_device *device;   /* opened by dl_net_options_load (train.device, --device) */
    int recompute;               /* parallel.recompute, --recompute (exec.h's enum dl_recompute) */
    int precision_later;         /* set by the caller: train.precision auto is left for it to resolve (the
                                    ranks of a job agree on it: cli/train.c) */
    int precision_auto;          /* train.precision was auto: precision_probe says what was measured */
    struct dl_precision_probe precision_probe;
};

/* train.precision auto becomes the precision whose step this machine ran
 * faster (train/precision_auto.h; net->train.precision and the kernel
 * choices follow; precision_auto and precision_probe say what was
 * measured), timed by rank 0 of comm (NULL: this process) for every rank.
 * dl_net_options_load calls it unless precision_later.  With
 * precision_later (a training run), bf16 on a CPU without native bf16 is
 * timed too, and rank 0 warns how much slower it is.  Prints the error and
 * returns the exit status on failure, 0 on success. */
int dl_net_precision_resolve(struct dl_net_options *o, struct dl_net *net, struct dl_comm *comm, const char *prog);

/* "precision bf16: 174 of 175 layers compute in bf16 (173 onednn-bf16, 1
 * reference-bf16: ...) from fp32 master weights, the others in fp32": the
 * kernels of net's layers, kernel[i] as an executor chose them (NULL: the
 * default ones of the fc and convolution layers, the others following
 * their inputs in the executor). */
void dl_precision_summary(const struct dl_net *net, const struct dl_kernel *const *kernel, char *buf, size_t size);

/* Empty options (no overrides, default kernels and tuner settings). */
void dl_net_options_init(struct dl_net_options *o);

/* Records one shared option.  Returns 1 when opt was one of them, 0 when it
 * is not a shared option, and -1 (after printing a message) on a bad value. */
int dl_net_option(struct dl_net_options *o, int opt, const char *arg, const char *prog);

/* Loads o->net_path with the --set values, applies the overrides in
 * order, refuses an option the chosen optimizer does not use (--momentum
 * with adam) and warns about such keys of the file, opens the device
 * (train.device, --device: o->device; a device the executor cannot run on,
 * or one that is missing, is refused here, before any work) and sets the
 * thread count.  Prints the error and returns the exit status (2 for a bad
 * file or value, or an unusable device) on failure, 0 on success. */
int dl_net_options_load(struct dl_net_options *o, struct dl_net *net, const char *prog);

/* The executor options of o: its kernel choices, its device and, with --tune, the tuner
 * with o's settings (out points into o, which must outlive it). */
void dl_net_exec_options(struct dl_net_options *o, struct dl_exec_options *out);

/* A shipped file for PATH that names none here: NAME or NAME.yaml,
 * without a slash, that is not a file here is folder/NAME.yaml (folder
 * "nets", "machines") among the shipped files (core/shipped.h: from any
 * folder), written to buf, when it is there; else path itself.  looked
 * (may be NULL): the folders searched in vain ("" when PATH was a path,
 * or found). */
const char *dl_shipped_file(const char *path, const char *folder, char *buf, size_t size, char *looked,
                            size_t looked_size);

/* Prints "PROG: message" when rc (the status of a core/parse.h parser or of
 * another function that fills err) is an error; returns 1 then, else 0. */
int dl_option_refused(const char *prog, int rc, const struct dl_error *err);

/* The name among the NULL-terminated names closest to word by edit
 * distance when it is near enough to be a likely typo (at most 2 edits, or a
 * third of word's length), else NULL. */
const char *dl_closest_name(const char *word, const char *const *names);

/* Help text of the shared options. */
void dl_net_options_help(FILE *f);

/* Loads an executor's weights (a whole network's, one process): from a
 * checkpoint file, or the latest in a --checkpoint-dir folder
 * (train/checkpoint.h, without optimizer state), or with init_from set from
 * Hugging Face's GPT-2 or LLaMA weights (train/hf_weights.h). */
int dl_load_weights(const char *checkpoint, const char *init_from, struct dl_exec *e, const struct dl_graph *g,
                    struct dl_error *err);

/* --version (cli/version.c): the version, the commit it was built from
 * and the features compiled in (communication backends and their MPI or
 * NCCL, kernel libraries, devices and their CUDA libraries). */
void dl_print_version(const char *prog);

#endif
