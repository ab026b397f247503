/* kernel.h: the kernel interface.  A kernel is one implementation of one op
 * kind on one library (oneDNN direct or Winograd convolution, im2col + sgemm,
 * the plain-C reference; cuDNN for the GPU backend to come); several kernels
 * may serve one op kind and the executor picks one per layer (a default
 * order, --kernel choices, or the tuner's micro-batch plan).  Kernels never see the graph or YAML: only one layer.
 *
 * Life cycle.  create() builds an instance for ONE micro-batch size mb and the
 * memory layouts negotiated by layouts(); anything expensive (oneDNN
 * primitives, packed weights descriptors) is made there, once, and reused by
 * every call.  The same layer may have instances for several mb (the last
 * partial batch, evaluation, the tuner's micro-batch plans).  The executor
 * plans a layer's saved memory for its largest batch and runs smaller ones
 * in it, so saved_bytes() never shrinks as mb grows (tests/test_kernels.c
 * saved_state_grows_with_samples).
 *
 * Micro-batches.  A call runs on a slice of mb samples: every pointer in
 * args->c already points at the slice's first sample and c.batch == mb.
 * Activations are batch-major in every layout, so slice j of a tensor starts
 * at j*mb*per-sample-count.  saved points at the slice's own saved_bytes()
 * region.  Forward and backward_data OVERWRITE their outputs; backward_weights
 * ACCUMULATES (+=) into dparam[], so weight gradients add up across
 * micro-batches (the executor zeroes them once per step).  A kernel whose
 * statistics span the whole batch (batch normalisation) reports
 * whole_batch = 1 and must be run with mb = the batch.
 *
 * Workspace.  workspace_bytes(inst, dir) is the scratch that direction needs
 * for mb samples; the caller passes at least that much in args->workspace and
 * may share it between layers (nothing survives a call).  dl_kernel_workspace()
 * answers workspace_bytes(layer, mb) without keeping an instance, for the tuner.
 *
 * Layouts.  Tensors are NCHW at the graph's edges; a kernel may ask for and
 * produce a blocked layout (layout.h).  The executor inserts explicit reorder
 * steps where a producer's layout differs from what a consumer wants:
 * kernels never reorder activations behind the caller's back.  Gradients
 * travel in the layout of the tensor they belong to.
 *
 * Dtypes.  A kernel declares one dtype (.dtype, f32 unless said) for the
 * floating-point tensors it reads and writes: its inputs, its output and
 * their gradients; an input of ids (i32, core/shape.h) stays i32, and the
 * layer's parameters and their gradients are f32 (the master weights).
 * The executor inserts a cast step where a producer's dtype differs, as it
 * inserts reorders, so a kernel never sees another dtype.  The call's
 * tensors (struct dl_tensor, core/tensor.h) carry the dtypes it gets, and
 * a kernel reads their values through the typed accessors
 * (dl_tensor_f32, dl_tensor_bf16, dl_tensor_i32 and their const forms;
 * dl_tensor_any where one code path serves both of its dtype tables).
 *
 * Fused ReLU.  A kernel with fuses_relu may be created with cfg.relu = 1
 * when the executor folds the ReLU layer that alone consumes its output
 * into it (or, for max pooling, the ReLU before it, which commutes with
 * it): forward then writes max(y, 0) (NaN as 0 like the op), and
 * backward's dout is the gradient of that output, which the kernel masks
 * by out > 0 itself (c.out still holds the forward output). */
#ifndef DL_BACKENDS_KERNEL_H
#define DL_BACKENDS_KERNEL_H

#include <stddef.h>

#include "backends/device.h"
#include "backends/layout.h"
#include "graph/graph.h"

enum dl_dir { DL_DIR_FORWARD, DL_DIR_BACKWARD_DATA, DL_DIR_BACKWARD_WEIGHTS, DL_N_DIRS };

/* What an instance is created for. */
struct dl_kernel_config {
    int mb;                                 /* samples per call */
    enum dl_layout in[DL_MAX_INPUTS];       /* layout of each input (and its gradient) */
    enum dl_layout out;                     /* layout of the output (and its gradient) */
    int relu;                               /* 1: a ReLU is fused after the op (fuses_relu kernels) */
    enum dl_dtype dtype;                    /* the kernel's dtype (dl_kernel_create sets it): one create
                                               function may serve an f32 and a bf16 kernel table */
};

/* A failure inside a call.  Forward and backward return nothing, so a
 * kernel whose library calls can fail while it runs (a CUDA launch, a cuDNN
 * or cuBLAS call) records the first failure through dl_kernel_fail() in
 * the caller's fault, and the caller (the executor, the tuner, the kernel
 * tests) turns it into its error status with dl_kernel_fault_error(). */
