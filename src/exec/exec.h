/* exec.h: the executor.  Owns every buffer of one model replica (activations,
 * their gradients, kernel state kept from forward to backward, workspace,
 * weights, weight gradients and non-trainable state such as batch-norm
 * running statistics) and runs the graph forward and backward over a batch.
 *
 * Each layer runs through a kernel (backends/kernel.h) chosen per layer;
 * where a producer's memory layout differs from what a consumer wants, an
 * explicit reorder step sits between them.  Activations, gradients, kernel
 * state and workspace live in ONE arena whose offsets the memory planner
 * (plan/plan.h) derived from their lifetimes: nothing is allocated per step.
 *
 * Weights, their gradients and the state are each ONE contiguous array in
 * graph order (PyTorch layouts), so that the optimizer and the gradient
 * allreduce see flat vectors; per-layer parameter pointers point into them. */
#ifndef DL_EXEC_H
#define DL_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "backends/kernel.h"
#include "comm/comm.h"
#include "graph/graph.h"
#include "plan/shard.h"

struct dl_exec_impl; /* steps, tensors, kernel instances, arena: exec_impl.h */
struct dl_trace;     /* io/trace.h */

/* --recompute's choices (spec/netspec.h's dl_recompute_names order). */
enum dl_recompute { DL_RECOMPUTE_NONE, DL_RECOMPUTE_SELECTIVE, DL_RECOMPUTE_FULL };

/* How a layer is folded into another's kernel (dl_exec.fused). */
enum dl_fused {
    DL_NOT_FUSED,
    DL_FUSED_INTO_PRODUCER, /* a ReLU applied by the layer before it; its output is that layer's tensor */
    DL_FUSED_INTO_POOLING,  /* a ReLU moved into the max pooling that reads it, which reads the ReLU's
                               input instead (act[] then shows that input) */
};

/* The forward or backward being run: the batch it runs on, and what the
 * trainer says about it (how the loss is normalised, the pipeline chunk,
 * the keys of random choices).  dl_exec_forward sets input, labels and
 * batch; the trainer sets the others before a call (0, NULL: the
 * defaults). */
struct dl_exec_run {
    const void *input;                     /* the batch being run: values of g->input's dtype */
    const int *labels;
    /* On a device without host memory: the next forward's batch and labels
     * already in the device's memory (copied there ahead by the trainer,
     * train/batch_ahead.h), taken in place instead of copied in from
     * dl_exec_forward's x and labels, which stay the host's (the correct
     * answers are counted from them); NULL: copied in.  The batch is
     * values of g->input's dtype, as x is. */
    const void *input_resident;
    const int *labels_resident;
    int batch;                             /* size of the batch being run */
    /* Gradient of the mean loss seeds backward as loss_norm per sample (0:
     * 1/batch, the mean over this batch); chunks of a mini-batch set
     * 1/(mini-batch) so that their gradients add up to the mini-batch's. */
    double loss_norm;
    /* The loss's divisor (struct dl_op_call's label_norm): the labelled
     * positions per sample of the whole mini-batch (every rank's and
     * chunk's samples), set by the trainer; 0: those of each forward's
     * batch, counted by the executor from its labels. */
    double label_norm;
    int chunk;                             /* pipeline chunk of the next forward/backward (message tags) */
    /* What random choices (dropout) depend on besides the seed: the
     * training step, and the index of this executor's first sample in the
     * mini-batch (a data-parallel rank's or a pipeline chunk's offset). */
    uint64_t step;
    long sample0;
    /* The layers' own losses (op.h's added_loss: the mixture of experts'
     * load balancing) of the last training forward, summed over its
     * samples and layers (dl_exec_forward sets it). */
    double added_loss;
    /* dl_exec_correct's other count, when count_top5 is set (the trainer's
     * evaluation; a training step leaves it 0, sparing the second pass over
     * the scores): the rows (samples, positions) whose label is among the
     * five best scores, where dl_exec_counts_top5. */
    int count_top5;
    long top5;
};

