/* exec_impl.h: the executor's private structures, shared by exec.c (set-up,
 * parameters), steps.c (kernel choice, layouts, reorder and communication
 * steps, memory plan), run.c (forward and backward over the steps),
 * place.c (buffer lifetimes, the arena plan), comm_steps.c (the
 * communication steps of a parallel run: a pipeline's messages), and
 * tensor parallelism's steps: tp_steps.c (channel blocks), tp_rows.c (bands
 * of rows), tp_samples.c (shares of the samples), tp_group.c (reductions
 * of values over the tensor group). */
#ifndef DL_EXEC_IMPL_H
#define DL_EXEC_IMPL_H

#include "backends/device.h"
#include "exec/exec.h"
#include "plan/mbplan.h"
#include "plan/plan.h"

#define DL_EXEC_MAX_INSTANCES 64 /* (kernel, batch size) pairs with an instance per layer */

/* A value flowing between steps: the graph input, a layer's output, or a
 * reordered copy of one of those. */
struct dl_exec_tensor {
    int step;               /* producing step; -1: the graph input */
    int alias;              /* >= 0: its values are this tensor's (no buffer of its own) */
    struct dl_shape shape;
    enum dl_layout layout;
    long count;             /* values per sample in layout */
    int needs_grad;         /* 0 for the graph input and copies of it */
    int share;              /* it holds this rank's share of the samples only (tp_samples.c) */
    int last_use;           /* last step reading it (forward order) */
    int buf_data, buf_grad; /* planner buffers, -1: none */
    void *data, *grad;      /* its values and gradient, of shape.dtype: read as a struct dl_tensor
                               (dl_exec_values, dl_exec_grads) */
    /* --recompute full (recompute.c): run >= 0 when its values (its own, or
     * its alias root's) are not kept for backward but made again by run
     * `run`'s steps just before their backward, into a second home
     * (buf_again; data_again), data pointing at the first home
     * (data_first) from each forward until then. */
    int run;
    int buf_again;
    void *data_first, *data_again;
    int held;               /* its values are still there when forward ends (place.c's lifetimes) */
    int partial;            /* a layer's partial sums over the tensor group, summed by the SLICE_ROWS
                               steps that read it (a reduce-scatter; steps.c) */
};

/* Tensor t's values, and its gradient, as an op call or a kernel is handed
 * them: where they are, their per-sample shape with dtype and their layout
 * (the batch travels beside them). */
static inline struct dl_tensor dl_exec_values(const struct dl_exec_tensor *t)
{
    return (struct dl_tensor){t->data, t->shape, t->layout};
}

static inline struct dl_tensor dl_exec_grads(const struct dl_exec_tensor *t)
{
    return (struct dl_tensor){t->grad, t->shape, t->layout};
}

/* Sample n0 of p, a buffer of tensor t's values or gradients (in its
 * dtype); NULL for NULL. */
/* Bytes of n samples of tensor t's values (or its gradient's) in its dtype. */
static inline size_t dl_exec_bytes(const struct dl_exec_tensor *t, long n)
{
    return (size_t)n * (size_t)t->count * dl_dtype_value_size(t->shape.dtype);
}

static inline void *dl_exec_samples_at(const void *p, const struct dl_exec_tensor *t, long n0)
{
    return p ? (unsigned char *)p + dl_exec_bytes(t, n0) : NULL;
}

struct dl_exec_instance {
    const struct dl_kernel *kernel;
    int mb;
    void *inst;
};

enum dl_step_kind {
    DL_STEP_LAYER,     /* a layer through its kernel */
    DL_STEP_REORDER,   /* src's values into out, another memory layout; backward the other way */
    DL_STEP_TP,        /* tensor parallelism: src reaches a layer as out (tp_in: sliced, gathered, or as
                          it is with its gradient summed over the tensor group: tp_sum_grad) */
    DL_STEP_ALLREDUCE, /* out, a layer's partial sums, summed over the tensor group in place */
    DL_STEP_RECV,      /* pipeline: out (layer `peer_layer`'s output) received from stage peer;
                          backward sends its gradient back */
    DL_STEP_SEND,      /* pipeline: src sent to stage peer; backward receives the gradient stage peer
                          computed for it and adds it into src's */
};

