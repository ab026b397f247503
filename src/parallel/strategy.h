/* strategy.h: how the ranks of a job share the training, one implementation
 * per consistency model, so that the training loop (train/trainer_epochs.c) reads
 * the same for all of them:
 *   serial      one process: the optimizer step (serial.c);
 *   sync        bucketed, overlapped allreduce of gradients, then the
 *               optimizer (every rank holds the same weights; sync.c);
 *   local-sgd:K local optimizer steps, weights and batch-norm statistics
 *               averaged over the ranks every K steps (local_sgd.c);
 *   ssp:S/async a sharded parameter server: server ranks run serve(), the
 *               workers push gradients and pull weights (param_server.c);
 *   gossip:TOPO decentralized: a local optimizer step, then the weights and
 *               batch-norm statistics mixed with a few neighbours' over a
 *               virtual topology (gossip.c, mixing.h);
 *   easgd:TAU   elastic averaging: local steps, and every TAU steps the
 *               workers and a center variable pull toward each other
 *               (easgd.c; easgd-async:TAU with server ranks holding the
 *               center, easgd_async.c).
 * A strategy decides each rank's role and data shard, what a worker's step
 * does after backward, who may evaluate and who writes checkpoints. */
#ifndef DL_STRATEGY_H
#define DL_STRATEGY_H

#include "comm/codec.h"
#include "exec/exec.h"
#include "optim/optim.h"
#include "parallel/mixing.h"

enum dl_consistency {
    DL_CONS_SYNC, DL_CONS_SSP, DL_CONS_ASYNC, DL_CONS_LOCAL_SGD, DL_CONS_GOSSIP, DL_CONS_EASGD, DL_CONS_EASGD_ASYNC
};

struct dl_parallel_opts {
    enum dl_consistency consistency;
    int staleness;             /* ssp: S */
    int local_steps;           /* local-sgd: K */
    int ps_servers;            /* ssp/async: server ranks 0..K-1 */
    enum dl_topology topology; /* gossip */
    int gossip_overlap;        /* gossip: D-PSGD's form, the exchange during the step */
    int easgd_tau;             /* easgd, easgd-async: TAU */
    double easgd_alpha;        /* easgd, easgd-async: ALPHA; 0: 0.9 / workers */
    int consensus_every;       /* consensus distance every this many steps (0: never) */
    const char *allreduce;     /* algorithm name */
    struct dl_codec_spec codec;
    enum dl_dtype grad_dtype;  /* sync: the dtype gradient buckets travel in (bf16: half the bytes) */
    size_t bucket_bytes;
    int overlap;
    double stall_warning_s, stall_timeout_s;
    int sync_bn;               /* batch-norm statistics over every rank's samples */
    int zero;                  /* sync: ZeRO stage 1 (parallel/zero.h), 2 (zero_grads.h) or 3 (zero_weights.h), 0 for none */
    double slow_rank_ms;       /* testing aid: sleep per step on slow_rank */
    int slow_rank;
    /* Set by the trainer with expert ranks (sync only): the ranks that hold
     * the same experts, over which their gradients are summed; NULL: none. */
    struct dl_comm *expert_replicas;
};

/* sync, auto allreduce, 25 MiB buckets, overlap on, 1 server, stall
 * warning 60 s, timeout 600 s, no slow rank. */
void dl_parallel_opts_defaults(struct dl_parallel_opts *o);

/* Parses --consistency values "sync", "ssp:S", "async", "local-sgd:K",
 * "gossip:TOPOLOGY", "easgd:TAU[,ALPHA]", "easgd-async:TAU[,ALPHA]"
 * (0 < ALPHA <= 1). */
int dl_consistency_parse(const char *text, struct dl_parallel_opts *o, struct dl_error *err);
/* What the options need of each other and of the rank count (gossip: 2 to
 * DL_MIXING_MAX_RANKS ranks; easgd: ALPHA x workers at most 1;
 * --gossip-overlap: gossip); DL_ERR_SPEC naming the option. */
int dl_parallel_opts_check(const struct dl_parallel_opts *o, int size, struct dl_error *err);
/* EASGD's workers on size ranks (easgd-async: those that do not serve). */
int dl_easgd_workers(const struct dl_parallel_opts *o, int size);
/* EASGD's alpha for that many workers: ALPHA, or 0.9 / workers. */
double dl_easgd_alpha(const struct dl_parallel_opts *o, int workers);

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
    int replicas_differ;       /* the workers' weights differ between steps (their
                                  consensus distance is measured); 0 for the strategies
                                  whose ranks hold the same weights, or no model */
};

