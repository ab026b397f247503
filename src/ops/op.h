/* op.h: the op-kind interface.  One file in src/ops/ per kind of layer.
 *
 * An op kind declares its attributes as a table (the network-file schema for
 * that layer type: spec/ parses and documents them from this table), infers
 * its output shape, describes its parameters, and provides the plain-C
 * reference forward and backward that serve as ground truth for every fast
 * kernel.  Adding a layer type: doc/ARCHITECTURE.md's checklist (its file,
 * one line in ops/kinds.h, a build fragment, a gradient check, the man page).
 *
 * Memory contract of the reference ops (all tensors NCHW, batch-major):
 *   forward  reads in[], param[], writes out[] (and saved[] for backward);
 *   backward reads dout, in[], out, param[], saved[];
 *            OVERWRITES din[i] (skipped when din[i].data is NULL);
 *            ACCUMULATES (+=) into dparam[j] (the executor zeroes them once
 *            per step, so micro-batches and branches can add up); a NULL
 *            dparam[j] (frozen or non-trainable parameter) is skipped.
 * backward always follows a forward of the same batch with the same
 * `training` value, so saved[] is filled as that forward left it.  No two of
 * in[], out, din[], dout and saved alias each other.  Class ids reaching a
 * loss op are in [0, classes): the data loader checks them. */
#ifndef DL_OP_H
#define DL_OP_H

#include <stddef.h>

#include "core/error.h"
#include "core/real.h"
#include "core/rng.h"
#include "core/shape.h"
#include "core/tensor.h"

#define DL_MAX_INPUTS 16

/* What a backward reads of its forward's tensors (struct dl_op_kind's and
 * struct dl_kernel's backward_reads): flags, with DL_READS_DECLARED set
 * whenever it is declared at all. */
#define DL_READS_INPUTS 1u
#define DL_READS_OUTPUT 2u
#define DL_READS_DECLARED 4u
#define DL_READS_AS_OP 8u /* a kernel: what its op kind's reference reads (the reference kernels) */

/* ---------------------------------------------------------------- attributes */
enum dl_attr_type {
    DL_ATTR_INT,   /* int */
    DL_ATTR_INT2,  /* int[2] = {height, width}: a scalar k means {k, k}, or [kh, kw] */
    DL_ATTR_FLOAT, /* double */
    DL_ATTR_BOOL,  /* int, 0 or 1 */
    DL_ATTR_ENUM   /* int, the index into choices[] */
};

struct dl_attr_desc {
    const char *key;          /* name in the network file */
    enum dl_attr_type type;
    size_t offset;            /* offsetof(attr struct, field) */
    int required;             /* 1: must be given */
    double def;               /* default when not required (both parts for INT2) */
    double min, max;          /* accepted range (inclusive) for numbers */
    const char *const *choices; /* DL_ATTR_ENUM: NULL-terminated names */
    const char *doc;          /* one line, for man pages and `dltrain help` */
};

/* ---------------------------------------------------------------- parameters */
enum dl_init {
    DL_INIT_ZERO,
    DL_INIT_ONE,
    DL_INIT_UNIFORM_FAN_IN, /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default */
    DL_INIT_HE_NORMAL,      /* N(0, 2/fan_in) */
    DL_INIT_NORMAL          /* N(0, std), std 1 unless set: PyTorch's nn.Embedding */
};

struct dl_param_desc {
    char name[24];   /* "weight", "bias", "running_mean", ...: checkpoint suffix */
    long count;      /* number of elements */
    int ndim;        /* PyTorch layout, e.g. conv weight [K, C/groups, R, S] */
    int dims[4];
    enum dl_init init;
    long fan_in;     /* for the fan-in based initialisers */
    int trainable;   /* 0: state updated by forward (batch-norm running statistics) */
    /* Its dtype: f32 (every weight and statistic; the zero value), or i64
     * for a counter of the layer's own (batch norm's num_batches_tracked,
     * as PyTorch keeps it): a scalar, never trainable, never split over
     * ranks, held in host memory by the executor (exec.h's counters) and
     * saved with its dtype.  The graph refuses other combinations. */
    enum dl_dtype dtype;
    int counts_forwards; /* an i64 counter of the layer's forwards in training mode: the executor adds 1 after each */
    double std;      /* DL_INIT_NORMAL's standard deviation (0: 1); the layer key init_std sets it */
    /* Weight tying (the network file's `share:`, graph.c): this parameter is
     * layer share_layer's parameter share_param, an earlier layer's of the
     * same shape; it has no storage, no checkpoint entry and no count of its
     * own, and both layers' gradients add up in the one tensor.  replica
     * (a rank's view, plan/shard.c): the owner runs in a pipeline stage of
     * another rank, so this rank keeps a copy of it, with storage, drawn as
     * the owner is; the copies' gradients are summed between the ranks
     * before each update (train/tied.c), so they stay equal; still no
     * checkpoint entry or count of its own. */
    int shares;
    int share_layer, share_param;
    int replica;
    /* One block per expert along dimension 0 (a mixture of experts'
     * experts.w1, w3, w2): with expert parallelism each rank of the expert
     * group holds its experts' blocks (plan/shard.c), their gradients
     * summed over the ranks holding the same experts, not the whole data
     * group (parallel/grad_sync.c). */
    int per_expert;
};

