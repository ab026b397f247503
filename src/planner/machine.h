/* machine.h: the machine a layout is planned for (doc/planner.md): ranks
 * per node, the calibrated alpha-beta-gamma model within a node
 * (comm/costmodel.h) and one alpha-beta link across nodes (--link), and
 * what the collectives and all-to-alls of a group of ranks cost on it.  A
 * group whose ranks all sit on one node pays the calibrated model (the
 * cheapest algorithm); a group that crosses nodes runs a ring whose every
 * step waits for the slowest link, the link between nodes (an all-to-all's
 * every message too). */
#ifndef DL_PLAN_MACHINE_H
#define DL_PLAN_MACHINE_H

#include "comm/costmodel.h"
#include "core/error.h"

struct dl_machine {
    struct dl_cost_params node;  /* within a node */
    const char *node_source;     /* "calibrated (K ranks)" or "defaults (not measured)" */
    int ranks_per_node;          /* K >= 1 */
    double link_alpha;           /* seconds per message across nodes */
    double link_beta;            /* seconds per byte across nodes (1 / bandwidth) */
    /* Compute seconds are multiplied by this (>= 1): a node's ranks times
     * their threads over its cores, when they exceed them (ranks sharing
     * cores, as 4 ranks on 2 cores under mpirun --oversubscribe). */
    double compute_scale;
    /* 1: compute runs on the node's cores and leaves none to a rank's
     * communication thread, so the data-parallel allreduce (copies and
     * sums on those cores) is not hidden behind backward but adds to it. */
    int comm_shares_cores;
};

/* A machine of nodes of K ranks, the node's parameters read from this
 * host's calibration cache for K ranks (comm/costmodel.h; measured by any
 * run of dltrain on K ranks, or dltrain bench comm), else the defaults;
 * node_source says which.  The link across nodes: alpha, beta (0 when
 * every rank is on one node). */
void dl_machine_init(struct dl_machine *m, int K, double link_alpha, double link_beta);

/* Sets m->compute_scale for N ranks (at most ranks_per_node of them on a
 * node) of `threads` threads each on nodes of `cores` cores (0: unknown,
 * nothing shared), and m->comm_shares_cores when cpu_compute (the layer
 * times are this host's cores' work) and the ranks' threads plus one
 * communication thread each exceed the cores. */
void dl_machine_share_cores(struct dl_machine *m, int N, int threads, int cores, int cpu_compute);

/* Parses a link (opt: "--link" or "--node-link", for messages) such as
 * "alpha=5us,bw=12.5GB/s" in core/parse.h's one grammar of links
 * (dl_parse_link); alpha and bw both required.  With gamma not NULL an optional add=RATE (bytes
 * reduced per second) sets *gamma = 1/RATE (left unchanged without it).
 * Errors (DL_ERR_SPEC) name opt. */
int dl_machine_parse_link(const char *opt, const char *text, double *alpha, double *beta, double *gamma,
                          struct dl_error *err);

/* Ranks lo and hi (rank numbers) on one node. */
static inline int dl_machine_same_node(const struct dl_machine *m, long lo, long hi)
{
    return lo / m->ranks_per_node == hi / m->ranks_per_node;
}

/* Seconds for a group of p ranks (crossing nodes or not) to allreduce,
 * allgather (each rank ends with all `bytes`, holding bytes/p before) and
 * reduce-scatter (the reverse, summing) a vector of `bytes`; 0 for p <= 1. */
double dl_machine_allreduce(const struct dl_machine *m, int p, int crosses, double bytes);
double dl_machine_allgather(const struct dl_machine *m, int p, int crosses, double bytes);
double dl_machine_reduce_scatter(const struct dl_machine *m, int p, int crosses, double bytes);
/* Seconds for each rank of a group of p ranks to send the others their
 * parts of its `bytes` (an all-to-all: (p-1)/p of them leave the rank, in
 * p-1 messages) while receiving theirs; 0 for p <= 1. */
double dl_machine_alltoall(const struct dl_machine *m, int p, int crosses, double bytes);
/* Seconds for one message of `bytes` between two ranks. */
double dl_machine_send(const struct dl_machine *m, int crosses, double bytes);

#endif
