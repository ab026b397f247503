/* gossip_exchange.h: one mixing step of gossip over a communicator: each
 * rank's vector of n floats goes to its out-neighbours of the topology
 * (parallel/mixing.h) and theirs come in, point to point and non-blocking,
 * then x <- (own + sum of the neighbours') / (neighbours + 1).  Split in
 * start / wait / combine so that a caller can compute while the vectors
 * travel (gossip.c's --gossip-overlap); `dltrain bench comm` times it. */
#ifndef DL_GOSSIP_EXCHANGE_H
#define DL_GOSSIP_EXCHANGE_H

#include <stddef.h>

#include "comm/comm.h"
#include "parallel/mixing.h"

struct dl_gossip_exchange {
    struct dl_comm *comm;
    enum dl_topology topology;
    size_t n;
    float *own;               /* this rank's vector as sent: the caller fills it before start */
    float *heard;             /* the in-neighbours' vectors, max_peers x n */
    int max_peers;
    int *offsets, peers;      /* D of the exchange in flight */
    struct dl_comm_req *reqs; /* receives, then sends */
    int in_flight;
    double started;           /* clock when the exchange was posted */
};

int dl_gossip_exchange_init(struct dl_gossip_exchange *x, struct dl_comm *c, enum dl_topology t, size_t n,
                            struct dl_error *err);
/* Waits for an exchange an error left in flight, then frees. */
void dl_gossip_exchange_free(struct dl_gossip_exchange *x);
/* Posts the exchange of x->own at 0-based step: receives from rank - d,
 * sends to rank + d (d in the topology's D at step). */
int dl_gossip_exchange_start(struct dl_gossip_exchange *x, long step, struct dl_error *err);
int dl_gossip_exchange_wait(struct dl_gossip_exchange *x, struct dl_error *err);
/* After wait: out[i - lo] <- the mix of element i (lo <= i < hi), plus
 * out[i - lo] - own[i] (the caller's local change since start) when
 * keep_local_change. */
void dl_gossip_exchange_combine(const struct dl_gossip_exchange *x, size_t lo, size_t hi, float *out,
                                int keep_local_change);
/* Bytes this rank sent in the last exchange. */
size_t dl_gossip_exchange_bytes(const struct dl_gossip_exchange *x);

#endif
