/* netfile.h: loading a network file (YAML) into a layer graph plus the data,
 * train and parallel sections.  This module is the network-file schema; see
 * man/dltrain-net.5 for the format as users read it. */
#ifndef DL_NETFILE_H
#define DL_NETFILE_H

#include "graph/graph.h"
#include "spec/netspec.h"
#include "spec/yaml.h"

struct dl_net {
    char name[128];
    struct dl_ydoc *doc;             /* kept for the locations the graph points into */
    struct dl_graph graph;
    struct dl_data_spec data;
    struct dl_train_spec train;
    struct dl_parallel_spec parallel;
};

/* Fills every section with its defaults (used before parsing, and by tests). */
void dl_net_defaults(struct dl_net *net);

int dl_net_load(const char *path, struct dl_net *net, struct dl_error *err);
/* Same from text; name stands for the file in messages. */
int dl_net_load_string(const char *name, const char *text, struct dl_net *net, struct dl_error *err);
void dl_net_free(struct dl_net *net);

/* Names for enum values (for printing and for option parsing). */
extern const char *const dl_dataset_names[];
extern const char *const dl_optim_names[];
extern const char *const dl_sched_names[];
extern const char *const dl_parallel_names[];

#endif
