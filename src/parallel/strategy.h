/* strategy.h: how a rank turns its local gradient into new weights, one
 * implementation per consistency model, so that the training loop is the
 * same for all of them:
 *   serial      one process: the optimizer step;
 *   sync        bucketed, overlapped allreduce of gradients, then the
 *               optimizer (every rank holds the same weights);
 *   local-sgd:K local optimizer steps, weights and batch-norm statistics
 *               averaged over the ranks every K steps;
 *   ssp:S/async parameter server: see param_server.h (workers only here). */
#ifndef DL_STRATEGY_H
#define DL_STRATEGY_H

#include "comm/codec.h"
#include "exec/exec.h"
#include "optim/optim.h"

enum dl_consistency { DL_CONS_SYNC, DL_CONS_SSP, DL_CONS_ASYNC, DL_CONS_LOCAL_SGD };

struct dl_parallel_opts {
    enum dl_consistency consistency;
    int staleness;             /* ssp: S */
    int local_steps;           /* local-sgd: K */
    int ps_servers;            /* ssp/async: server ranks 0..K-1 */
    const char *allreduce;     /* algorithm name */
    struct dl_codec_spec codec;
    size_t bucket_bytes;
    int overlap;
    double stall_warning_s, stall_timeout_s;
    int sync_bn;               /* batch-norm statistics over every rank's samples */
    double slow_rank_ms;       /* testing aid: sleep per step on slow_rank */
    int slow_rank;
};

/* Parses --consistency values "sync", "ssp:S", "async", "local-sgd:K". */
int dl_consistency_parse(const char *text, struct dl_parallel_opts *o, struct dl_error *err);

struct dl_step_stats {
    double comm_seconds, exposed_seconds; /* gradient exchange time, and the part not hidden */
    size_t bytes_sent, dense_bytes;
    int max_staleness;                    /* parameter server: largest clock gap seen */
};

/* Values every step sums over the ranks: loss sum, number correct, a stop
 * signal pending on some rank, a checkpoint due (rank 0's clock decides). */
#define DL_STEP_METRICS 4

struct dl_strategy;

struct dl_strategy_ops {
    const char *name;
    /* Before backward; local/global batch sizes of this step. */
    int (*begin)(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err);
    /* After backward: from this rank's gradient (exec->dweights) to the new
     * weights of step (1-based) with learning rate lr.  metrics (loss sum,
     * number correct, signal pending, checkpoint due: see DL_STEP_METRICS)
     * are summed over the data-parallel ranks on the way. */
    int (*finish)(struct dl_strategy *s, long step, double lr, double metrics[DL_STEP_METRICS], struct dl_step_stats *st,
                  struct dl_error *err);
    /* After the last step: leaves the final weights on every rank. */
    int (*end)(struct dl_strategy *s, struct dl_error *err);
    void (*destroy)(struct dl_strategy *s);
};

struct dl_strategy {
    const struct dl_strategy_ops *ops;
    struct dl_comm *comm;
    struct dl_exec *exec;
    struct dl_optim *optim;
    void *impl;
};

/* Picks and builds the strategy for the options and the communicator
 * (serial when it has one rank).  warn receives stall warnings. */
int dl_strategy_create(struct dl_comm *c, struct dl_exec *e, struct dl_optim *o,
                       const struct dl_parallel_opts *po, uint64_t seed,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx,
                       struct dl_strategy **out, struct dl_error *err);
void dl_strategy_free(struct dl_strategy *s);

/* Constructors (one file each). */
int dl_strategy_serial(struct dl_strategy *s, struct dl_error *err);
int dl_strategy_sync(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed,
                     void (*warn)(void *ctx, const char *msg), void *warn_ctx, struct dl_error *err);
int dl_strategy_local_sgd(struct dl_strategy *s, const struct dl_parallel_opts *po, struct dl_error *err);
int dl_strategy_ps_worker(struct dl_strategy *s, const struct dl_parallel_opts *po, struct dl_error *err);

#endif
