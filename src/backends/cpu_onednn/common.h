/* common.h: what every oneDNN kernel shares: the CPU engine and stream (made
 * once per process), memory descriptors for the executor's layouts, and
 * struct dl_dnnl_prim, a primitive with one memory object per argument made
 * at creation, whose data handles are re-pointed on every call (nothing is
 * allocated per step).  Scratchpads are user-managed: they come from the
 * executor's workspace. */
#ifndef DL_ONEDNN_COMMON_H
#define DL_ONEDNN_COMMON_H

#include <dnnl.h>

#include "backends/cpu_onednn/unblock.h"
#include "backends/kernel.h"

#define DL_DNNL_MAX_ARGS 12

struct dl_dnnl_prim {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    int n;
    int arg[DL_DNNL_MAX_ARGS];
    dnnl_memory_t mem[DL_DNNL_MAX_ARGS];
    size_t scratch;              /* scratchpad bytes */
};

dnnl_engine_t dl_dnnl_engine(void);
dnnl_stream_t dl_dnnl_stream(void);

/* Turns a oneDNN status into an error naming what failed. */
int dl_dnnl_check(dnnl_status_t st, const char *what, struct dl_error *err);

/* oneDNN's data type for a dtype (f32 or bf16). */
static inline dnnl_data_type_t dl_dnnl_type(enum dl_dtype t)
{
    return t == DL_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* s in the dtype of the kernel cfg is for (the layer's shapes say f32). */
static inline struct dl_shape dl_dnnl_shape(struct dl_shape s, const struct dl_kernel_config *cfg)
{
    s.dtype = cfg->dtype;
    return s;
}

/* 1 when oneDNN runs bf16 primitives with its JIT code on this CPU (AVX-512
 * core, natively with AVX512-BF16): the bf16 kernels' supports(). */
int dl_dnnl_bf16_supports(const struct dl_layer *l);

/* 4-D descriptor of n samples of s (in its dtype) in layout l. */
void dl_dnnl_md(dnnl_memory_desc_t *md, int n, struct dl_shape s, enum dl_layout l);
/* The layout whose descriptor equals md, or -1. */
int dl_dnnl_layout_of(const dnnl_memory_desc_t *md, int n, struct dl_shape s);

/* Creates the primitive of op_desc (hint: the forward pd for backward ones)
 * and memory objects for the listed args (0-terminated; the scratchpad is
 * added last when the primitive has one). */
int dl_dnnl_prim_init(struct dl_dnnl_prim *p, const void *op_desc, const_dnnl_primitive_desc_t hint,
                      const int *args, struct dl_error *err);
/* Memory objects and the primitive for a pd already in p->pd. */
int dl_dnnl_prim_adopt(struct dl_dnnl_prim *p, const int *args, struct dl_error *err);
/* The pd alone (for queries); caller destroys. */
int dl_dnnl_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const_dnnl_primitive_desc_t hint);
void dl_dnnl_prim_free(struct dl_dnnl_prim *p);
const dnnl_memory_desc_t *dl_dnnl_prim_md(const struct dl_dnnl_prim *p, int arg);
size_t dl_dnnl_prim_bytes(const struct dl_dnnl_prim *p, int arg);

/* Points p's memory objects at ptr[i] (args[i], same order as at init) and
 * scratch, and lists them in a[] (p->n of them) for dnnl_primitive_execute
 * on stream: for a caller running p on a stream of its own (a thread's). */
void dl_dnnl_prim_args(const struct dl_dnnl_prim *p, void *const *ptr, void *scratch, dnnl_stream_t stream,
                       dnnl_exec_arg_t *a);

/* Executes with ptr[i] as the data of args[i] (same order as at init) and
 * scratch as the scratchpad; waits for completion. */
void dl_dnnl_prim_run(const struct dl_dnnl_prim *p, void *const *ptr, void *scratch);

/* Primitive attributes with a user scratchpad and, when accumulate is 1, a
 * sum post-op (dst += the result); the caller destroys them. */
int dl_dnnl_attr(int accumulate, dnnl_primitive_attr_t *attr, struct dl_error *err);

/* A reorder between two descriptors; accumulate: dst += reorder(src). */
int dl_dnnl_reorder_init(struct dl_dnnl_prim *p, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                         int accumulate, struct dl_error *err);

/* 1 when the primitives of the n descriptors (descs[0] the forward one, the
 * hint of the others) all have an optimised implementation, not oneDNN's
 * generic "ref" one (for mb = the batch the descriptors were made for). */
int dl_dnnl_all_jit(const void *const *descs, int n);

/* A layer with weights in the executor's flat vector (convolution, inner
 * product): forward, backward data and backward weights primitives whose
 * weights layout oneDNN chose (format any).  Each call reorders the user
 * weights (PyTorch's layout, user_w) into the pass's layout in the
 * workspace; backward weights computes dW into the workspace and reorders it
 * back with a sum post-op, and adds db, so both accumulate across
 * micro-batches.  When the backward passes want the input in another layout
 * than forward reads it (a few-channel convolution: forward only has a JIT
 * implementation on NCHW input, the backward passes only on blocked), they
 * reorder it, and the input gradient back, in their workspace: the layer's
 * input and its gradient stay in forward's layout for the executor.  The
 * instance of such a kernel is this struct: its create() builds the three op
 * descriptors and calls dl_dnnl_wprim_create, and the other entry points are
 * the functions below. */
struct dl_dnnl_wpass {
    struct dl_dnnl_prim prim;
    struct dl_dnnl_prim weights; /* user weights into prim's layout (backward weights: dW back, summing) */
    struct dl_dnnl_prim act;     /* input into prim's layout (backward data: input gradient back) */
    int warg, aarg;              /* prim's arguments those two reorders serve */
    struct dl_dnnl_unblock16 unblock; /* backward weights: dW back by unblock.c's loop, not the reorder (k > 0) */
};                               /* a reorder whose prim is NULL is not needed */

struct dl_dnnl_wprim {
    struct dl_dnnl_wpass fwd, bwd_data, bwd_w;
    int n_bias;   /* bias values (0: no bias) */
    float *dbias; /* n_bias */
};

/* fwd, bd, bw: the op descriptors of the three passes (dst layouts fixed,
 * the same src layout as fwd's or one of the backward passes' own, weights
 * "any"). */
int dl_dnnl_wprim_create(const void *fwd, const void *bd, const void *bw, const dnnl_memory_desc_t *user_w,
                         int n_bias, void **inst, struct dl_error *err);
void dl_dnnl_wprim_destroy(void *inst);
size_t dl_dnnl_wprim_ws(const void *inst, enum dl_dir dir);
/* in[0], param[0] (weights), param[1] (bias) -> out */
void dl_dnnl_wprim_forward(void *inst, const struct dl_kernel_args *a);
/* dout, param[0] -> din[0] (nothing when din[0] is NULL) */
void dl_dnnl_wprim_backward_data(void *inst, const struct dl_kernel_args *a);
/* in[0], dout -> dparam[0] +=, dparam[1] += (NULL ones skipped) */
void dl_dnnl_wprim_backward_weights(void *inst, const struct dl_kernel_args *a);

/* Rounds up to a 64-byte multiple (workspace partitions). */
static inline size_t dl_dnnl_align(size_t b)
{
    return (b + 63) / 64 * 64;
}

/* dl_kernel_follow_layouts (kernel.h), except that a plain input of at
 * least 8 channels and more than one pixel is asked for in oneDNN's blocked
 * layout (the graph inserts the reorder): for batch norm, whose NCHW implementation is several times
 * slower (ResNet's stem after its NCHW first convolution: bench/README.md),
 * and which leaves the activations and pooling after it blocked too. */
void dl_dnnl_blocked_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                             enum dl_layout *out);

#endif
