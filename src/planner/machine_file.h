/* machine_file.h: a machine described in a small YAML file (`dltrain plan
 * --machine FILE`, man dltrain(1), machines/ for examples): its nodes,
 * ranks and cores per node, a rank's compute rate, and the links within and
 * between nodes, with the values the options --ranks-per-node,
 * --cores-per-node, --flops, --node-link and --link take (one parser for
 * both: planner/machine.h).  Every error names the file, line, column and key. */
#ifndef DL_PLAN_MACHINE_FILE_H
#define DL_PLAN_MACHINE_FILE_H

#include "core/error.h"

/* The ranges of the counts and of the compute rate, the options' too. */
#define DL_MACHINE_MAX_RANKS (1 << 20)
#define DL_MACHINE_MIN_FLOPS 1.0
#define DL_MACHINE_MAX_FLOPS 1e20

struct dl_machine_file {
    char name[64];          /* name: (optional; "" without it) */
    int nodes;              /* nodes: >= 1 */
    int ranks_per_node;     /* ranks_per_node: >= 1 */
    int cores_per_node;     /* cores_per_node: (optional; 0 without it) */
    double flops;           /* flops: FLOP/s per rank (optional; 0 without it) */
    int have_link;          /* link: {alpha, bw} between nodes (required when nodes > 1) */
    double link_alpha, link_beta;
    int have_node_link;     /* node_link: {alpha, bw, add} within a node (optional; add optional) */
    double node_alpha, node_beta, node_gamma; /* node_gamma 0 without add */
};

/* Reads the machine file at path into *m (zeroed first).  A file that
 * cannot be read, is not YAML, or has an unknown key, a value of the wrong
 * type, out of range or without its unit, a required key missing or no
 * link with several nodes: DL_ERR_SPEC with "file:line:col: machine.KEY:
 * expected ..., found ..." (the file alone when it cannot be opened). */
int dl_machine_file_load(const char *path, struct dl_machine_file *m, struct dl_error *err);

#endif
