/* allreduce.h: allreduce algorithms written once on top of the comm table's
 * send/recv (so they run on any backend), their registry, and the helpers
 * they share (block partition, pipelined exchange, power-of-two fix-up).
 * Every algorithm sums n floats in place on every rank of the communicator;
 * dl_allreduce sums bf16 values through them in f32 (comm.h's widen.c). */
#ifndef DL_ALLREDUCE_H
#define DL_ALLREDUCE_H

#include <stddef.h>

#include "comm/comm.h"
#include "comm/costmodel.h"
#include "comm/tags.h"

/* Pipelining segment when opts->segment_bytes is 0.  1 MiB: at 16 MiB on 4
 * ranks sharing 2 cores, ring and Rabenseifner took 0.87-1.03x Open MPI's
 * time with 256 KiB segments and 0.92-1.11x with 1 MiB (3 runs each; every
 * segment is a handshake that may wait for the scheduler); at 64 MiB all
 * sizes were 1.2-1.8x (doc/comm.md). */
#define DL_ALLREDUCE_SEGMENT (1024u * 1024u)

struct dl_allreduce_opts {
    int ps_servers;       /* parameter server: server ranks 0..K-1; 0 = every rank (sharded) */
    size_t segment_bytes; /* pipelining segment; 0 = DL_ALLREDUCE_SEGMENT */
    const struct dl_cost_params *cost; /* auto: measured parameters; NULL = dl_cost_defaults */
};

typedef int (*dl_allreduce_fn)(struct dl_comm *c, float *buf, size_t n,
                               const struct dl_allreduce_opts *opts, struct dl_error *err);

struct dl_allreduce_algo {
    const char *name;    /* "ring", "recursive_doubling", ... */
    const char *summary; /* one line for --help */
    dl_allreduce_fn run;
    dl_cost_fn cost;     /* predicted seconds; NULL when there is no model (native) */
};

/* The algorithm called name ("ring", "recursive_doubling" (or "rd"),
 * "rabenseifner", "tree", "ps", "native", "auto"), or NULL. */
const struct dl_allreduce_algo *dl_allreduce_find(const char *name);
/* The i-th registered algorithm (i from 0), or NULL past the end; "auto" last. */
const struct dl_allreduce_algo *dl_allreduce_at(int i);
/* Runs algorithm name on n values of dtype (f32, or bf16: the f32 sum
 * rounded once, by any algorithm; "native" leaves bf16 to the backend);
 * opts may be NULL.  Unknown names are DL_ERR_SPEC. */
int dl_allreduce(struct dl_comm *c, const char *name, void *buf, enum dl_dtype dtype, size_t n,
                 const struct dl_allreduce_opts *opts, struct dl_error *err);
/* The algorithm auto picks for n floats on c (the cheapest modelled one). */
const struct dl_allreduce_algo *dl_allreduce_choose(const struct dl_comm *c, size_t n,
                                                    const struct dl_allreduce_opts *opts);

/* One function per algorithm file. */
int dl_allreduce_ring(struct dl_comm *c, float *buf, size_t n,
                      const struct dl_allreduce_opts *opts, struct dl_error *err);
int dl_allreduce_recursive_doubling(struct dl_comm *c, float *buf, size_t n,
                                    const struct dl_allreduce_opts *opts, struct dl_error *err);
int dl_allreduce_rabenseifner(struct dl_comm *c, float *buf, size_t n,
                              const struct dl_allreduce_opts *opts, struct dl_error *err);
int dl_allreduce_tree(struct dl_comm *c, float *buf, size_t n,
                      const struct dl_allreduce_opts *opts, struct dl_error *err);
int dl_allreduce_ps(struct dl_comm *c, float *buf, size_t n,
                    const struct dl_allreduce_opts *opts, struct dl_error *err);

/* allreduce_bf16.c: n bf16 values summed over the ranks with bf16 on the
 * wire: each rank sends its bf16 values of block b to block b's owner,
 * which sums the p contributions in f32 in rank order and rounds once;
 * the rounded blocks are then allgathered.  The result is the f32 sum
 * rounded once, the same on every rank, and each rank sends 2 (p - 1) / p
 * x 2n bytes: half of a ring allreduce of the f32 values
 * (dl_allreduce_ring_bytes).  *bytes_sent (may be NULL) gets that count. */
int dl_allreduce_bf16_wire(struct dl_comm *c, dl_bf16 *buf, size_t n, size_t *bytes_sent, struct dl_error *err);

/* ---- shared helpers (allreduce_util.c) ---- */

/* First element of block i when n elements are cut into p blocks whose sizes
 * differ by at most one (the first n % p blocks are the longer ones). */
static inline size_t dl_block_lo(size_t n, int p, int i)
{
    size_t q = n / (size_t)p, r = n % (size_t)p;
    return q * (size_t)i + ((size_t)i < r ? (size_t)i : r);
}

/* Bytes one rank sends in a ring allreduce of n floats on p ranks,
 * 2 (p - 1) / p x 4n (the bandwidth-optimal algorithms send as much). */
size_t dl_allreduce_ring_bytes(int p, size_t n);
/* dst[i] += src[i]. */
void dl_reduce_add(float *restrict dst, const float *restrict src, size_t n);
/* Segment length in floats for opts (at least 1). */
size_t dl_segment_floats(const struct dl_allreduce_opts *opts);
/* Sends sn floats from s to peer while receiving rn floats from peer and
 * adding them into d, in segments so that the adds overlap the transfer.
 * tmp holds rn floats.  s and d must not overlap. */
int dl_exchange_add(struct dl_comm *c, int peer, const float *s, size_t sn, float *d, size_t rn,
                    float *tmp, size_t seg, int tag, struct dl_error *err);

/* Runs a power-of-two algorithm on any number of ranks with the standard
 * fix-up: the first 2*rem ranks pair up (rem = p - p2, p2 the largest power
 * of two <= p), the even one of a pair hands its vector to the odd one and
 * sits out, the others run core as virtual ranks 0..p2-1 (real rank:
 * dl_pow2_real), and the result goes back to those who sat out.  core gets
 * c's scratch space of n floats as tmp. */
typedef int (*dl_pow2_core)(struct dl_comm *c, float *buf, size_t n, float *tmp, int vrank,
                            int p2, const struct dl_allreduce_opts *opts, struct dl_error *err);
int dl_pow2_run(struct dl_comm *c, float *buf, size_t n, const struct dl_allreduce_opts *opts,
                dl_pow2_core core, struct dl_error *err);
/* Real rank of virtual rank v inside dl_pow2_run on p ranks. */
int dl_pow2_real(int v, int p);

#endif