/* --trace (trace_steps.c): how a step appears, per direction (0 forward,
 * 1 backward): the event's name (NULL: the step does nothing that way),
 * kind (enum dl_trace_kind), kernel or layouts, and the micro-batch plan's
 * text (NULL: none); messages name the tensor and its size per sample. */
struct dl_exec_step_trace {
    const char *name[2], *detail[2], *plan[2];
    unsigned char kind[2];
    const char *tensor;
    long count;
};

/* One step: a layer through its kernel, a reorder, or a communication. */
struct dl_exec_step {
    enum dl_step_kind kind;
    int layer;                          /* the layer (DL_STEP_LAYER), else -1 */
    int src;                            /* reorder, TP, send: source tensor */
    int out;                            /* produced tensor */
    int in[DL_MAX_INPUTS];              /* layer: input tensors */
    int via_scratch[DL_MAX_INPUTS];     /* layer: input gradient goes through scratch, then is added */
    int buf_scratch[DL_MAX_INPUTS], buf_saved;
    dl_real *scratch[DL_MAX_INPUTS];
    unsigned char *saved;
    size_t saved_bytes;                 /* for max_batch samples */
    int timed_layer;                    /* layer whose time this step counts towards */
    const struct dl_kernel *kernel;
    struct dl_kernel_config cfg;
    int n_inst, n_fixed;                /* inst[0, n_fixed): made at set-up, never recycled */
    struct dl_exec_instance inst[DL_EXEC_MAX_INSTANCES];
    const struct dl_mbplan_layer *mbplan; /* layer: its micro-batch plan (NULL: undivided) */
    enum dl_tp_in tp_in;                /* TP: how src reaches the layer */
    int tp_sum_grad;                    /* TP: the layer's input gradient is a partial sum (output split);
                                           with GATHER_ROWS, reduce-scattered into the bands */
    int tp_groups;                      /* TP: the channel groups of the blocks sliced or gathered (plan/shard.h's
                                           groups: 3 for packed q, k, v split by heads; 1 plain) */
    int peer, peer_layer;               /* RECV, SEND: the other stage's pipeline rank; the layer whose
                                           output travels */
    int edge;                           /* RECV, SEND: the shard's stage edge (message tags) */
    struct dl_exec_step_trace trace;
    /* --recompute full (recompute.c): the run of steps (a block instance's,
     * consecutive) it belongs to, -1 none; again: it runs forward a second
     * time before the run's backward (its output is recomputed), its kernel
     * state then in a second home (buf_saved_again, saved_again). */
    int run, again;
    int buf_saved_again;
    unsigned char *saved_first, *saved_again;
};

/* A pipeline message in flight: a copy of what a SEND step (forward) or a
 * RECV step (its gradient, backward) sent, kept until the send completes. */
struct dl_exec_outgoing {
    void *buf;
    size_t cap;
    struct dl_comm_req req;
};

/* --recompute (exec.h's options): with FULL, n_runs runs of steps
 * recomputed before their backward, run_last[r] the last step of run r
 * (whose backward comes first); recompute.c */
struct dl_exec_recompute {
    enum dl_recompute mode;
    int n_runs;
    int *run_last;
};

/* The steps' buffers (place.c) and the one arena they are planned into. */
struct dl_exec_memory {
    int n_bufs;
    struct dl_plan_buf *bufs;
    int buf_workspace;
    size_t workspace_bytes;
    void *arena;
    void *workspace;                    /* arena + its offset, or a larger block of its own */
    void *own_workspace;
};

/* On a device without host memory (device.h's host_memory 0): the input
 * batch and labels copied in there each forward (max_batch samples), a
 * host buffer the losses or scores are copied out to, and host mirrors of
 * a communication step's buffers (staging.c). */
struct dl_exec_device_io {
    void *input_on_device;              /* values of g->input's dtype */
    int *labels_on_device;
    const int *labels_in_use;           /* the last forward's labels in the device's memory (NULL: none) */
    dl_real *readback;
    void *staging;
    size_t staging_bytes;
};