/* Incremental decoding (the options' decode_positions): the absolute
 * position of the next forward's first position, and each attention
 * layer's key/value cache ([layer]; NULL for the others). */
struct dl_exec_decode {
    long position0, cache_len;
    dl_real **cache;
    int cache_shared;                      /* 1: the caches are another executor's */
};

/* Where each layer's parameters sit in the flat vectors. */
struct dl_exec_flat {
    long *weight_begin;                    /* [layer] first index of its weights in dweights */
    /* [param_first[layer] + j]: the first index of layer's parameter j in
     * the flat weights (a tied parameter: its owner's), -1 for none (state,
     * counters, a layer another rank runs) */
    long *weight_index, *param_first;
};

/* The caller's callbacks into the executor's steps: how a parallel run's
 * communication joins in (NULL: none). */
struct dl_exec_hooks {
    /* Called right after layer i's backward, when its weight gradients (the
     * dweights range [weight_begin[i], weight_begin[i+1])) are final for the
     * step: data parallelism starts the allreduce of full buckets here. */
    void (*grad_hook)(void *ctx, int layer);
    void *grad_hook_ctx;
    /* Passed to every op call (struct dl_op_call.sync_sum): synchronised
     * batch-normalisation statistics across data-parallel ranks. */
    void (*sync_sum)(void *ctx, double *v, int n);
    void *sync_ctx;
    /* ZeRO stage 3 (parallel/zero_weights.h): called before a layer's step
     * reads its parameters (use 1: forward and its recomputation; 2:
     * backward and the backward-weights pass) and right after it (use 0),
     * on every data-parallel rank in the same order.  A nonzero return
     * stops the executor with that error (in err). */
    int (*weights_hook)(void *ctx, int layer, int use, struct dl_error *err);
    void *weights_ctx;
};

/* What the executor reports about itself: its memory plan, and the time
 * its layers took. */
struct dl_exec_stats {
    size_t arena_bytes;                    /* planned peak of activations, gradients, state, workspace */
    size_t unplanned_bytes;                /* the same buffers without reuse, for comparison */
    /* Per-layer timing (dl_exec_timing_enable): seconds summed over calls;
     * reorder steps count towards the layer that consumes their output.
     * time_wgt: the backward-weights passes run on their own
     * (dl_exec_backward_weights; time_bwd has the rest of backward). */
    double *time_fwd, *time_bwd, *time_wgt;
};

struct dl_exec {
    /* The layers as this executor runs them: the network, or with a shard
     * (struct dl_exec_options) the rank's view of it (same layer indices;
     * only layers the shard runs have steps, kernels, activations and
     * parameters: the others have NULL act[], kernel[] and param[]). */
    const struct dl_graph *g;
    const struct dl_shard *shard;          /* NULL: the whole network on this process */
    int stage;                             /* the pipeline stage it runs (0 without a pipeline) */
    int first, end;                        /* its layers: [first, end) */
    int max_batch;
    /* [layer] its output: where its values are (NULL: not kept after
     * forward, or a layer of another stage), its per-sample shape with the
     * dtype its kernel produces (kernel.h "Dtypes") and its layout. */
    struct dl_tensor *act;
    dl_real ***param;                      /* [layer][j] into weights or state (j below the layer's n_params
                                              in the whole network: any number) */
    dl_real ***dparam;                     /* [layer][j] into dweights (NULL for state) */
    struct dl_rng *rng;                    /* [layer] its random state: dropout's key comes from it (and the step) */
    dl_real *weights, *dweights;           /* trainable parameters, flat */
    long n_weights;
    dl_real *state;                        /* non-trainable parameters, flat */
    long n_state;
    /* The layers' i64 counters (op.h's dtype; batch norm's
     * num_batches_tracked), flat in graph order: host memory on every
     * device, added to by the executor after a training forward (those
     * with counts_forwards), never averaged, summed or updated by an
     * optimizer; param[][] points at them as at any parameter. */
    int64_t *counters;
    long n_counters;
    struct dl_exec_flat flat;              /* the parameters' places in weights, dweights */
    struct dl_exec_run run;                /* the batch being run */
    struct dl_exec_decode decode;          /* incremental decoding's positions and caches */
    uint64_t seed;
    struct dl_exec_hooks hooks;            /* gradient and statistics communication */
    const struct dl_kernel **kernel;       /* [layer] the kernel that runs it */
    /* [layer] a ReLU folded into another layer's kernel (kernel.h, "Fused
     * ReLU"), with no step of its own (enum dl_fused); kernel[] names the
     * kernel that applies it. */
    int *fused;
    struct dl_exec_stats stats;            /* memory plan and per-layer times */
    /* --trace (the options'): every step of a recorded training step
     * appends an event (exec/trace_steps.c); NULL: off. */
    struct dl_trace *trace;
    int status;                            /* nonzero: a kernel instance could not be made (see err) */
    struct dl_error err;
    struct dl_exec_impl *impl;
};

