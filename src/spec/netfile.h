/* netfile.h: loading a network file (YAML) into a layer graph plus the data,
 * train and parallel sections.  This module is the network-file schema; see
 * man/dltrain-net.5 for the format as users read it. */
#ifndef DL_NETFILE_H
#define DL_NETFILE_H

#include "graph/graph.h"
#include "spec/netspec.h"
#include "spec/yaml.h"

#define DL_NET_MAX_SETS 64

struct dl_net {
    char name[128];
    struct dl_ydoc *doc;             /* kept for the locations the graph points into */
    struct dl_ydoc *set_docs[DL_NET_MAX_SETS]; /* the --set values' labels, which their nodes point into */
    int n_set_docs;
    struct dl_graph graph;
    struct dl_data_spec data;
    struct dl_train_spec train;
    struct dl_parallel_spec parallel;
};

/* Fills every section with its defaults (used before parsing, and by tests). */
void dl_net_defaults(struct dl_net *net);

int dl_net_load(const char *path, struct dl_net *net, struct dl_error *err);
/* A value for one key of the network file from the command line: --set
 * KEY=VALUE, or an option that stands for a key (--lr X: train.optimizer.lr). */
struct dl_net_set {
    const char *key;    /* a path of keys joined by '.' (spec/yaml.h's dl_ydoc_set: in a list, an item's name or index) */
    const char *value;  /* YAML (a scalar, [a, b] or {k: v}); with `string`, the text itself */
    const char *label;  /* what messages start with: "--set KEY=VALUE", "--lr X" */
    int string;         /* 1: value is a string as it is (a path, a name), never read as YAML */
};

/* Parses "KEY=VALUE" (--set's argument) into *out, label "--set KEY=VALUE"
 * (key and label in buf); DL_ERR_SPEC without a key or '='. */
int dl_net_set_parse(const char *text, struct dl_net_set *out, char *buf, size_t size, struct dl_error *err);

/* dl_net_load with sets[0..n) applied to the document before it is read,
 * in order; the schema checks the result as it checks the file, its
 * messages starting with the set's label where the file's give file:line:col.
 * A data.dataset set here drops the file's dataset-specific data keys (dir,
 * mean, std, train, eval), which belonged to the file's dataset. */
int dl_net_load_with(const char *path, const struct dl_net_set *sets, int n, struct dl_net *net,
                     struct dl_error *err);
/* Same from text; name stands for the file in messages. */
int dl_net_load_string(const char *name, const char *text, struct dl_net *net, struct dl_error *err);
void dl_net_free(struct dl_net *net);

/* The keys of train.optimizer and train.schedule that the optimizer and
 * schedule chosen in the end (after every override) do not read, such as
 * momentum with adam: a key given with --set is an error (DL_ERR_SPEC,
 * naming it); a key of the file is a warning, passed to warn (which may be
 * NULL) with its file:line:col. */
int dl_net_check_unused_keys(const struct dl_net *net, void (*warn)(void *ctx, const char *msg), void *ctx,
                             struct dl_error *err);

/* Names for enum values (for printing and for option parsing). */
extern const char *const dl_dataset_names[];
extern const char *const dl_optim_names[];
extern const char *const dl_no_decay_names[]; /* train.optimizer.no_decay's words, DL_NO_DECAY_* bit order */
extern const char *const dl_sched_names[];
extern const char *const dl_lr_scaling_names[]; /* train.lr_scaling's, enum dl_lr_scaling order */
extern const char *const dl_parallel_names[];

#endif