/* Expert parallelism (a kind with expert_split): the call's expert group,
 * `size` ranks holding the experts in equal blocks, this one block `rank`;
 * alltoallv sends send_bytes[r] bytes from send + send_at[r] to rank r and
 * takes recv_bytes[r] bytes from rank r into recv + recv_at[r] (what r sends
 * here must be what this rank expects of r).  Every rank of the group makes
 * the same calls in the same order. */
struct dl_expert_group {
    int size, rank;
    int (*alltoallv)(void *ctx, const void *send, const size_t *send_bytes, const size_t *send_at, void *recv,
                     const size_t *recv_bytes, const size_t *recv_at, struct dl_error *err);
    void *ctx;
};

/* ---------------------------------------------------------------- one call */
struct dl_op_call {
    const void *attr;
    int batch;                          /* N */
    int n_in;
    /* N x in[i].shape each, read only; out: N x out.shape, written.  A
     * kernel gets them in its dtype (backends/kernel.h "Dtypes") and reads
     * their values through core/tensor.h's typed accessors. */
    struct dl_tensor in[DL_MAX_INPUTS];
    struct dl_tensor out;
    /* [n_params] as described by params(), any number (the caller's
     * arrays of pointers: a callee that changes one points the call at an
     * array of its own first) */
    dl_real **param;
    dl_real **dparam;                   /* [n_params] accumulated into by backward */
    struct dl_tensor dout;              /* out's gradient, out.shape, read only */
    struct dl_tensor din[DL_MAX_INPUTS]; /* in[i]'s gradients, in[i].shape, overwritten by backward;
                                            data NULL = not needed */
    dl_real *saved;                     /* saved_size() elements, forward -> backward */
    int training;                       /* 1: training mode (dropout, batch statistics) */
    /* Random choices (dropout's mask) are a function of these, never of a
     * stream, so that any split of the batch (ranks, pipeline chunks,
     * micro-batches) or of the channels (tensor parallelism) draws what one
     * process draws: key (the layer and the training step, from the
     * executor), the index in the mini-batch of the call's first sample,
     * and the index in the whole tensor of its first channel. */
    uint64_t key;
    long sample0;
    int channel0;
    /* Incremental decoding (dltrain generate, exec.h's decode_positions):
     * the absolute position of the call's first position (a position
     * embedding reads its rows from there; 0 otherwise), and an attention
     * layer's cache of its samples' keys and values at every position so
     * far, [2][C][cache_len] per sample, which the call extends (NULL:
     * none, as in training and evaluation). */
    long position0;
    dl_real *cache;
    long cache_len;
    /* Document masking (packed documents, doc/executor.md): per sample and
     * position, the position in the call's window where that position's
     * document starts ([batch][T], non-decreasing along t, doc_start[t] <=
     * t); NULL: the window is one document.  Read by kinds with doc_mask
     * set: attention sees only keys of the query's own document, positions
     * count from the document's start. */
    const int *doc_start;
    const int *labels;                  /* loss ops only: N class indices (N x T for a sequence), or N x W
                                           float targets' bits (float_targets) */
    /* Loss ops: the labelled positions per sample over the whole
     * mini-batch (its labels that the loss does not ignore, over its
     * samples), by which a sample's summed loss is divided so that the
     * mini-batch's mean is the mean over its labelled positions; 0: over
     * this call's samples (ops/softmax_xent.h). */
    double label_norm;
    /* The weight of one sample's loss in the mini-batch's mean, which seeds
     * backward at the loss (exec.h's loss_norm; 0: 1/batch): a layer that
     * adds a loss of its own (the mixture of experts' load balancing)
     * weighs its gradient by it. */
    double loss_norm;
    /* Cross-rank reductions for values that span more than this call's
     * part of a tensor: replace v[0..n) by its sum (sync_sum) or maximum
     * (sync_max) over the ranks holding the other parts, the same on every
     * rank.  sync_sum: batch normalisation's statistics over the
     * data-parallel ranks (--sync-bn) and over the tensor group when the
     * rows are split (doc/parallel.md); NULL: this rank only.  sync_max is
     * set only for a loss whose class scores are split over the tensor
     * group (channels [channel0, channel0 + in[0].shape.c) of them here;
     * the op kind's tp.split_classes), which it then reduces through both. */
    void (*sync_sum)(void *ctx, double *v, int n);
    void (*sync_max)(void *ctx, double *v, int n);
    void *sync_ctx;
    /* With expert parallelism, the layer's expert group (its attributes
     * then hold one block of the experts: the kind's expert_split); NULL:
     * this rank holds every expert. */
    const struct dl_expert_group *experts;
};

