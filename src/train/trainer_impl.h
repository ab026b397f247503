/* trainer_impl.h: the state of one rank's run (struct trainer) and the calls
 * between the trainer's files: trainer.c (dl_train: the run from start to
 * end), trainer_setup.c (the run's parts built and freed), trainer_grid.c
 * (tensor and pipeline ranks), trainer_trace.c (--trace), trainer_eval.c
 * (the test evaluation and the weights' check), trainer_checkpoints.c
 * (refusals, resume and saves), trainer_epochs.c (the worker ranks' steps)
 * and trainer_serve.c (the server ranks). */
#ifndef DL_TRAINER_IMPL_H
#define DL_TRAINER_IMPL_H

#include <stdio.h>

#include "data/batcher.h"
#include "data/bpe.h"
#include "data/dataset.h"
#include "parallel/grid.h"
#include "parallel/strategy.h"
#include "comm/flight.h"
#include "parallel/watchdog.h"
#include "parallel/zero.h"
#include "train/batch_ahead.h"
#include "train/checkpoint.h"
#include "train/pipeline.h"
#include "train/tied.h"
#include <pthread.h>

#include "train/checkpoint_grid.h"
#include "train/trainer.h"

/* The samples this rank reads: the splits, the batcher of its shard, and
 * the batch of the step in progress. */
struct trainer_data {
    struct dl_dataset train, test;
    struct dl_batcher batcher;
    struct dl_batch_ahead batches;  /* this rank's part of each batch, read (and copied) a step ahead */
    const struct dl_batch_slot *batch; /* the step's */
    /* A loss that ignores a label: its mean is over the labelled positions
     * of the whole mini-batch (the batcher counts them per step) and of
     * the whole test split (counted once, test_label_norm; < 0 before). */
    int counts_labels, ignored_label;
    double test_label_norm;
};

/* Where the run starts: a checkpoint's point when resumed, else 0. */
struct trainer_resume {
    int done;                       /* the run resumed from a checkpoint */
    long epoch, step;               /* step: global steps already done */
    struct dl_checkpoint_meta meta;
};

/* The checkpoint schedule and the network file's checksum they record. */
struct trainer_checkpoints {
    long steps_since;
    double last_time;
    uint32_t net_crc;
    /* --checkpoint-async: the writer's thread writing `snapshot` to path
     * (writing: started, not yet joined), and how that went */
    pthread_t thread;
    int writing;
    struct dl_checkpoint_snapshot *snapshot;
    struct dl_checkpoint_meta meta;
    char path[1100];
    int rc;
    struct dl_error err;
};

/* Everything one rank's run holds. */
struct trainer {
    const struct dl_net *net;
    const struct dl_train_opts *opts;
    const struct dl_train_hooks *hooks;
    struct dl_comm *comm;
    int own_comm;
    int reporter;                   /* rank 0: the one that reports */
    enum dl_dtype precision;        /* train.precision, auto resolved by what auto_probe measured */
    struct dl_precision_probe auto_probe;
    struct dl_rank_layout layout;   /* role, data shard, evaluation, checkpoint writer */
    struct trainer_data data;
    struct dl_pipeline pipe;        /* the executors of this rank's step */
    struct dl_step_guard guard;     /* the step guards' window and counts (installed: guarded) */
    int guarded;
    /* the routing layers' load of the last step (trainer_epochs.c's
     * expert_load): [n_expert_layers], their counts in expert_counts */
    struct dl_expert_layer_load *expert_layers;
    int n_expert_layers;
    float *expert_counts;
    struct dl_tied *tied;           /* copies of tied parameters summed across pipeline ranks, or NULL */
    int zero;                       /* --zero 1 on more than one data-parallel rank: */
    struct dl_zero_shard zero_shard; /*   this rank's block of the weights and optimizer state */
    int sharded;                    /* a grid of tensor or pipeline ranks: */
    struct dl_grid grid;            /*   this rank's place and group communicators */
    struct dl_shard shard;          /*   its part of the network */
    struct dl_comm *tensor_device_comm; /* its tensor group over the device's own communicator (NCCL), or NULL */
    struct dl_comm *data_comm;      /* the data-parallel group: the world, or the grid's */
    struct dl_watchdog *watchdog;   /* stalls in the tensor and pipeline groups' blocking calls */
    struct dl_flight *flight;       /* the flight recorder (several ranks), or NULL */
    struct dl_comm *flight_data;    /* without a grid: the recorded world, data_comm (closed first) */
    struct dl_optim optim;
    struct dl_strategy *strategy;
    long steps_per_epoch, total_steps;
    double run_start;
    struct trainer_resume resume;
    struct trainer_checkpoints checkpoints;
    /* --trace: the recorder (NULL: off); whether a non-finite loss, which
     * every rank sees at the same step, ended the training loop; and
     * whether every rank left the loop together (it ran out, a stop
     * signal, or that loss), so that they can meet to gather their events
     * whatever happens after it */
    struct dl_trace *trace;
    int nonfinite_stop, left_loop_together;
    struct dl_bpe *bpe;             /* --sample-every's vocabulary (NULL: bytes) */
    FILE *dump_batches;             /* --debug-dump-batches (rank 0) */
};