struct dl_exec_impl {
    int n_steps, n_tensors;
    struct dl_exec_recompute recompute;
    int keep_outputs;                   /* exec.h's options': every output held until forward ends */
    struct dl_exec_step *steps;
    struct dl_exec_tensor *tensors;
    int *out_tensor;                    /* [layer] */
    int *written;                       /* [tensor] gradient written in this backward */
    struct dl_exec_memory mem;
    const struct dl_device *device;     /* where mem's arena and own_workspace live */
    struct dl_mbplan mbplan;            /* copy of the options' plan (batch 0: none) */
    struct dl_shard own_shard;          /* the whole network's, when the options gave none */
    struct dl_comm *tensor_comm, *pipeline_comm;
    struct dl_expert_group experts;     /* over exec.h's experts_comm (size 0: none) */
    struct dl_comm *tensor_device_comm; /* exec.h's; NULL: none */
    double *group;                      /* [T][group_cap] values gathered over the tensor group (dl_exec_group_*) */
    int group_cap;
    dl_real *grad_part;                 /* a layer's weight gradients on its band of rows, to be summed (tp_rows.c) */
    dl_real **grad_part_at;             /* a call's dparam pointing into grad_part (as many as a layer's params) */
    dl_real *grad_part_host;            /* on a device without host memory: grad_part copied out for the sum */
    int shares_params;                  /* weights, gradients and state belong to another executor */
    int split_backward;                 /* planned for backward in two passes (exec.h) */
    struct dl_exec_outgoing *outbox;    /* [n_outbox]: pipeline sends, in flight or done */
    int n_outbox;
    int weights_pending;                /* backward_input ran, backward_weights has not */
    struct dl_kernel_fault fault;       /* a failure inside the kernel call running (kernel.h) */
    struct dl_exec_device_io io;
    /* The loss's divisor of the last forward (op.h's label_norm): the
     * executor's label_norm, or the labelled positions per sample of its
     * batch, counted from the host's labels (a device kernel never counts
     * its own) */
    double label_norm_in_use;
    /* Document masking (exec.h's doc_mask; NULL: off): the last forward's
     * document starts, [max_batch][doc_T] (doc_mask.c), the run's sample0
     * at that forward (a share of its samples starts further on), and the
     * separator id. */
    int *doc_start;
    long doc_T, doc_sample0;
    int doc_separator;
};

/* doc_mask.c: the checks of document masking at set-up (exec.h's doc_mask)
 * on choices ch with their doc_mask set, then the buffer of starts; each
 * forward's starts from its ids x (host memory); a call's starts. */
int dl_exec_doc_mask_init(struct dl_exec *e, const struct dl_graph *g, const struct dl_exec_options *o,
                          const struct dl_kernel_choices *ch, struct dl_error *err);
void dl_exec_doc_mask_forward(struct dl_exec *e, const void *x, int batch);
const int *dl_exec_doc_starts(const struct dl_exec *e);

/* run.c: the tensor of class scores the loss reads (the executor runs the loss layer). */
const struct dl_exec_tensor *dl_exec_scores(const struct dl_exec *e);

/* comm_steps.c: forward and backward of the communication steps (TP,
 * ALLREDUCE, RECV, SEND); errors set e->status and e->err. */
void dl_exec_comm_forward(struct dl_exec *e, struct dl_exec_step *s);
void dl_exec_comm_backward(struct dl_exec *e, struct dl_exec_step *s);
/* tp_steps.c: forward and backward of tensor parallelism's steps (TP, as
 * Megatron's copy, scatter and gather regions; ALLREDUCE, its reduce
 * region), and the workspace a TP step needs for batch samples (a whole
 * tensor to reorder blocks in).  add_into: n values of src into dst
 * (added when acc), on the device dev's memory or the host's (NULL). */
void dl_exec_tp_forward(struct dl_exec *e, const struct dl_exec_step *s);
void dl_exec_tp_backward(struct dl_exec *e, const struct dl_exec_step *s);
size_t dl_exec_tp_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch);
void dl_exec_add_into(struct dl_exec *e, const struct dl_device *dev, dl_real *dst, const dl_real *src, long n, int acc);
/* outbox_init makes the pipeline sends' outbox at set-up: an entry per
 * step that sends a message (SEND; RECV with a gradient), each the size of
 * the largest of those messages for max_batch samples; DL_ERR_NOMEM.
 * comm_free frees it (after dl_exec_sends_wait, or on a failed run,
 * without waiting for what is still in flight: its buffers are then
 * left). */