void dl_strategy_layout(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);
/* The layout of sync and local SGD: every rank a worker on its own shard,
 * holding a model (the same one after each exchange): each evaluates a slice
 * of the test split, rank 0 writes checkpoints, --sync-bn is honoured. */
void dl_layout_data_parallel(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);
/* The layout of gossip and EASGD: that of data parallelism, but the ranks'
 * models differ until the end averages them, and no checkpoints (a
 * checkpoint would have to hold every rank's model to resume exactly). */
void dl_layout_decentralized(const struct dl_parallel_opts *po, int size, int rank, struct dl_rank_layout *out);

/* ------------------------------------------------------------ workers' steps */
/* What a step adds up over the data-parallel ranks in finish(). */
struct dl_step_metrics {
    double loss_sum;       /* the batch's per-sample losses, summed (the layers' own losses included
                              once train_step has agreed them) */
    double added_loss_sum; /* the layers' own losses (the mixture of experts' balancing), summed
                              over the samples, layers and (with a grid) the pipeline stages */
    double correct;        /* samples classified correctly */
    int stop_requested;    /* a stop signal is pending (on some rank, once summed) */
    int checkpoint_due;    /* the checkpoint writer's schedule says so */
    int samples;           /* the samples the sums cover: this rank's batch, and
                              the global batch once finish() has summed them */
};

/* The summed values in the order they travel (a vector of doubles). */
enum { DL_STEP_LOSS_SUM, DL_STEP_CORRECT, DL_STEP_STOP, DL_STEP_CHECKPOINT, DL_STEP_ADDED_LOSS, DL_STEP_METRICS };
void dl_step_metrics_pack(const struct dl_step_metrics *m, double v[DL_STEP_METRICS]);
void dl_step_metrics_unpack(const double v[DL_STEP_METRICS], struct dl_step_metrics *m);

struct dl_step_stats {
    double comm_seconds, exposed_seconds; /* gradient exchange time, and the part not hidden */
    size_t bytes_sent, dense_bytes;
    double consensus_distance; /* sqrt(mean_i ||w_i - w||^2) / ||w||, w = mean_i w_i (NaN: not measured) */
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
    long steps;            /* the workers' steps the updates stand for (0: one each) */
    int max_staleness;
};

/* ------------------------------------------------------------ the interface */
struct dl_strategy;