/* A micro-batch planner (the tuner, tune/tune.h's dl_tune_exec_plan) that
 * dl_exec_init asks for the plan of the executor it makes. */
struct dl_mbplan;
struct dl_exec_tuner {
    int (*plan)(void *ctx, const struct dl_graph *g, int batch, const struct dl_kernel_choices *kernels,
                struct dl_mbplan *out, struct dl_error *err);
    void *ctx;
};

/* How an executor chooses its kernels and splits (all NULL: every op's
 * default kernel, ReLU fusion on, undivided layers).  Everything an
 * executor depends on is here, so two executors in one process may
 * differ (pipeline stages, tests comparing kernels). */
struct dl_exec_options {
    const struct dl_kernel_choices *kernels; /* --kernel, --no-fusion, --sync-bn's kernel rule */
    /* Layers this plan tunes run as sequences of micro-batches
     * (plan/mbplan.h; batch 0: none).  The plan is copied; it must be for at
     * most max_batch samples, and batches of another size run undivided.  A
     * plan that a kernel cannot follow (layouts, workspace slice too small,
     * state kept across a different split) is rejected (DL_ERR_SPEC). */
    const struct dl_mbplan *plan;
    /* With no plan: when tuner.plan is set, it is asked for one (--tune). */
    struct dl_exec_tuner tuner;
    /* A rank's part of a parallel run (plan/shard.h, doc/parallel.md; NULL:
     * the whole network).  The executor holds the layers of the shard's
     * pipeline stage in its local view; tensors from earlier stages arrive
     * by receive steps and go to later ones by send steps (pipeline), and
     * tensor-parallel slices, gathers and sums are steps too, planned in
     * the same arena.  Parameters are drawn whole from the seed exactly as
     * one process draws them, and each rank keeps its slices. */
    const struct dl_shard *shard;
    /* Which of the shard's stages this executor runs: its v-th, stage
     * pos.p + v * pp (0 unless the rank holds V > 1 interleaved stages).
     * Executors of one rank's stages share one parameter vector (the
     * rank's, share_params below), each with the steps of its own layers;
     * a tensor from another stage of the same rank arrives as a message
     * to itself. */
    int stage;
    /* 1: backward may also run as two passes, dl_exec_backward_input and,
     * later, dl_exec_backward_weights (zero-bubble schedules): what the
     * weight-gradient pass reads (its layers' inputs, output gradients and
     * kernel state) is planned to live until it has run. */
    int split_backward;
    /* Activation recomputation (--recompute, doc/executor.md): FULL keeps
     * only what each block instance of the network file reads from outside
     * it, and runs the block's steps forward again just before their
     * backward (the same keys, so the same dropout masks); SELECTIVE and
     * NONE keep every activation (every attention kernel recomputes its
     * T x T weights in backward already, which is what Megatron-LM's
     * selective recomputation saves). */
    enum dl_recompute recompute;
    /* 1: every layer's output stays until forward ends, so e->act holds
     * them all after a forward (tools and tests that read them: more
     * memory); 0: an output no backward reads may go as soon as its
     * readers have run (act[] NULL for it after forward). */
    int keep_outputs;
    struct dl_comm *tensor_comm;           /* the shard's tensor group (tp > 1) */
    struct dl_comm *pipeline_comm;         /* the shard's pipeline group (pp > 1), ranks in stage order */
    struct dl_comm *experts_comm;          /* the shard's expert group (ep > 1): a mixture of experts' rows
                                              travel over it to their experts (op.h's dl_expert_group) */
    /* On a device without host memory: the tensor group's communicator
     * of device buffers (comm.h's device_buffers: NCCL opened over
     * tensor_comm, same ranks in the same order), or NULL.  With it the
     * channel-block gathers, slices and sums (tp_steps.c) run in place
     * on the device's memory; without it, and for the other communication
     * steps, they are staged through host mirrors over tensor_comm
     * (staging.c). */
    struct dl_comm *tensor_device_comm;
    /* Another executor of the same network and shard whose weights,
     * gradients and state this one uses (a pipeline's chunks in flight):
     * only its arena is its own. */
    struct dl_exec *share_params;
    /* --trace: the recorder the executor's steps append to while it
     * records (io/trace.h); NULL: no tracing. */
    struct dl_trace *trace;
    /* Where the arena, the kernels' workspace, the weights, their
     * gradients and the state live (backends/device.h; NULL: the host):
     * allocated, initialised (drawn on the host, copied over), zeroed and
     * freed through its table; where the host cannot touch its memory
     * (host_memory 0), each forward copies the batch and labels in (unless
     * input_resident gives them there) and the losses and scores are
     * copied out, and the loss's gradient seed is copied in.  Its kernels
     * are those of device->kernels.  On a device without host memory,
     * tensor-parallel and pipeline communication steps (those of layers
     * split by rows or samples among them) run on host copies of their
     * buffers (staging.c), a split layer's weight gradients are summed in
     * a host copy (tp_rows.c), and reorders are refused (DL_ERR_SPEC) unless
     * the device's kernels are the host's. */
    const struct dl_device *device;
    /* > 0: incremental decoding (dltrain generate) over up to this many
     * positions: every attention layer keeps a key/value cache of its
     * samples (op.h's cache), which each forward extends at the executor's
     * position0.  Host memory only. */
    long decode_positions;
    /* > 1: weights and their gradients are allocated to a multiple of this
     * many values, the padding zero (ZeRO's equal shards over the data-
     * parallel ranks, parallel/zero.c); n_weights does not count it. */
    long weights_multiple;
    /* 1: no gradient vector (dweights NULL: ZeRO stage 2,
     * parallel/zero_grads.h): before the first backward the caller points
     * every weight's gradient into buffers of its own (dl_exec_grads_at),
     * and zeroes them (dl_exec_zero_grad does nothing). */
    int grads_elsewhere;
    /* kept_blocks > 1 (ZeRO stage 3, parallel/zero_weights.h; host
     * memory; with weights_multiple the same): only block kept_block of
     * that many equal blocks of the weights stays memory after they are
     * drawn; each layer's others are handed back as soon as it is drawn
     * (core/pages.h), so that no rank ever holds the whole vector. */
    int kept_block, kept_blocks;
    /* Document masking (the network file's data.document_mask,
     * doc/executor.md): with doc_mask 1, each forward finds its samples'
     * documents in its input, token ids [T] (a document ends with the id
     * doc_separator, which belongs to it), and every call gets their starts
     * (struct dl_op_call's doc_start): attention sees the query's document
     * only and positions restart at each document.  The layers whose kind
     * reads them run only on kernels that honour them; a layer none can
     * run, a --kernel choice of one that cannot, an input that is not
     * token ids and incremental decoding are refused (DL_ERR_SPEC, naming
     * the layer). */
    int doc_mask, doc_separator;
    /* Another executor of the same network whose caches this one uses
     * (the same decode_positions and batch): a prompt's window through
     * one, the tokens after it one position at a time through the other. */
    const struct dl_exec *share_cache;
};