int dl_exec_outbox_init(struct dl_exec *e, struct dl_error *err);
void dl_exec_comm_free(struct dl_exec *e);
/* staging.c: step s's forward (backward = 0) or backward, on host mirrors
 * of its buffers when the executor's device has no host memory. */
void dl_exec_comm_staged(struct dl_exec *e, struct dl_exec_step *s, int backward);
/* tp_steps.c: 1 when step s runs in place on the device's memory over
 * the tensor group's communicator of device buffers (exec.h's
 * tensor_device_comm): the channel-block slices, gathers and sums and the
 * ALLREDUCE step; rows, samples and pipeline messages are staged. */
int dl_exec_comm_in_place(const struct dl_exec *e, const struct dl_exec_step *s);

/* trace_steps.c: each step's names and details in the recorder's strings
 * (at set-up, when e->trace is set), and the event of step s's run in one
 * direction that started at t0 (while the trace records). */
int dl_exec_trace_prepare(struct dl_exec *e, struct dl_error *err);
void dl_exec_trace_step(struct dl_exec *e, const struct dl_exec_step *s, int backward, double t0);

/* tp_group.c: reductions of values over the tensor group, in rank order
 * so that every rank gets the same (struct dl_op_call's sync_sum and
 * sync_max with ctx = the executor: a class-split loss's sums and maxima);
 * group_best replaces n (value, index) pairs by the pair of largest value,
 * the lowest rank's on ties.  At most group_values(e) values per call;
 * errors set e->status. */
void dl_exec_group_sum(void *ctx, double *v, int n);
void dl_exec_group_max(void *ctx, double *v, int n);
void dl_exec_group_best(struct dl_exec *e, double *pairs, int n);
int dl_exec_group_values(const struct dl_exec *e);
/* Batch statistics of a layer on bands of rows: summed over the tensor
 * group, then over the data-parallel ranks when e->hooks.sync_sum is set. */
void dl_exec_group_stats_sum(void *ctx, double *v, int n);
/* tp_steps.c: buf[0..n) summed over the tensor group in place.
 * comm_steps.c: comm_status, rc (a comm call's) into e->status. */
void dl_exec_group_sum_reals(struct dl_exec *e, dl_real *buf, size_t n);
void dl_exec_comm_status(struct dl_exec *e, int rc);

/* tp_rows.c: the TP steps on bands of rows (SLICE_ROWS, GATHER_ROWS, HALO)
 * and their workspace; the weight gradients of a layer on a band of rows
 * or a share of the samples (tp_samples.c):
 * grad_begin points its trainable dparam at grad_part (zeroed; returns 1
 * when it did), grad_end sums them over the tensor group and adds them to
 * the layer's gradients (grad_values: the most grad_part holds). */
void dl_exec_rows_forward(struct dl_exec *e, const struct dl_exec_step *s);
void dl_exec_rows_backward(struct dl_exec *e, const struct dl_exec_step *s);
size_t dl_exec_rows_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch);
long dl_exec_rows_grad_values(const struct dl_exec *e);
int dl_exec_rows_grad_begin(struct dl_exec *e, const struct dl_exec_step *s, struct dl_kernel_args *a);
void dl_exec_rows_grad_end(struct dl_exec *e, const struct dl_exec_step *s);
/* Rows [s0, s0 + rows) of each of `planes` planes of src (sh rows of W
 * values each) into rows [d0, d0 + rows) of dst's planes (dh rows), or
 * added to them (acc). */
void dl_exec_copy_rows(dl_real *dst, int dh, int d0, const dl_real *src, int sh, int s0, int rows, long planes, int W,
                       int acc);
/* Every rank's band (b rows of band) allgathered into whole (H rows), or
 * added to it (acc); the bands travel padded to the widest one. */
void dl_exec_gather_bands(struct dl_exec *e, const dl_real *band, int b, dl_real *whole, int H, long planes, int W,
                          int acc);