/* ---------------------------------------------------------------- op kind */
/* How a layer of a kind may be divided over the ranks of a tensor group
 * (doc/parallel.md): by channels, outputs or inputs, heads, vocabulary rows,
 * class scores, or bands of rows (spatial and sequence parallelism).
 * plan/tp_split.c decides each layer's split from these and the layer's
 * `split:` key, planner/tp_split_choice.c the choices among them; a kind
 * that sets none (all 0 and NULL) runs whole on every rank of the group. */
struct dl_op_tp_caps {
    /* channel_local: the op treats channels (features) independently, so a
     * tensor split into equal channel blocks goes through it block by block
     * and comes out split the same way (flatten turns channel blocks into
     * feature blocks); its parameters, if any, are one value per channel. */
    int channel_local;
    /* channel_group: the op treats channels in independent groups of this
     * many (rope: a head's head_dim features, turned in pairs within the
     * head), so a block of whole groups goes through it as channel_local's
     * blocks do; NULL: no such groups. */
    int (*channel_group)(const void *attr);
    /* A loss that can take its class scores split into blocks over the
     * tensor group (a column-split last layer) without gathering them:
     * called with sync_max set, it reduces its per-sample maximum, sum of
     * exponentials and target score over the ranks (Megatron-LM's
     * vocabulary-parallel cross entropy). */
    int split_classes;
/* A split_classes loss reduces the sums of at most this many rows (sample,
 * position) a call over the tensor group (4 doubles a row on the stack). */
#define DL_SPLIT_CLASSES_ROWS 4096
    /* An op with weights [out, in, ...] and bias [out] (convolution, fully
     * connected) that can be divided over T ranks: writes into local (a copy
     * of attr) the attributes of one part, split by its outputs (by_output:
     * filters, units) or by its inputs (channels, features: the input shape
     * then shrinks, and the part keeps its bias only with keep_bias).
     * Returns 0, or -1 when these attributes cannot be split so (T does not
     * divide the outputs, a grouped convolution).  NULL: never split. */
    int (*tp_split)(const void *attr, int by_output, int T, int keep_bias, void *local);
    /* An op over heads (attention) that can run on whole heads: writes into
     * local (a copy of attr) the attributes of rank t's part of T (heads
     * [t H/T, (t+1) H/T)) for n_in inputs and returns the number of equal
     * channel groups its input packs (3 for q, k, v in one tensor, 1 for
     * three inputs), rank t reading block t of each; -1 when T does not
     * divide the heads.  Megatron-LM's attention core, local to the rank.
     * NULL: never split so. */
    int (*tp_heads)(const void *attr, int n_in, int T, int t, void *local);
    /* A lookup table that can be split by its rows (the vocabulary) over T
     * ranks: writes into local (a copy of attr) the attributes of rank t's
     * rows [t V / T, (t+1) V / T) (integer division: unequal when T does
     * not divide V), whose output is its rows' part (zeros for other ids),
     * summed over the group; returns 0, or -1 when it has fewer rows than
     * ranks.  Megatron-LM's vocabulary-parallel embedding.  NULL: never. */
    int (*tp_vocab)(const void *attr, int T, int t, void *local);
    /* A tp_split op whose part keeps outputs [lo, hi) of any size (a head
     * split as the vocabulary its weight is tied to): writes that part's
     * attributes into local.  NULL: equal blocks only (tp_split). */
    void (*tp_outputs)(const void *attr, long lo, long hi, void *local);
    /* The planner's choices for tp_split kinds (planner/tp_split_choice.h):
     * tp_pairs, two such layers in a row may split column then row (the
     * activation between them stays split, Megatron-LM's pairs of fc
     * layers), or both stay whole; tp_by_samples, the layers may run on
     * shares of the samples instead (Krizhevsky's hybrid: convolutions data
     * parallel, the pairs tensor parallel). */
    int tp_pairs;
    int tp_by_samples;

