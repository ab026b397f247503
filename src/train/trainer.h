/* trainer.h: the training loop.  Loads the data (this rank's shard), builds
 * the executor, the optimizer and the consistency strategy (serial, sync
 * data parallel, local SGD, parameter server), runs epochs of mini-batch
 * steps with the learning-rate schedule, evaluates on the test split, and
 * reports progress through callbacks on rank 0 only (the library never
 * prints; src/cli/ does). */
#ifndef DL_TRAINER_H
#define DL_TRAINER_H

#include "comm/comm.h"
#include "plan/rank_grid.h"
#include "parallel/schedule.h"
#include "parallel/strategy.h"
#include "spec/netfile.h"
#include "train/precision_auto.h"
#include "train/step_guard.h"

/* One routing layer's load over a step's mini-batch (a mixture of experts). */
struct dl_expert_layer_load {
    const char *layer;          /* its name */
    int experts;
    const float *taken;         /* [experts]: the choices each expert took */
    double dropped, choices;    /* the choices dropped over capacity, and all of them */
};

struct dl_step_report {
    int epoch, epochs;          /* 1-based epoch */
    long step, steps_per_epoch; /* 1-based step within the epoch */
    long global_step, total_steps;
    double loss;                /* mean loss of this (global) batch, the layers' own losses included */
    double added_loss;          /* the layers' own part of it (the mixture of experts' balancing), NaN
                                   for a network without such layers */
    double expert_max_load;     /* a mixture of experts' most loaded expert over its layer's mean (1:
                                   balanced), over the mini-batch; NaN without such layers */
    double expert_dropped;      /* the share of the experts' choices dropped over capacity; NaN likewise */
    int skipped;                /* 1: the step guard skipped this step's update (guard_why says why) */
    const char *guard_why;
    long skipped_steps;         /* in the run so far */
    int n_expert_layers;        /* each routing layer's load (valid during the call) */
    const struct dl_expert_layer_load *expert_layers;
    double accuracy;            /* fraction correct in this batch (NaN for a regression loss) */
    double lr;
    double samples_per_s;       /* global, since the start of the epoch */
    double eta_s;               /* estimated seconds left in the run */
    double comm_seconds;        /* gradient exchange time of this step */
    double exposed_comm_seconds;/* the part of it backward did not hide */
    size_t bytes_sent;          /* by rank 0 in this step's exchange (gradients, weights or center) */
    double consensus_distance;  /* of the ranks' weights (strategy.h), NaN when not measured */
    double grad_norm;           /* of the whole model's gradient before clipping, NaN when not measured */
    double step_seconds;        /* this rank's wall time of the step, from asking for its batch to its
                                   metrics (NaN where not measured: a parameter server's updates) */
    double input_seconds;       /* the part of it spent waiting for the batch */
    int staleness;              /* parameter server: clock gap of this update */
    int worker;                 /* parameter server: which worker (-1 otherwise) */
};

struct dl_epoch_report {
    int epoch, epochs;
    double train_loss, train_accuracy; /* means over the epoch's batches */
    double test_loss, test_accuracy;   /* over the whole test split (accuracies NaN for a regression loss) */
    double test_top5;                  /* the label among the five best scores: NaN where not counted (5 classes
                                          or fewer, a regression loss, classes split over the tensor group) */
    long test_samples;
    double seconds, samples_per_s;
    double comm_seconds, exposed_comm_seconds; /* summed over the epoch */
    int evaluated;                     /* 0 when this epoch had no evaluation */
};

/* What one rank's executors and optimizer hold (train/pipeline.h's
 * struct dl_pipeline_memory, with the optimizer), as dltrain check --grid
 * plans it. */
struct dl_rank_memory {
    int rank, d, t, p;           /* world rank and grid position (data parallelism alone: d = rank) */
    int slots;                   /* executors (pipeline chunks in flight) */
    double arena_bytes;          /* their arenas */
    double weights, state;       /* parameters (floats): trainable, others */
    double gradients;            /* gradient values (floats): one per weight, but ZeRO-2's block and buckets */
    double optimizer_state;      /* the optimizer's state (floats) */
};

