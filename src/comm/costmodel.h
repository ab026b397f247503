/* costmodel.h: the alpha-beta-gamma model of collective algorithms (Thakur,
 * Rabenseifner & Gropp, IJHPCA 2005): time = messages * alpha + bytes moved
 * * beta + bytes reduced * gamma.  The three parameters are measured once
 * per machine and rank count and cached; auto picks the cheapest algorithm. */
#ifndef DL_COSTMODEL_H
#define DL_COSTMODEL_H

#include <stddef.h>

#include "comm/comm.h"

struct dl_allreduce_opts;

/* Bytes move and add at speeds that depend on how many ranks work at the
 * same time (on a node with fewer cores than ranks they share the cores; on
 * any node, the memory bandwidth) and on whether the vector fits in cache.
 * So beta is measured with every rank sending to its right neighbour and
 * receiving from its left one (the ring's pattern, and what every step of
 * recursive doubling, Rabenseifner and the sharded parameter server does),
 * on a 16 MiB and a 1 MiB vector, with only one pair exchanging while the
 * others wait, and with every odd rank sending to its even partner, which
 * only receives (a binomial tree's steps move data one way: half the copies
 * of an exchange); gamma with every rank adding at once and with one rank
 * alone.  Steps in between interpolate
 * linearly in the number of active ranks, sizes in between in log(size). */
struct dl_cost_params {
    double alpha;      /* seconds per message (latency) */
    double beta;       /* seconds per byte moved, every rank moving data at once, 16 MiB vectors */
    double gamma;      /* seconds per byte reduced (float additions), every rank at once */
    double beta_pair;  /* seconds per byte moved by one pair alone; 0 = beta */
    double beta_small; /* as beta, for 1 MiB vectors; 0 = beta */
    double gamma_one;  /* seconds per byte reduced by one rank alone; 0 = gamma */
    double beta_oneway; /* seconds per byte when half the ranks each receive from a partner that only
                           sends (a binomial tree's steps), all pairs at once, 16 MiB; 0 = beta */
    double gamma_small; /* as gamma, adding 1 MiB vectors (in cache); 0 = gamma */
    double beta_large;  /* as beta, for 64 MiB vectors (past the last-level cache); 0 = beta */
    double gamma_large; /* as gamma, adding 64 MiB vectors; 0 = gamma */
};

/* Seconds per byte when `active` of the p ranks move data at once, for an
 * allreduce of a vector of `bytes`. */
double dl_cost_beta(const struct dl_cost_params *cp, int active, int p, double bytes);
/* Seconds per byte reduced when `active` of the p ranks add at once, for
 * an allreduce of a vector of `bytes` (towards gamma_small below 16 MiB and
 * gamma_large above, by log(size) as beta). */
double dl_cost_gamma(const struct dl_cost_params *cp, int active, int p, double bytes);

/* Predicted seconds to allreduce `bytes` over p ranks. */
typedef double (*dl_cost_fn)(const struct dl_cost_params *cp, int p, double bytes,
                             const struct dl_allreduce_opts *opts);

double dl_cost_ring(const struct dl_cost_params *cp, int p, double bytes,
                    const struct dl_allreduce_opts *opts);
double dl_cost_recursive_doubling(const struct dl_cost_params *cp, int p, double bytes,
                                  const struct dl_allreduce_opts *opts);
double dl_cost_rabenseifner(const struct dl_cost_params *cp, int p, double bytes,
                            const struct dl_allreduce_opts *opts);
double dl_cost_tree(const struct dl_cost_params *cp, int p, double bytes,
                    const struct dl_allreduce_opts *opts);
double dl_cost_ps(const struct dl_cost_params *cp, int p, double bytes,
                  const struct dl_allreduce_opts *opts);

/* Parameters typical of one shared-memory node, for when none were measured. */
void dl_cost_defaults(struct dl_cost_params *cp);

/* Measures alpha by concurrent pairwise exchanges of 8 bytes, beta and
 * beta_small by ring shifts of 16 MiB and 1 MiB (every rank busy, as inside a
 * collective), beta_pair by one pair exchanging 16 MiB alone, beta_oneway by
 * odd ranks sending 16 MiB to their even partners, beta_large by ring shifts
 * of 64 MiB, gamma, gamma_small and gamma_large by a reduction loop on
 * 16 MiB, 1 MiB and 64 MiB run on every rank at once and gamma_one on one
 * rank; each
 * time is the slowest rank's.  Collective: every rank of c calls it and gets
 * rank 0's numbers. */
int dl_cost_measure(struct dl_comm *c, struct dl_cost_params *out, struct dl_error *err);

/* The cache file for this host and c->size:
 * $XDG_CACHE_HOME/dltrain/comm-vV-HOST-pN.txt (or ~/.cache/dltrain/...). */
int dl_cost_cache_path(const struct dl_comm *c, char *path, size_t len, struct dl_error *err);

/* The same path for a run of `ranks` ranks on this host. */
int dl_cost_cache_path_for(int ranks, char *path, size_t len, struct dl_error *err);

/* 1 when this host has cached parameters for `ranks` ranks (then in *out),
 * else 0 (*out may be partly written). */
int dl_cost_cached(int ranks, struct dl_cost_params *out);

/* Collective: reads the cached parameters on rank 0 or, when there are none
 * (or remeasure is set), measures and writes them (temporary name + rename);
 * every rank gets the same numbers.  *cached (may be NULL) tells which. */
int dl_cost_load_or_measure(struct dl_comm *c, int remeasure, struct dl_cost_params *out,
                            int *cached, struct dl_error *err);

#endif