struct dl_strategy_ops {
    const char *name;
    /* What the model can do, declared by each table (a server role's as its
     * workers'); the trainer asks these of dl_strategy_model's table and
     * never compares the consistency model itself:
     *   supports_zero       --zero 1 or 2: the optimizer's state and the
     *                       gradient sums in blocks over the ranks (sync)
     *   supports_grid       tensor and pipeline ranks: the data-parallel
     *                       group of each grid position sums its gradients
     *                       every step (sync)
     *   supports_no_decay   train.optimizer.no_decay: the update leaves the
     *                       weights it names undecayed (not the parameter
     *                       server, which decays every weight)
     *   supports_clip_grad_norm  --clip-grad-norm: the update sees the
     *                       gradient whose norm is clipped (not the parameter
     *                       server, which applies each worker's on its own)
     *   supports_tied_across_ranks  a parameter tied across pipeline ranks:
     *                       its copies summed before one update (not the
     *                       parameter server, which updates them on their own)
     *   supports_step_guard  --skip-nonfinite, --skip-spikes: every rank
     *                       judges the same summed loss and gradient before
     *                       one update (sync; the others keep their own)
     *   optimizer_state_per_rank  every rank keeps its own optimizer state,
     *                       which the model does not average (local SGD), so
     *                       one rank's checkpoint of a stateful optimizer
     *                       cannot resume the others */
    int supports_zero, supports_grid, supports_no_decay, supports_clip_grad_norm, supports_tied_across_ranks;
    int supports_step_guard;
    int optimizer_state_per_rank;
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

struct dl_zero_weights;

struct dl_strategy {
    const struct dl_strategy_ops *ops;
    struct dl_comm *comm;
    struct dl_exec *exec;
    struct dl_optim *optim;
    struct dl_rank_layout layout;
    struct dl_sync_bn *sync_bn;   /* --sync-bn where the layout honours it, else NULL */
    void (*warn)(void *ctx, const char *msg); /* stall warnings */
    void *warn_ctx;
    int consensus_every;          /* from the options */
    float *mean;                  /* the consensus distance's work space (n_weights) */
    /* Gradient-norm clipping (train.clip_grad_norm): before each update the
     * gradient is scaled down to this L2 norm when above it (0: never), as
     * PyTorch's clip_grad_norm_; grad_norm is the last update's norm
     * before clipping (NaN: not measured).  model_sum adds up a squared
     * norm over the ranks holding the other parts of the model (a grid's
     * tensor and pipeline groups; NULL: this rank holds all of it). */
    double clip_norm, grad_norm;
    int (*model_sum)(void *ctx, double *sq, struct dl_error *err);
    void *model_ctx;
    /* Called on the gradient first, before clipping and the update (NULL:
     * none): the copies of tied parameters summed across pipeline ranks
     * (train/tied.c). */
    int (*before_update)(void *ctx, struct dl_error *err);
    void *update_ctx;
    /* ZeRO stage 3's gathered weights (parallel/zero_weights.h; sync with
     * --zero 3 over more than one rank), else NULL: the caller gathers them
     * all before it reads the whole vector (checkpoints) and attaches the
     * other executors that share s->exec's weights. */
    struct dl_zero_weights *zero_weights;
    /* Step guards (train/step_guard.h; NULL: none): called before each
     * update with the step's metrics summed over the data-parallel ranks
     * and the whole model's gradient norm (measured for it); *skip = 1
     * leaves the weights and the optimizer's state as they are.  skipped:
     * the last step's verdict. */
    int (*guard)(void *ctx, const struct dl_step_metrics *m, double grad_norm, int *skip, struct dl_error *err);
    void *guard_ctx;
    int skipped;
    long grad_values;             /* the gradient values this rank holds (ZeRO-2: its block and buckets); -1:
                                     one per weight, the executor's gradient vector */
    void *impl;
};

/* The table of the model po names, its workers' whatever the rank count
 * (one rank runs dl_strategy_serial): its capability flags are what the run
 * may ask of the model. */
const struct dl_strategy_ops *dl_strategy_model(const struct dl_parallel_opts *po);

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
 * (a --trace records it), after s->before_update, unless s->guard skips
 * it (given m, the step's metrics), the gradient clipped first when
 * s->clip_norm is set. */
int dl_strategy_optim_step(struct dl_strategy *s, double lr, const struct dl_step_metrics *m,
                           struct dl_error *err);
/* The norm clipping and the guard need: the whole model's from this
 * rank's sum of squares sq into s->grad_norm, then s->guard's verdict into
 * s->skipped, and *f the factor to scale the gradient by (1: leave it). */
int dl_strategy_judge(struct dl_strategy *s, double sq, const struct dl_step_metrics *m, double *f,
                      struct dl_error *err);
/* Clipping's rule: the whole model's norm from this rank's sum of squares
 * sq (the other parts added through s->model_sum) into s->grad_norm, and
 * *f the factor to scale the gradient by (below 1: clip; else leave it). */
int dl_strategy_clip_factor(struct dl_strategy *s, double sq, double *f, struct dl_error *err);
/* Sums m over the ranks (one small allreduce); its samples become global_batch. */
int dl_strategy_sum_metrics(struct dl_strategy *s, struct dl_step_metrics *m, int global_batch, struct dl_error *err);
/* Replaces every rank's weights and batch-norm statistics by their mean
 * over the ranks (allreduce algorithm, then a scaling by 1/p). */
int dl_strategy_average_model(struct dl_strategy *s, const char *algorithm, struct dl_error *err);
/* After the finish of step (1-based), on every worker: the consensus distance
 * of the workers' weights into *out when it is due (collective: every
 * worker calls it at the same steps), 0 for strategies whose ranks hold
 * the same weights, NaN when not measured (not due, or a parameter server,
 * whose workers hold no model of their own). */
int dl_strategy_consensus(struct dl_strategy *s, long step, double *out, struct dl_error *err);

/* The implementations (one file each). */
extern const struct dl_strategy_ops dl_strategy_serial, dl_strategy_sync, dl_strategy_local_sgd, dl_strategy_gossip,
    dl_strategy_easgd;
/* The parameter server's and asynchronous EASGD's two roles; all four share
 * one layout function (ps_shards.h). */
extern const struct dl_strategy_ops dl_strategy_ps_worker, dl_strategy_ps_server, dl_strategy_easgd_worker,
    dl_strategy_easgd_server;

#endif