struct dl_kernel_fault {
    int failed;        /* 1 once a call has failed */
    char kernel[32];   /* the kernel that failed */
    char call[64];     /* the library call that failed */
    char reason[160];  /* the library's words for it */
};

struct dl_kernel_args {
    struct dl_op_call c;  /* as for the reference ops, on the slice (see above) */
    void *workspace;      /* >= workspace_bytes(dir) bytes, 64-byte aligned */
    struct dl_kernel_fault *fault; /* where a failure is recorded; NULL: nowhere */
};

/* Records in a->fault (when there is one and it holds no failure yet) that
 * kernel's library call `call` failed for `reason`; the first failure of a
 * run is the one kept. */
void dl_kernel_fail(const struct dl_kernel_args *a, const char *kernel, const char *call, const char *reason);

/* DL_OK when f holds no failure; else fills err with DL_ERR_INTERNAL and
 * "layer 'L' (kernel K, DIRECTION): CALL failed: REASON", clears f for the
 * next run and returns the code. */
int dl_kernel_fault_error(struct dl_kernel_fault *f, const struct dl_layer *l, enum dl_dir dir,
                          struct dl_error *err);

/* "forward", "backward-data", "backward-weights": the directions in messages. */
extern const char *const dl_dir_names[DL_N_DIRS];

struct dl_kernel {
    const char *name;              /* "reference", "onednn", "onednn-wino", "openblas", ... */
    const char *backend;           /* library folder: "reference", "cpu_onednn", "cpu_blas" */
    const struct dl_op_kind *op;   /* the op kind served; NULL: every kind (the reference) */
    /* Where every pointer of its calls lives (device.h): its inputs,
     * outputs, parameters, saved state and workspace.  0, the host, for
     * every CPU kernel; kernel choice only takes a kernel whose device is
     * the one the executor runs on (struct dl_kernel_choices). */
    enum dl_device_kind device;
    /* The dtype of its floating-point tensors (see "Dtypes" above): DL_F32
     * for all but the bf16 kernels, which run a layer by default only under
     * a bf16 precision (struct dl_kernel_choices), else only when chosen. */
    enum dl_dtype dtype;
    int whole_batch;               /* 1: mb must equal the batch (batch statistics) */
    /* 1: honours the op call's sync_sum hook (struct dl_op_call), so that
     * with --sync-bn its batch statistics are summed over the data-parallel
     * ranks.  A whole_batch kernel without it keeps per-rank statistics and
     * is never chosen when the choices ask for synchronised statistics. */
    int sync_stats;
    int fuses_relu;                /* 1: can be created with cfg.relu (see above) */
    /* 1: honours the op call's doc_start (document masking, op.h) for a
     * kind that reads it (struct dl_op_kind's doc_mask); with masking on
     * (struct dl_kernel_choices' doc_mask) a kernel without it never runs
     * such a layer. */
    int doc_mask;
    /* 1: honours the op call's experts group (expert parallelism, op.h):
     * with ep ranks (struct dl_kernel_choices' experts) a kernel without it
     * never runs a kind with expert_split. */
    int expert_parallel;
    /* What its backward reads of the forward's inputs and output (op.h's
     * DL_READS_*; DL_READS_AS_OP: the op's declaration; 0: not declared,
     * both): dl_kernel_backward_reads. */
    unsigned backward_reads;
    /* 1 when this kernel can run layer l (attributes, shapes); may be NULL (all). */
    int (*supports)(const struct dl_layer *l);
    /* 1 where the registry takes it by default for l (dl_kernel_select
     * without a choice for l); NULL: wherever it supports l.  --kernel and
     * the tuner take it wherever supports says 1. */
    int (*default_for)(const struct dl_layer *l);
    /* Given the layouts the producers offer, the layout wanted for each input
     * and the one produced.  NULL: plain (NCHW) everywhere. */
    void (*layouts)(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                    enum dl_layout *out);
    int (*create)(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                  struct dl_error *err);
    void (*destroy)(void *inst);
    size_t (*workspace_bytes)(const void *inst, enum dl_dir dir); /* NULL: none */
    size_t (*saved_bytes)(const void *inst);  /* forward -> backward state for mb samples; NULL: none */
    void (*forward)(void *inst, const struct dl_kernel_args *a);
    /* Writes din[i] (skipping NULL ones). */
    void (*backward_data)(void *inst, const struct dl_kernel_args *a);
    /* Accumulates dparam[j] (skipping NULL ones).  NULL when backward_data
     * computes the weight gradients too (the reference ops do both in one
     * pass): dl_kernel_run() then runs backward_data even when no din is
     * wanted. */
    void (*backward_weights)(void *inst, const struct dl_kernel_args *a);
};