/* Allocates everything for batches of up to max_batch samples and initialises
 * the parameters from seed (deterministically, in graph order).  o may be
 * NULL (the defaults). */
int dl_exec_init(struct dl_exec *e, const struct dl_graph *g, int max_batch, uint64_t seed,
                 const struct dl_exec_options *o, struct dl_error *err);

/* Chooses kernels and plans memory without allocating the arena or the
 * parameters: fills kernel[], arena_bytes, unplanned_bytes, n_weights and
 * n_state only (o's tuner is not asked). */
int dl_exec_plan(struct dl_exec *e, const struct dl_graph *g, int max_batch, const struct dl_exec_options *o,
                 struct dl_error *err);
void dl_exec_free(struct dl_exec *e);

/* A table like param[][] for every parameter of the whole network g, in
 * one block freed with free(): [layer][j], every pointer NULL. */
dl_real ***dl_exec_param_table(const struct dl_graph *g, struct dl_error *err);

/* Forward over batch samples of x (batch x input shape, NCHW: values of
 * g->input's dtype, dl_real for f32, int32_t token ids for i32) with
 * labels.  training selects batch statistics and dropout. */
void dl_exec_forward(struct dl_exec *e, const void *x, const int *labels, int batch, int training);

/* Backward of the mean loss of the last forward.  Weight gradients are
 * ACCUMULATED into dweights: call dl_exec_zero_grad() first for a new step. */