    /* Spatial (height) and sequence parallelism.  row_local: the op
     * treats rows (the height axis) independently, or reduces over them
     * only through sync_sum (batch norm's statistics), so a tensor split
     * into bands of rows goes through it band by band and comes out split
     * the same way (element-wise ops, add, batch norm).  height_split: an
     * op that can run on a band of rows given `*halo` more rows of its
     * neighbours' bands above and below it (zeros past the whole tensor's
     * edges): writes into local (a copy of attr) the attributes of that
     * part, no padding in height, for the input shape in, and returns NULL,
     * or the rule these attributes break (a stride-1 'same' convolution
     * only).  NULL: never split by height. */
    int row_local;
    const char *(*height_split)(const void *attr, struct dl_shape in, void *local, int *halo);
};

struct dl_op_kind {
    const char *name;       /* the `type:` in a network file */
    const char *summary;    /* one line for documentation */
    size_t attr_size;       /* sizeof the op's attribute struct */
    const struct dl_attr_desc *attrs;
    int n_attrs;
    int min_inputs, max_inputs;
    int is_loss;            /* consumes labels; output is the per-sample loss (1,1,1) */
    /* A loss that skips positions with one label value: writes it into
     * *label and returns 1 (the trainer then counts the mini-batch's other
     * labels for dl_op_call.label_norm); NULL: every label counts. */
    int (*ignored_label)(const void *attr, int *label);
    /* A regression loss (mse, l1): its labels are float targets, one per
     * value of its input vector (W, 1, 1), each label word a float32's bits
     * (core/target_bits.h), W of them per sample; there are no classes to
     * count correct (no accuracy).  0: class ids. */
    int float_targets;

    /* Capabilities: what the tuner and the executor may do with a layer of
     * this kind.  They decide, not the kind's name (doc/ARCHITECTURE.md names
     * the few places that still test a kind's symbol).
     *
     * micro_batch: the tuner may split a batch into micro-batches (tune/):
     * each sample's output and input gradient depend on that sample alone and
     * the weight gradients are sums over samples.  Set on conv, fc, the
     * poolings, the activations and dropout (its mask is a function of each
     * sample's place); never on batch normalisation (statistics over the
     * batch); the cheap reshaping, merging and loss kinds are left undivided
     * too.
     *
     * is_relu: out = max(x, 0) element-wise (NaN as 0), input gradient dout
     * where out > 0: a kernel with fuses_relu (backends/kernel.h) can apply
     * it to its own output in place of this layer (exec/steps.c).
     *
     * commutes_with_relu: op(max(x, 0)) = max(op(x), 0), and backward sends
     * each gradient to the same input either way (max pooling: the window's
     * winner), so a ReLU just before the layer may move after it.  Only a
     * NaN tells the two orders apart: the ReLU zeroes it before the window,
     * the moved one lets it win and then clamps it. */
    int micro_batch;
    int is_relu;
    int commutes_with_relu;

    /* What the reference backward reads of the forward's tensors besides
     * its saved state and the labels (op.h's DL_READS_*: its inputs, its
     * output, both, or DL_READS_DECLARED alone for neither); 0: not
     * declared, taken as both.  The executor keeps a tensor until the last
     * backward that reads it (exec/place.c), so this lets memory go early. */
    unsigned backward_reads;

    /* On PyTorch autocast's lower-precision list (its matrix products:
     * linear, convolution): under --precision bf16 it may run in bf16, its
     * inputs and output stored in bf16 (backends' reference-bf16). */
    int autocast_bf16;
    /* Its forward FLOPs (flops) are matrix products with its weights, as
     * the autocast_bf16 kinds' are: model FLOPs (MFU) count them three
     * times, forward and both gradients (graph/model_flops.h). */
    int weight_products;
    /* The parameters one position (sample) leaves unused: a mixture of
     * experts' unchosen experts, (E - k) / E of theirs (check's active
     * count); NULL: none. */
    long (*idle_params)(const void *attr, const struct dl_shape *in);
    /* Expert parallelism (`ep` of the grid, doc/parallel.md): writes into
     * local (a copy of attr) the attributes of block `rank` of `ranks`
     * equal blocks of the layer's experts, whose per_expert parameters then
     * hold that block; -1 when the experts do not divide into `ranks`.
     * NULL: the kind has no experts (it runs whole on every rank). */
    int (*expert_split)(const void *attr, int ranks, int rank, void *local);
    /* What expert parallelism moves of a sample (the planner's cost of the
     * all-to-all, planner/layout_cost.c): the rows its positions send to
     * their experts in forward (a row per kept choice: at most what a
     * capacity keeps), each of *width floats.  NULL: none (no experts). */
    long (*routed_rows)(const void *attr, const struct dl_shape *in, long *width);

