/* strategy.h: how the ranks of a job share the training, one implementation
 * per consistency model, so that the training loop (train/trainer.c) reads
 * the same for all of them:
 *   serial      one process: the optimizer step (serial.c);
 *   sync        bucketed, overlapped allreduce of gradients, then the
 *               optimizer (every rank holds the same weights; sync.c);
 *   local-sgd:K local optimizer steps, weights and batch-norm statistics
 *               averaged over the ranks every K steps (local_sgd.c);
 *   ssp:S/async a sharded parameter server: server ranks run serve(), the
 *               workers push gradients and pull weights (param_server.c).
 * A strategy decides each rank's role and data shard, what a worker's step
 * does after backward, who may evaluate and who writes checkpoints. */
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

/* sync, auto allreduce, 25 MiB buckets, overlap on, 1 server, stall
 * warning 60 s, timeout 600 s, no slow rank. */
void dl_parallel_opts_defaults(struct dl_parallel_opts *o);

/* Parses --consistency values "sync", "ssp:S", "async", "local-sgd:K". */
int dl_consistency_parse(const char *text, struct dl_parallel_opts *o, struct dl_error *err);

/* ------------------------------------------------------------ a rank's place */
enum dl_rank_role {
    DL_ROLE_WORKER, /* trains on a shard of every global batch: begin, finish, end */
    DL_ROLE_SERVER  /* holds state for the workers and answers them: serve, end */
};

/* Who evaluates the model. */
enum dl_eval_mode {
    DL_EVAL_SPLIT,      /* every rank holds a model: each evaluates a slice of the test
                           split (after every epoch and at the end), the sums are added */
    DL_EVAL_RANK0_FINAL /* rank 0 alone holds the whole model, after end(): it
                           evaluates the whole split once */
};

/* This rank's place in the strategy, known from the options and the rank
 * count alone (before any data or weights exist). */
struct dl_rank_layout {
    const char *strategy;      /* the strategy's name */
    enum dl_rank_role role;
    int data_ranks;            /* ranks that share every global batch */
    int data_rank;             /* this rank's shard (servers read none; 0) */
    enum dl_eval_mode eval;
    int checkpoint_writer;     /* the rank that writes checkpoints; -1: not supported */
    int sync_bn;               /* --sync-bn is honoured (batch-norm sums over the ranks) */
};

void dl_strategy_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);
/* The layout of sync and local SGD: every rank a worker on its own shard,
 * holding a model (the same one after each exchange): each evaluates a slice
 * of the test split, rank 0 writes checkpoints, --sync-bn is honoured. */
void dl_layout_data_parallel(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);

/* ------------------------------------------------------------ workers' steps */
/* What a step adds up over the data-parallel ranks in finish(). */
struct dl_step_metrics {
    double loss_sum;       /* the batch's per-sample losses, summed */
    double correct;        /* samples classified correctly */
    int stop_requested;    /* a stop signal is pending (on some rank, once summed) */
    int checkpoint_due;    /* the checkpoint writer's schedule says so */
    int samples;           /* the samples the sums cover: this rank's batch, and
                              the global batch once finish() has summed them */
};

/* The summed values in the order they travel (a vector of doubles). */
enum { DL_STEP_LOSS_SUM, DL_STEP_CORRECT, DL_STEP_STOP, DL_STEP_CHECKPOINT, DL_STEP_METRICS };
void dl_step_metrics_pack(const struct dl_step_metrics *m, double v[DL_STEP_METRICS]);
void dl_step_metrics_unpack(const double v[DL_STEP_METRICS], struct dl_step_metrics *m);

struct dl_step_stats {
    double comm_seconds, exposed_seconds; /* gradient exchange time, and the part not hidden */
    size_t bytes_sent, dense_bytes;
};

/* ------------------------------------------------------------ servers */
/* One update a server applied, as it reports it. */
struct dl_served_update {
    int worker;            /* the worker's data rank */
    long step;             /* the worker's step (1-based) */
    long updates;          /* updates this server has applied so far */
    double loss, accuracy; /* the worker's batch: mean loss, fraction correct */
    int batch;             /* its samples */
    int staleness;         /* step minus the slowest unfinished worker's step */
    double lr;             /* learning rate of this update */
};

