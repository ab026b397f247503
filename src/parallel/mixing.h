/* mixing.h: the mixing matrices of gossip training (parallel/gossip.c): for a
 * virtual topology over p ranks and a step, which ranks each rank averages
 * its weights with, and with what weights.  Every topology here is a set of
 * distinct nonzero offsets D (mod p): rank i receives the vectors of ranks
 * i - d and sends its own to ranks i + d (d in D), and
 *     w_i <- (w_i + sum_{d in D} w_{i-d}) / (|D| + 1),
 * so every row and every column of W holds |D| + 1 entries 1 / (|D| + 1):
 * W is doubly stochastic, and the average over the ranks never moves.
 *   ring          D = {1, p-1}: the two neighbours, 1/3 each ({1} when p = 2);
 *   exp           D = {1, 2, 4, ...} below p (static exponential graph);
 *   one-peer-exp  D = {2^(t mod ceil(log2 p))} at 0-based step t: one peer
 *                 per step, 1/2 each; for p a power of two the product of
 *                 log2 p consecutive steps is the exact average (Ying et
 *                 al. 2021);
 *   complete      D = {1, ..., p-1}: everyone, 1/p each (averaging). */
#ifndef DL_MIXING_H
#define DL_MIXING_H

#include "core/error.h"

/* Largest rank count the matrices are built for (as comm/tags.h). */
#define DL_MIXING_MAX_RANKS 4096

enum dl_topology { DL_TOPO_RING, DL_TOPO_EXP, DL_TOPO_ONE_PEER_EXP, DL_TOPO_COMPLETE, DL_TOPO_COUNT };

/* "ring", "exp", "one-peer-exp", "complete". */
extern const char *const dl_topology_names[DL_TOPO_COUNT];

/* The topology called name; a wrong one is DL_ERR_SPEC naming option and
 * the accepted names. */
int dl_topology_parse(const char *option, const char *name, enum dl_topology *out, struct dl_error *err);

/* Most offsets topology has on p ranks at any step (an upper bound on
 * |D|, for buffers). */
int dl_mixing_max_peers(enum dl_topology t, int p);

/* The offsets D of topology t on p >= 2 ranks at 0-based step into
 * offsets[0..max) (max >= dl_mixing_max_peers); returns |D|. */
int dl_mixing_offsets(enum dl_topology t, int p, long step, int *offsets, int max);

/* Each of the |D| + 1 entries of a row with peers = |D|: 1 / (peers + 1). */
double dl_mixing_weight(int peers);

/* The matrix itself, W[i * p + j] (p x p doubles, p <= DL_MIXING_MAX_RANKS),
 * at step. */
void dl_mixing_matrix(enum dl_topology t, int p, long step, double *w);

/* Steps after which the topology repeats (1 for the static ones). */
int dl_mixing_period(enum dl_topology t, int p);

#endif