/* The reverse: every rank's whole (H rows) of partial sums summed over the
 * tensor group, this rank's band of the sums (b rows) into band, or added
 * to it (acc); one reduce-scatter of the bands padded to the widest. */
void dl_exec_sum_bands(struct dl_exec *e, const dl_real *whole, int H, dl_real *band, int b, long planes, int W,
                       int acc);

/* tp_samples.c: tensor parallelism over the samples (`split: batch`).  mark
 * sets every tensor's share flag once the steps are built; enter makes
 * e->run.batch and e->run.sample0 those of the samples step s runs on (this rank's
 * share, or unchanged) and returns the whole chunk's, which leave puts
 * back; check refuses a chunk of `batch` samples that leaves a tensor rank
 * no sample; the GATHER_BATCH and SLICE_BATCH steps and their workspace. */
struct dl_exec_samples {
    int batch;
    long sample0;
};
void dl_exec_samples_mark(struct dl_exec *e);
struct dl_exec_samples dl_exec_samples_enter(struct dl_exec *e, const struct dl_exec_step *s);
void dl_exec_samples_leave(struct dl_exec *e, struct dl_exec_samples whole);
int dl_exec_samples_check(const struct dl_exec *e, int batch, struct dl_error *err);
size_t dl_exec_samples_workspace(const struct dl_exec *e, const struct dl_exec_step *s, int batch);
void dl_exec_samples_forward(struct dl_exec *e, const struct dl_exec_step *s);
void dl_exec_samples_backward(struct dl_exec *e, const struct dl_exec_step *s);

/* steps.c */
/* 1 when layer i is one of the layers this executor runs (its stage's). */
static inline int dl_exec_runs(const struct dl_exec *e, int i)
{
    return i >= e->first && i < e->end;
}
/* 1 when step s's weight gradients come from a backward-weights call of
 * their own (a layer with parameters whose kernel has one, or a micro-batch
 * plan whose parts may), which a split backward defers. */
int dl_exec_defers_weights(const struct dl_exec *e, const struct dl_exec_step *s);
int dl_exec_build_steps(struct dl_exec *e, const struct dl_kernel_choices *ch, struct dl_error *err);
int dl_exec_make_instance(struct dl_exec_step *s, const struct dl_layer *l, const struct dl_kernel *k, int mb,
                          struct dl_error *err);
void dl_exec_free_steps(struct dl_exec *e);
/* place.c: every buffer of the steps with its lifetime, planned into one
 * arena (e->stats.arena_bytes; e->stats.unplanned_bytes without reuse). */
int dl_exec_place(struct dl_exec *e, struct dl_error *err);

/* recompute.c (--recompute full): marks the runs, the tensors they make
 * again and the steps that make them, and each tensor's last forward
 * reader into last_read[n_tensors] (for the first home's lifetime);
 * DL_ERR_NOMEM.  _first points every recomputed tensor and step at its
 * first home (each forward); _again run r's at their second (before its
 * backward). */
int dl_exec_recompute_mark(struct dl_exec *e, int *last_read, struct dl_error *err);
void dl_exec_recompute_first(struct dl_exec *e);
void dl_exec_recompute_again(struct dl_exec *e, int r);
/* The instance of step s for mb samples, made on first use (NULL after
 * setting e->status when it cannot be made). */
void *dl_exec_instance(struct dl_exec *e, struct dl_exec_step *s, int mb);

/* micro.c: layers run as a sequence of micro-batches (plan/mbplan.h).
 * Checks the plan of step s against the layouts its producers offer, makes
 * an instance per (kernel, micro-batch size), sizes its kernel state and
 * raises *ws to the workspace the plan needs. */
int dl_exec_micro_setup(struct dl_exec *e, struct dl_exec_step *s, const enum dl_layout *offered, size_t *ws,
                        struct dl_error *err);
/* Runs direction dir of step s over the parts of its plan; a holds the
 * whole batch's arguments.  Returns 0 when the step has no plan for this
 * batch size (the caller then runs it undivided). */
int dl_exec_micro_run(struct dl_exec *e, const struct dl_exec_step *s, const struct dl_kernel_args *a, enum dl_dir dir,
                      int any_din);

#endif