    /* What the kind's parameters are, for a rule that treats some weights
     * apart (train.optimizer.no_decay's `norm` and `embedding`, as PyTorch
     * recipes do): is_norm, a normalisation's scale and shift (layer and
     * batch norm); is_embedding, a table of learned vectors looked up by
     * token or position. */
    int is_norm, is_embedding;

    /* Incremental decoding (dltrain generate): the op keeps its samples'
     * keys and values at every position so far (struct dl_op_call's cache:
     * [2][C][positions] per sample, C its output channels), which each
     * forward extends; the executor gives a layer of such a kind a cache
     * (exec/exec.c). */
    int kv_cache;

    /* Document masking: the op reads struct dl_op_call's doc_start (an
     * attention layer's block-causal mask, positions that restart at each
     * document: rope, position_embedding); with masking on, the executor
     * runs such a layer only on a kernel that declares doc_mask too. */
    int doc_mask;

    /* Token ids: the number of ids the layer reads (an embedding's
     * vocabulary): its first input holds i32 ids (shape.h: [T] with dtype
     * i32), each of which the data loader checks is below this.  NULL: the
     * layer takes no ids (the graph refuses an i32 input there). */
    int (*id_limit)(const void *attr);

    /* Cross-field checks after all attributes were parsed (may be NULL).
     * The message names the attribute(s) and the expected vs found value. */
    int (*check)(const void *attr, struct dl_error *err);
    /* Output shape from input shapes; rejects incompatible inputs with a
     * message giving the expected vs found shape. */
    int (*infer)(const void *attr, int n_in, const struct dl_shape *in,
                 struct dl_shape *out, struct dl_error *err);
    /* Returns n, the number of parameters (any; 0 when the op has none),
     * and fills p[0..n) unless p is NULL (may be NULL: none).  Callers go
     * through dl_op_param_descs. */
    int (*params)(const void *attr, const struct dl_shape *in, struct dl_shape out, struct dl_param_desc *p);
    /* Elements of forward->backward scratch for a batch of n (may be NULL: none). */
    long (*saved_size)(const void *attr, int batch, const struct dl_shape *in,
                       struct dl_shape out);
    void (*forward)(const struct dl_op_call *c);
    void (*backward)(const struct dl_op_call *c);
    /* A loss the layer adds of its own (the mixture of experts' load
     * balancing): the sum over the call's samples, read after a forward
     * from what it saved; its backward then adds each sample's gradient
     * weighted by the call's loss_norm, as the loss's gradient is.  NULL:
     * none. */
    double (*added_loss)(const struct dl_op_call *c);
    /* Counts the layer keeps of each training forward for the metrics (a
     * mixture of experts: the choices each expert took, those dropped, all
     * choices): stats_count(attr) of them, which stats adds into acc from
     * what the forward saved.  NULL: none. */
    int (*stats_count)(const void *attr);
    void (*stats)(const struct dl_op_call *c, double *acc);
    /* Multiply-add counted as 2 FLOPs, forward pass, per sample (may be NULL: 0). */
    double (*flops)(const void *attr, const struct dl_shape *in, struct dl_shape out);

    /* How its layers may be split over a tensor group (above). */
    struct dl_op_tp_caps tp;
};

/* registry.c */
const struct dl_op_kind *dl_op_find(const char *name);

/* The parameters of a layer of kind k with these attributes and shapes:
 * returns their number n (>= 0) and, when n > 0, a new array of their n
 * descriptions in *p (the caller frees it; NULL when n is 0); -1 with err
 * filled (DL_ERR_NOMEM) when no memory is left. */
int dl_op_param_descs(const struct dl_op_kind *k, const void *attr, const struct dl_shape *in,
                      struct dl_shape out, struct dl_param_desc **p, struct dl_error *err);
/* NULL-terminated table of every op kind, in documentation order. */
extern const struct dl_op_kind *const dl_op_kinds[];

#endif