/* ---------------------------------------------------------------- calling one
 * Every caller asks and runs a kernel through these, so that the rules for
 * the optional entries live here once: no workspace_bytes or saved_bytes
 * means none, and a kernel without backward_weights computes the weight
 * gradients inside backward_data. */

/* Scratch bytes direction dir of instance inst needs. */
static inline size_t dl_kernel_workspace_bytes(const struct dl_kernel *k, const void *inst, enum dl_dir dir)
{
    return k->workspace_bytes ? k->workspace_bytes(inst, dir) : 0;
}

/* The most any direction of inst needs. */
static inline size_t dl_kernel_workspace_max(const struct dl_kernel *k, const void *inst)
{
    size_t most = 0;
    for (int d = 0; d < DL_N_DIRS; d++) {
        size_t w = dl_kernel_workspace_bytes(k, inst, (enum dl_dir)d);
        most = w > most ? w : most;
    }
    return most;
}

/* What k's backward reads of layer l's forward tensors, DL_READS_INPUTS
 * and DL_READS_OUTPUT flags: k's declaration or its op's (DL_READS_AS_OP),
 * both when undeclared; a fused ReLU (relu) reads the output too. */
static inline unsigned dl_kernel_backward_reads(const struct dl_kernel *k, const struct dl_layer *l, int relu)
{
    unsigned r = k->backward_reads & DL_READS_AS_OP ? l->kind->backward_reads : k->backward_reads;
    r = r & DL_READS_DECLARED ? r & (DL_READS_INPUTS | DL_READS_OUTPUT) : DL_READS_INPUTS | DL_READS_OUTPUT;
    return relu ? r | DL_READS_OUTPUT : r;
}

/* Bytes of state inst keeps from forward to backward. */
static inline size_t dl_kernel_saved_bytes(const struct dl_kernel *k, const void *inst)
{
    return k->saved_bytes ? k->saved_bytes(inst) : 0;
}

/* k's instance for layer l under cfg (its dtype set to k's): every caller
 * creates instances through this. */
static inline int dl_kernel_create(const struct dl_kernel *k, const struct dl_layer *l, struct dl_kernel_config *cfg,
                                   void **inst, struct dl_error *err)
{
    cfg->dtype = k->dtype;
    return k->create(l, cfg, inst, err);
}

/* 1 when k computes weight gradients inside backward_data. */
static inline int dl_kernel_weights_in_data(const struct dl_kernel *k)
{
    return !k->backward_weights;
}

/* 1 when direction dir calls into k for a layer that has parameters
 * (has_params) and whose input gradients are wanted (any_din): backward
 * data runs for input gradients or for the weight gradients it computes,
 * backward weights only when it exists and there are parameters. */
static inline int dl_kernel_runs(const struct dl_kernel *k, enum dl_dir dir, int has_params, int any_din)
{
    if (dir == DL_DIR_FORWARD)
        return 1;
    if (dir == DL_DIR_BACKWARD_DATA)
        return any_din || (has_params && dl_kernel_weights_in_data(k));
    return has_params && !dl_kernel_weights_in_data(k);
}

/* Direction dir of k on a, when dl_kernel_runs() says it has work. */
static inline void dl_kernel_run(const struct dl_kernel *k, void *inst, const struct dl_kernel_args *a,
                                 enum dl_dir dir, int has_params, int any_din)
{
    if (!dl_kernel_runs(k, dir, has_params, any_din))
        return;
    if (dir == DL_DIR_FORWARD)
        k->forward(inst, a);
    else if (dir == DL_DIR_BACKWARD_DATA)
        k->backward_data(inst, a);
    else
        k->backward_weights(inst, a);
}

/* 1 when backward must split the batch exactly as forward did with this
 * kernel: an instance keeps saved bytes of state per micro-batch, or the
 * weight gradients of a layer with parameters come out of backward_data. */
static inline int dl_kernel_couples(const struct dl_kernel *k, size_t saved, int has_params)
{
    return saved > 0 || (has_params && dl_kernel_weights_in_data(k));
}

/* ---------------------------------------------------------------- registry */
/* NULL-terminated table of every kernel of this build; for one op kind the
 * default (fastest measured, see bench/README.md) comes first and the
 * reference last. */
extern const struct dl_kernel *const dl_kernels[];

/* The kernel called name serving op kind op (the reference serves all), or NULL. */
const struct dl_kernel *dl_kernel_find(const struct dl_op_kind *op, const char *name);

/* The CPU kernel libraries this process runs ("oneDNN 3.0.0; OpenBLAS
 * 0.3.21 ..."), looked up by symbol, "" when none. */
void dl_kernel_libraries(char *buf, size_t size);