struct dl_serve_hooks {
    void *ctx;
    double (*lr_at)(void *ctx, long step); /* the schedule's rate at a 0-based global step */
    void (*on_update)(void *ctx, const struct dl_served_update *u);
};

struct dl_serve_result {
    long updates;
    int max_staleness;
};

/* ------------------------------------------------------------ the interface */
struct dl_strategy;

struct dl_strategy_ops {
    const char *name;
    /* This rank's place (called without an instance, before create). */
    void (*layout)(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);
    /* Builds the implementation in s->impl (s->comm, exec, optim are set). */
    int (*create)(struct dl_strategy *s, const struct dl_parallel_opts *po, uint64_t seed, struct dl_error *err);
    /* Workers, before backward: local and global batch sizes of this step. */
    int (*begin)(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err);
    /* Workers, after backward: from this rank's gradient (exec->dweights) to
     * the new weights of step (1-based) with learning rate lr; m is summed
     * over the data-parallel ranks on the way when the strategy does so. */
    int (*finish)(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m, struct dl_step_stats *st,
                  struct dl_error *err);
    /* Servers: runs until every worker has finished. */
    int (*serve)(struct dl_strategy *s, const struct dl_serve_hooks *h, struct dl_serve_result *res,
                 struct dl_error *err);
    /* After the last step (collective where the strategy needs it; every rank
     * stops at the same step): leaves the final weights where layout.eval says.
     * May be NULL. */
    int (*end)(struct dl_strategy *s, struct dl_error *err);
    /* Workers: 1 when every data-parallel rank holds the same weights and
     * state, so that the checkpoint writer's state is the run's (local SGD:
     * right after an average).  NULL: always. */
    int (*consistent)(const struct dl_strategy *s);
    /* One line on how the job trains, for the start of the run; NULL: the name. */
    void (*describe)(const struct dl_strategy *s, char *buf, size_t size);
    void (*destroy)(struct dl_strategy *s);
};

struct dl_sync_bn;

struct dl_strategy {
    const struct dl_strategy_ops *ops;
    struct dl_comm *comm;
    struct dl_exec *exec;
    struct dl_optim *optim;
    struct dl_rank_layout layout;
    struct dl_sync_bn *sync_bn;   /* --sync-bn where the layout honours it, else NULL */
    void (*warn)(void *ctx, const char *msg); /* stall warnings */
    void *warn_ctx;
    void *impl;
};

/* Picks and builds the strategy of this rank for the options and the
 * communicator (serial when it has one rank), with synchronised batch norm
 * when asked for and honoured.  warn receives stall warnings. */
int dl_strategy_create(struct dl_comm *c, struct dl_exec *e, struct dl_optim *o,
                       const struct dl_parallel_opts *po, uint64_t seed,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx,
                       struct dl_strategy **out, struct dl_error *err);
void dl_strategy_free(struct dl_strategy *s);

/* The calls the training loop makes (see struct dl_strategy_ops). */
int dl_strategy_begin(struct dl_strategy *s, int local_batch, int global_batch, struct dl_error *err);
int dl_strategy_finish(struct dl_strategy *s, long step, double lr, struct dl_step_metrics *m,
                       struct dl_step_stats *st, struct dl_error *err);
int dl_strategy_serve(struct dl_strategy *s, const struct dl_serve_hooks *h, struct dl_serve_result *res,
                      struct dl_error *err);
int dl_strategy_end(struct dl_strategy *s, struct dl_error *err);
int dl_strategy_consistent(const struct dl_strategy *s);
void dl_strategy_describe(const struct dl_strategy *s, char *buf, size_t size);

/* The optimizer's update of s->exec's weights from its gradient at rate lr
 * (a --trace records it). */
void dl_strategy_optim_step(struct dl_strategy *s, double lr);

/* The implementations (one file each). */
extern const struct dl_strategy_ops dl_strategy_serial, dl_strategy_sync, dl_strategy_local_sgd;
/* The parameter server's two roles; they share one layout function. */
extern const struct dl_strategy_ops dl_strategy_ps_worker, dl_strategy_ps_server;

#endif
