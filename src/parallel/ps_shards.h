/* ps_shards.h: what the strategies with server ranks share (param_server.c,
 * easgd_async.c): ranks 0..K-1 serve, each owning a contiguous shard of the
 * weights, the others are workers that share the global batches; at the end
 * rank 0 gathers the servers' shards (and the first worker's batch-norm
 * statistics) and alone evaluates them; a server keeps a slot per worker. */
#ifndef DL_PS_SHARDS_H
#define DL_PS_SHARDS_H

#include "parallel/strategy.h"

/* K for the options and rank count (at least 1, at most size - 1). */
int dl_ps_servers(const struct dl_parallel_opts *po, int size);
/* Servers 0..K-1, workers the rest (data ranks 0..size-K-1), rank 0
 * evaluates at the end, no checkpoints. */
void dl_ps_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);
/* Server s's shard [lo, hi) of n weights (shard 0 is the largest). */
void dl_ps_shard(long n, int servers, int s, long *lo, long *hi);
/* Every server sends its shard of e's weights, the first worker its
 * statistics, to rank 0 (called on every rank at the end). */
int dl_ps_gather_final(struct dl_comm *c, struct dl_exec *e, int servers, struct dl_error *err);

/* What a server knows of one worker. */
struct dl_ps_worker_slot {
    unsigned char *msg;      /* the worker's message being received */
    struct dl_comm_req req;
    long clock;              /* the worker's step in its last message */
    int finished;            /* it said "done" */
    int waiting;             /* the parameter server owes it an answer */
};

/* The clock of the slowest unfinished worker of w[0..n), or -1. */
long dl_ps_slowest(const struct dl_ps_worker_slot *w, int n);

#endif