struct dl_train_hooks {
    void *ctx;
    /* Rank 0, after on_start: every rank's memory, in rank order. */
    void (*on_memory)(void *ctx, const struct dl_rank_memory *ranks, int n);
    void (*on_start)(void *ctx, const struct dl_net *net, long train_samples, long test_samples,
                     long steps_per_epoch, int ranks, const char *strategy);
    void (*on_step)(void *ctx, const struct dl_step_report *r);
    void (*on_epoch)(void *ctx, const struct dl_epoch_report *r);
    void (*on_warning)(void *ctx, const char *msg);
    /* --eval-every: the test split's loss after global_step (r's test fields). */
    void (*on_eval)(void *ctx, long global_step, const struct dl_epoch_report *r);
    /* --sample-every: the text drawn after global_step (len bytes, not terminated). */
    void (*on_sample)(void *ctx, long global_step, const char *text, size_t len);
};

struct dl_train_opts {
    struct dl_comm *comm;             /* the world; NULL = one process */
    struct dl_exec_options exec;      /* kernel choices, micro-batch plan or tuner (zero: the defaults);
                                         their precision is the network's train.precision and recompute
                                         its parallel.recompute (whatever the options say), device NULL:
                                         train.device's; parallel.sync_bn adds sync_stats to them */
    struct dl_parallel_opts parallel; /* its zero: the network's parallel.zero (whatever it says here) */
    /* Model, pipeline and hybrid parallelism (doc/parallel.md): the grid
     * (zero: data parallelism over every rank; its sp: the network's
     * parallel.sequence_parallel, whatever it says here), the chunks each
     * rank's part of a mini-batch is cut into (0: the network's
     * parallel.micro_batches, else 1 without a pipeline, 4 x pp with one),
     * the pipeline schedule and its stages per pipeline rank
     * (interleaved:V; 0 or 1 otherwise). */
    struct dl_grid_dims grid;
    int pipeline_chunks;
    enum dl_pipe_schedule pipeline_schedule;
    int pipeline_virtual;
    const char *dump_weights;         /* rank 0 writes the final flat weights (raw float32) here */
    /* Checkpoints (train/checkpoint.h): rank 0 writes DIR/ckpt-STEP.safetensors
     * when due and when a stop signal (SIGTERM, SIGINT, SIGUSR1) arrives. */
    const char *net_path;             /* its CRC goes into the checkpoint */
    const char *checkpoint_dir;       /* NULL: no checkpoints */
    long every_steps;                 /* > 0: every this many steps */
    double every_seconds;             /* > 0: every this many seconds (rank 0's clock) */
    int keep;                         /* checkpoints kept in the folder (0: all) */
    int strict_checkpoints;           /* 1: a failed write stops training */
    int checkpoint_async;             /* 1: the step waits for the state's copy only; a thread writes the file */
    int resume;                       /* 1: continue from resume_path, or the latest in the folder */
    const char *resume_path;
    /* Start from these weights (Hugging Face's GPT-2 or LLaMA safetensors,
     * or save_pretrained's folder: train/hf_weights.h) instead of the
     * seed's; NULL: none.  --resume wins. */
    const char *init_from;
    /* Every this many steps (0: never): the test split's loss and accuracy
     * (on_eval), and rank 0's sample of sample_tokens tokens from the
     * network drawn at temperature 1 from <|endoftext|> (a newline for a
     * byte network) with the seed and the step (on_sample; one process or
     * data parallelism; GPT-2's BPE, vocab/gpt2.tiktoken, for a network of
     * more than 256 classes). */
    long eval_every, sample_every;
    int sample_tokens;
    /* Testing aid: after this global step (> 0) every rank waits, up to 10
     * minutes, for a stop signal, so that a test's signal lands at a known
     * step instead of racing the run's end. */
    long hold_at_step;
    /* Testing aid (benchmarks against other frameworks): rank 0 appends
     * each step's batch to this file, its samples' inputs (4-byte elements:
     * f32, or i32 token ids) then their labels (int32, one per position). */
    const char *dump_batches_path;
    /* --trace FILE: rank 0 writes Chrome trace-event JSON of every rank's
     * first trace_steps steps (0: all; io/trace_json.h) at the end of the
     * run, also when a signal or an error stops it early. */
    const char *trace_path;
    long trace_steps;
    /* Testing aid (--debug-trace-skew R:MS): rank trace_skew_rank's trace
     * clock runs trace_skew_s ahead of the others (-1: none), which the
     * clock alignment must take out. */
    int trace_skew_rank;
    double trace_skew_s;
    /* Step guards (train/step_guard.h): which updates are skipped. */
    struct dl_step_guard_opts guard;
    /* Testing aid (--debug-poison-grad STEP:RANK[:VALUE]): at global step
     * poison_step (> 0) rank poison_rank's first weight gradient starts
     * from poison_value (NaN, or a finite value for a spike). */
    long poison_step;
    int poison_rank;
    double poison_value;
    /* The flight recorder's folder (comm/flight.h; NULL: CHECKPOINT_DIR/flight,
     * else dltrain-flight), and its testing aid (--debug-stop-calls
     * STEP:RANK:LABEL; stop_calls_step 0: none; stop_calls_crash 1:
     * --debug-crash-calls, the rank dies of SIGSEGV there instead). */
    const char *flight_dir;
    long stop_calls_step;
    int stop_calls_rank, stop_calls_crash;
    char stop_calls_label[48];
};