void dl_exec_backward(struct dl_exec *e);
/* The same backward in two passes (an executor made with split_backward):
 * backward_input computes the input gradients (and sends them to earlier
 * stages), backward_weights, any time after it and before the next
 * forward, the weight gradients of the layers whose kernels compute them
 * in a call of their own (kernel.h; the others get them in the first
 * pass).  Together they add exactly what dl_exec_backward adds.  grad_hook
 * runs for every layer in the second pass, in backward order. */
void dl_exec_backward_input(struct dl_exec *e);
void dl_exec_backward_weights(struct dl_exec *e);
void dl_exec_zero_grad(struct dl_exec *e);
/* The gradients of the flat weights [lo, hi) accumulate into buf from now
 * on (buf[0] for weight lo), tied parameters' with their owners'. */
void dl_exec_grads_at(struct dl_exec *e, long lo, long hi, dl_real *buf);

/* Waits until every pipeline message this executor sent has been received
 * (sends never wait on their own: they go out as copies); a driver calls it
 * when its schedule is through.  Returns e->status. */
int dl_exec_sends_wait(struct dl_exec *e);

/* Sum of the per-sample losses of the last forward (in double), and the
 * number of samples whose arg-max logit equals the label (the lowest class
 * on ties; with a label per position, graph.h's positions, the number of
 * positions, those with an ignored label left out): on the pipeline stage
 * that holds the loss (0 on the others).
 * With the classes split over the tensor group, every rank of the group
 * calls dl_exec_correct (it agrees the arg-max over the group; errors set
 * e->status). */
double dl_exec_loss_sum(const struct dl_exec *e);
/* The layers' counts for the metrics (op.h's stats): their number over the
 * whole graph, layer after layer (those of a layer at offset[i] when
 * offset, [g->n], is not NULL); and, after a training forward, those of
 * the layers e runs added into acc at their offsets (host memory only). */
long dl_exec_stats_count(const struct dl_graph *g, long *offset);
void dl_exec_add_layer_stats(struct dl_exec *e, double *acc);
int dl_exec_correct(struct dl_exec *e);
/* Whether dl_exec_correct counts top-5 too (into e->run.top5, when asked:
 * e->run.count_top5): more than
 * five classes, whole on this rank (not split over the tensor group), and
 * a classification loss; a regression loss (graph.h's float_targets) has
 * neither count (dl_exec_correct returns 0). */