/* Kernel choices: "OP=NAME" or "LAYER=NAME" or "all=NAME", later ones winning
 * over earlier ones; a choice that cannot run a layer falls back to the
 * default for that layer. */
#define DL_MAX_KERNEL_CHOICES 32
struct dl_kernel_choices {
    int no_fusion;  /* 1: never fold a ReLU into its producer (--no-fusion) */
    int sync_stats; /* 1: batch statistics are summed over ranks (--sync-bn): whole_batch kernels
                       without sync_stats cannot run a layer */
    enum dl_device_kind device; /* only kernels of this device run a layer (0: the host's) */
    int doc_mask;   /* 1: document masking is on: a kind with doc_mask runs only on kernels with doc_mask */
    int experts;    /* 1: experts split over ranks: a kind with expert_split runs only on expert_parallel kernels */
    /* The dtype layers compute in when no --kernel choice says otherwise:
     * f32, or bf16 (a layer takes the first usable kernel of that dtype,
     * else an f32 one; --precision bf16). */
    enum dl_dtype precision;
    int n;
    char key[DL_MAX_KERNEL_CHOICES][64];
    char name[DL_MAX_KERNEL_CHOICES][32];
};

/* Adds "KEY=NAME" to ch, checking that NAME is a kernel of this build (and,
 * when KEY is an op kind, that it serves KEY). */
int dl_kernel_choice_add(struct dl_kernel_choices *ch, const char *spec, struct dl_error *err);

/* The dtype k stores a tensor of shape s in: ids stay i32, floating-point
 * values take the kernel's dtype. */
static inline enum dl_dtype dl_kernel_tensor_dtype(const struct dl_kernel *k, struct dl_shape s)
{
    return s.dtype == DL_F32 ? k->dtype : s.dtype;
}

/* 1 when k may run a layer by default under ch: fallback 0, its dtype is
 * ch's precision (f32 when ch is NULL); fallback 1 (a layer no kernel of
 * that dtype can run), it is an f32 kernel. */
int dl_kernel_in_precision(const struct dl_kernel *k, const struct dl_kernel_choices *ch, int fallback);

/* 1 when k can run layer l under ch (NULL: no choices): it serves l's op
 * kind, supports l, runs on ch's device and honours ch->sync_stats. */
int dl_kernel_usable(const struct dl_kernel *k, const struct dl_layer *l, const struct dl_kernel_choices *ch);

/* The kernel that runs layer l: the last matching choice usable for l,
 * else the first registered kernel usable for l (on the host, at least the
 * reference; NULL when no kernel of ch's device can run l). */
const struct dl_kernel *dl_kernel_select(const struct dl_layer *l, const struct dl_kernel_choices *ch);

/* An instance of k for l and mb samples whose input is offered in NCHW (the
 * layouts k then wants are in *cfg), as the tuner measures kernels. */
int dl_kernel_create_plain(const struct dl_kernel *k, const struct dl_layer *l, int mb,
                           struct dl_kernel_config *cfg, void **inst, struct dl_error *err);

/* workspace_bytes(layer, mb) per direction, for plain layouts around l:
 * creates an instance, asks and destroys it. */
int dl_kernel_workspace(const struct dl_kernel *k, const struct dl_layer *l, int mb,
                        size_t ws[DL_N_DIRS], struct dl_error *err);

/* The machine's measured sgemm peak: the faster of the GEMM libraries of
 * this build on an n^3 product (median of a few runs), in GFLOP/s; *lib
 * names it and *blas_core gives OpenBLAS's detected core.  0 without any. */
double dl_kernel_sgemm_peak(int n, const char **lib, const char **blas_core);

/* The machine's measured bf16 GEMM peak: oneDNN's bf16 matmul (f32
 * accumulation) on an n^3 product, in GFLOP/s; *impl names oneDNN's
 * implementation.  0 without a JIT one (no AVX-512) or without oneDNN. */
double dl_kernel_bf16_gemm_peak(int n, const char **impl);

/* 1 where this CPU computes bf16 products natively as oneDNN sees it
 * (AVX512-BF16 or AMX, within ONEDNN_MAX_CPU_ISA); 0 where oneDNN emulates
 * them with AVX-512 integer code or only its reference code runs them, or
 * without oneDNN. */
int dl_kernel_bf16_native(void);

/* The layouts of kernels that keep whatever their first input arrives in
 * (pooling, batch norm, activations, add): every input and the output in the
 * layout of input 0.  For kernel tables' .layouts. */
void dl_kernel_follow_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                              enum dl_layout *out);

/* The layouts k negotiates for l given what the producers offer. */
void dl_kernel_layouts(const struct dl_kernel *k, const struct dl_layer *l, const enum dl_layout *offered,
                       enum dl_layout *in, enum dl_layout *out);

#endif