struct dl_train_result {
    struct dl_epoch_report last;      /* the final evaluation */
    long steps;
    double seconds;
    int max_staleness;                /* parameter server */
    double comm_seconds, exposed_comm_seconds;
    size_t bytes_sent, dense_bytes;   /* gradient exchange, this rank, whole run */
    int preempted;                    /* stopped by a signal (the status is DL_EXIT_PREEMPTED) */
    char last_checkpoint[1100];       /* the last checkpoint written ("" if none) */
    long resumed_step;                /* > 0: the run continued from this step */
    int bf16_layers;                  /* layers this rank's executors run with a bf16 kernel (train.precision
                                         bf16: onednn-bf16, or reference-bf16 where the CPU has none; 0 in fp32) */
    int precision_auto;               /* train.precision auto: its step was timed in both precisions: */
    struct dl_precision_probe precision_probe; /* what rank 0 measured, which decided */
};

/* dl_train's status when a stop signal ended the run after a checkpoint was
 * written (the CLI exits with DL_EXIT_PREEMPTED, 75). */
#define DL_STOPPED 100

/* Steps --trace records unless told (--trace-steps). */
#define DL_TRACE_DEFAULT_STEPS 20

/* No checkpoints, no dumps, no trace (DL_TRACE_DEFAULT_STEPS when one is
 * asked for), and the parallel options' defaults (dl_parallel_opts_defaults:
 * sync, 25 MiB buckets, overlap on, ...). */
void dl_train_opts_defaults(struct dl_train_opts *o);

/* Trains net with opts.  The network file is the one reader of the run's
 * settings (issue 41): a program that passes a parsed network with the
 * default options trains as `dltrain --net FILE` does, without copying the
 * file into the options.  The rule, key by key:
 *   - train.* (batch, epochs, max_steps, seed, optimizer, schedule,
 *     clip_grad_norm) are read from net->train where they are used;
 *     train.precision picks the executors' kernels, whatever opts->exec's
 *     kernel choices say (auto: the precision whose step rank 0 times
 *     faster, train/precision_auto.h; res says what it measured);
 *   - parallel.zero, parallel.sequence_parallel (grid.sp) and
 *     parallel.recompute (exec.recompute) are the file's, whatever opts
 *     says: a caller changes them in net (the CLI's --zero,
 *     --sequence-parallel and --recompute are --set overrides applied
 *     when the file is parsed);
 *   - parallel.micro_batches is the chunk count when opts->pipeline_chunks
 *     is 0 (the CLI's --pipeline-chunks and --parallel auto's plan win);
 *   - train.device is opened (dl_device_open, the node's local rank) when
 *     opts->exec.device is NULL;
 *   - the grid (parallel.strategy, dp, tp, pp) stays the caller's:
 *     opts->grid, resolved for the rank count (zero: data parallelism
 *     over every rank), which the CLI resolves from the file, --grid,
 *     --parallel and the planner.
 * dl_train reads these from a copy of opts; the caller's is left as it is. */
int dl_train(const struct dl_net *net, const struct dl_train_opts *opts, const struct dl_train_hooks *hooks,
             struct dl_train_result *res, struct dl_error *err);

#endif