int dl_exec_counts_top5(const struct dl_exec *e);
/* The class scores (logits) that the last forward gave sample n at position
 * t (0 for a network with one label per sample) into out[classes], on the
 * host; DL_ERR_UNSUPPORTED where they are not whole on this rank. */
int dl_exec_scores_at(struct dl_exec *e, int n, int t, dl_real *out, struct dl_error *err);

/* gather.c.  Which parameters a flat vector holds: the trainable ones
 * (weights, their gradients, each optimizer slot), the other f32 ones
 * (state), or the i64 counters (e->counters, host memory everywhere). */
enum dl_param_set { DL_PARAMS_TRAINABLE, DL_PARAMS_STATE, DL_PARAMS_COUNTERS };
/* Gathers the whole network's vector of set (graph order, PyTorch layouts:
 * what one process's e->weights, e->state or e->counters holds) on rank 0
 * of world from every rank's local vector `mine` (dl_real values, int64_t
 * for the counters: this executor's shard of it, in its memory: copied out
 * through its device when that is not the host's).  Every rank of the grid
 * calls it; the first data-parallel replica (d = 0) sends.  whole: on rank
 * 0 only, dl_exec_param_count(whole network, set) values. */
int dl_exec_gather(const struct dl_exec *e, struct dl_comm *world, enum dl_param_set set, const void *mine,
                   void *whole, struct dl_error *err);
/* The reverse without messages: this executor's part of a whole vector
 * (whole on the host; mine in the executor's memory, copied there through
 * its device when that is not the host's).  DL_OK, DL_ERR_NOMEM, or the
 * device's copy's error. */
int dl_exec_take(const struct dl_exec *e, enum dl_param_set set, const void *whole, void *mine,
                 struct dl_error *err);
/* Values of set in the whole network g. */
long dl_exec_param_count(const struct dl_graph *g, enum dl_param_set set);

/* readback.c.  The device whose memory holds e's arena, weights,
 * gradients and state (exec options' device; the host by default). */
const struct dl_device *dl_exec_device(const struct dl_exec *e);
/* grad_norm.c: *sq = the sum of squares of e's weight gradients that this
 * rank counts in the whole model's norm (a weight kept whole on every
 * tensor rank counts on tensor rank 0 only; a tied one once), so that its
 * sum over the tensor and pipeline groups is the whole model's.  Reads a
 * device's gradients through a copy. */
int dl_exec_grad_sq(const struct dl_exec *e, double *sq, struct dl_error *err);
/* The same over the weights [lo, hi) of the vector only, their gradients
 * at g (host memory; g[0] is weight lo's): a ZeRO block's part. */
void dl_exec_grad_sq_range(const struct dl_exec *e, const dl_real *g, long lo, long hi, double *sq);
/* Multiplies e's weight gradients by f where they live. */
int dl_exec_grad_scale(struct dl_exec *e, double f, struct dl_error *err);
/* n values of e's memory at p (act[], weights, dweights, state, an
 * optimizer's state on e's device) for the host to read: p itself on a
 * device with host memory, else a copy in *buf (*cap values, grown as
 * needed; the caller frees *buf).  NULL with err filled when the copy
 * fails. */
const dl_real *dl_exec_host_values(const struct dl_exec *e, const dl_real *p, long n, dl_real **buf, long *cap,
                                   struct dl_error *err);

/* Starts recording per-layer times into time_fwd/time_bwd (zeroed). */
int dl_exec_timing_enable(struct dl_exec *e, struct dl_error *err);
/* Number of reorder steps the executor inserted (casts included). */
int dl_exec_reorders(const struct dl_exec *e);
/* Number of those that are casts between dtypes (kernel.h "Dtypes"). */
int dl_exec_casts(const struct dl_exec *e);

#endif