/* The running sums of the epoch in progress. */
struct epoch_tally {
    double start;                   /* clock at the epoch's start */
    double loss_sum, correct;       /* over the samples seen */
    long seen, step;                /* samples and steps so far, a resumed epoch's earlier ones included */
    long seen_before;               /* samples done before a resume */
    double comm_seconds, exposed_seconds;
};

/* ------------------------------------------------------------ trainer.c */
/* Warnings of any rank (stall detection names missing ranks from rank 0 or 1);
 * ctx is the trainer. */
void dl_trainer_forward_warning(void *ctx, const char *msg);
/* Warnings of the run, reported by rank 0. */
void dl_trainer_warn(struct trainer *tr, const char *msg);

/* ------------------------------------------------------------ trainer_setup.c */
/* The communicator, grid, trace, data, executors, optimizer and strategy of
 * the run, and what they cannot do together; freed by dl_trainer_teardown
 * (also after a failed setup). */
int dl_trainer_setup(struct trainer *tr, struct dl_error *err);
void dl_trainer_teardown(struct trainer *tr);

/* ------------------------------------------------------------ trainer_grid.c */
/* The pipeline stages each pipeline rank holds: V for interleaved:V, else 1. */
int dl_trainer_stages_per_rank(const struct dl_train_opts *o);
/* With tensor or pipeline ranks: this rank's place, group communicators and
 * shard, and what the grid cannot do (sets data_comm in every case). */
int dl_trainer_open_grid(struct trainer *tr, struct dl_error *err);
/* With a grid, the first `sums` of the n values v counted once (on the
 * loss's stage, tensor rank 0) and all of them summed over the grid. */
int dl_trainer_agree_over_grid(struct trainer *tr, double *v, int n, int sums, struct dl_error *err);
/* strategy->model_sum on a grid: a squared norm summed over the tensor and
 * pipeline groups (ctx is the trainer). */
int dl_trainer_model_norm_sum(void *ctx, double *sq, struct dl_error *err);

/* ------------------------------------------------------------ trainer_trace.c */
int dl_trainer_open_trace(struct trainer *tr, struct dl_error *err);
/* The run's status rc, or the trace's failure when the run had none. */
int dl_trainer_finish_trace(struct trainer *tr, int rc, struct dl_error *err);

/* ------------------------------------------------------------ trainer_eval.c */
int dl_trainer_evaluate(struct trainer *tr, struct dl_epoch_report *er, struct dl_error *err);
int dl_trainer_evaluate_final(struct trainer *tr, struct dl_train_result *res, struct dl_error *err);
int dl_trainer_check_weights(struct trainer *tr, long global_step, struct dl_error *err);
/* ZeRO stage 3 (parallel/zero_weights.h): whole 1 gathers every weight on
 * every data-parallel rank before something reads the whole vector (or one
 * rank runs the executor alone), whole 0 releases them again (also after
 * the whole vector was written on every rank); nothing otherwise. */
int dl_trainer_weights_whole(struct trainer *tr, int whole, struct dl_error *err);

/* ------------------------------------------------------------ trainer_checkpoints.c */
int dl_trainer_refuse_checkpoints(const struct trainer *tr, struct dl_error *err);
/* --checkpoint-async: waits for the checkpoint being written (if any) and
 * reports it as a synchronous save would (res->last_checkpoint; a failure
 * warned about, or with --strict-checkpoints returned). */
int dl_trainer_checkpoint_wait(struct trainer *tr, struct dl_train_result *res, struct dl_error *err);
int dl_trainer_resume(struct trainer *tr, struct dl_train_result *res, struct dl_error *err);
int dl_trainer_checkpoint_due(struct trainer *tr);
int dl_trainer_save_checkpoint(struct trainer *tr, long global_step, const struct epoch_tally *tally,
                               struct dl_train_result *res, int now, struct dl_error *err);

/* ------------------------------------------------------------ trainer_epochs.c */
/* A worker's epochs until the run's steps or a stop signal end them
 * (DL_STOPPED), then the strategy's end. */
int dl_trainer_train_epochs(struct trainer *tr, struct dl_train_result *res, struct dl_error *err);

/* ------------------------------------------------------------ trainer_serve.c */
/* A server rank's run: it serves the workers until they finish. */
int dl_trainer_serve(struct trainer *tr, struct dl_train_result *res, struct dl_error *err);

#endif
