/* param_server.h: asynchronous and stale-synchronous training with a sharded
 * parameter server (Li et al. 2014; Ho et al. 2013).  Ranks 0..K-1 are servers,
 * each owning a contiguous shard of the weights and the optimizer state for
 * it; the other ranks are workers.  A worker sends its gradient of step c to
 * every server and waits for the fresh shards.  A server applies gradients in
 * the order they arrive and answers a worker at clock c only when the slowest
 * unfinished worker has reached c - S (SSP; async: S = infinity), so no worker
 * runs more than S steps ahead of the slowest. */
#ifndef DL_PARAM_SERVER_H
#define DL_PARAM_SERVER_H

#include "parallel/strategy.h"

struct dl_ps_update {
    int worker;      /* worker index (0-based, rank - K) */
    long clock;      /* the worker's step (1-based) */
    long updates;    /* updates this server has applied so far */
    double loss;     /* the worker's mean batch loss */
    double accuracy;
    int batch;
    int staleness;   /* clock - slowest unfinished worker's clock when answered */
};

struct dl_ps_server_args {
    struct dl_comm *comm;
    struct dl_exec *exec;        /* weights live here (the shard is a range) */
    const struct dl_optim_spec *optim;
    int servers;                 /* K */
    int staleness;               /* S; < 0 for async */
    double (*lr_at)(void *ctx, long update); /* learning rate of the u-th update */
    void *lr_ctx;
    void (*on_update)(void *ctx, const struct dl_ps_update *u);
    void *update_ctx;
};

struct dl_ps_result {
    long updates;
    int max_staleness;
};

/* Runs a server until every worker has finished, then leaves the final
 * weights (and the first worker's batch-norm statistics) on rank 0. */
int dl_ps_serve(const struct dl_ps_server_args *a, struct dl_ps_result *res, struct dl_error *err);

/* 1 when rank is a server under these options. */
int dl_ps_is_server(const struct dl_parallel_opts *po, int rank);
/* Number of servers for the options and world size (at least 1, at most size-1). */
int dl_ps_servers(const struct dl_parallel_opts *po, int size);

#endif
