/* cuda/conv.c: 2-D convolution on a GPU through cuDNN, in f32 and in bf16
 * (built --with-cuda, never run on a GPU so far): forward, backward data
 * and backward filter (+ bias) on NCHW tensors in device memory, with
 * groups, stride, padding and dilation as the op defines them (the output
 * size cuDNN computes is checked against the layer's at creation).
 *
 * Algorithms as tuner candidates.  cuDNN ranks its algorithms for a shape,
 * dtype and direction (cudnnGet*Algorithm_v7, each with its workspace).
 * The kernels "cudnn", "cudnn-r2", ..., "cudnn-r8" (and "cudnn-bf16",
 * "cudnn-bf16-r2", ..., "cudnn-bf16-r8") run, in every direction, the
 * first, second, ..., eighth algorithm of that ranking that cuDNN reports
 * usable (the last usable one where a direction has fewer), and
 * workspace_bytes() is that algorithm's workspace (and, in bf16, the
 * rounded weights').  So every algorithm cuDNN reports is a candidate the
 * tuner times per direction and micro-batch size, and it may combine them
 * across directions (the directions are not coupled: no saved state,
 * separate backward_weights); "cudnn" and "cudnn-bf16", cuDNN's own first
 * choices, are the defaults.
 *
 * f32: math is FP32 FMA only (CUDNN_FMA_MATH: no TF32 or tensor-core
 * rounding).  Backward filter and bias accumulate (beta 1), as kernel.h
 * asks.
 *
 * bf16 (one create function for both tables, the dtype from the kernel
 * config): the input, output and their gradients bf16 (cuDNN's
 * CUDNN_DATA_BFLOAT16 tensors, FP32 compute type, tensor-core math allowed:
 * bf16 products are exact in f32 and nothing is converted down), the f32
 * master weights rounded to bf16 in the workspace for each call, as
 * onednn-bf16 does.  cuDNN's filter gradient has the filter's dtype, so
 * backward filter writes it in bf16 in the workspace (beta 0) and adds it
 * into the f32 master gradient (dl_cuda_cast with add: the sum in f32,
 * rounded once): the weight gradient of each call is rounded to bf16 on
 * its way, as PyTorch's autocast rounds it (its convolution's weight is a
 * bf16 copy, whose gradient is bf16 before the copy's backward adds it to
 * the f32 .grad); the CPU's bf16 kernels keep it f32.  The bias: cuDNN's
 * bias calls take it in the output's dtype, so forward fills the output
 * with the f32 bias rounded to bf16 (bias_kernels.cu) and the convolution
 * adds to it (beta 1): one rounding of the output, the bias itself rounded
 * to bf16 first, as autocast casts a convolution's bias (the CPU's bf16
 * kernels add it in f32); its gradient is summed from the bf16 output
 * gradient in f32 (bias_kernels.cu) into the f32 master gradient.
 *
 * This is cuDNN's legacy convolution API (kept in cuDNN 9, deprecated in
 * favour of the graph API). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/bias_kernels.h"
#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/device_kernels.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cudnn_conv {
    struct dl_cudnn_io io;           /* handle; x: N C H W, y: N K P Q, in the kernel's dtype */
    cudnnTensorDescriptor_t b;       /* 1 K 1 1, f32 (the f32 kernel's bias calls) */
    cudnnFilterDescriptor_t w;       /* K, C/G, R, S, in the kernel's dtype */
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws[DL_N_DIRS];            /* cuDNN's workspace per direction */
    size_t filter_bytes;             /* bf16: the rounded weights (or their gradient) ahead of it; f32: 0 */
    long filter_count;               /* K C/G R S */
    long N, K, PQ;                   /* the output's samples, channels and values a channel */
    enum dl_dtype dt;                /* the kernel's */
    int bias;
    const char *name;                /* the kernel's, for failures */
};

static void cudnn_conv_destroy(void *inst)
{
    struct cudnn_conv *c = inst;
    if (!c)
        return;
    if (c->conv)
        cudnnDestroyConvolutionDescriptor(c->conv);
    if (c->w)
        cudnnDestroyFilterDescriptor(c->w);
    if (c->b)
        cudnnDestroyTensorDescriptor(c->b);
    dl_cudnn_io_free(&c->io);
    free(c);
}

#define CUDNN_TRY(call)                                                                          \
    do {                                                                                         \
        cudnnStatus_t s_ = (call);                                                               \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                        \
            what = #call, status = s_;                                                           \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

/* 1 when an algorithm of math type m rounds nothing beyond the kernel's
 * dtype: f32 takes no tensor-core math (it rounds f32 inputs to TF32), bf16
 * any but the one that converts its operands down. */
static int math_usable(cudnnMathType_t m, enum dl_dtype dt)
{
    if (dt == DL_BF16)
        return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* The rank-th (1-based) algorithm of a direction's ranking that cuDNN
 * reports usable with math that rounds nothing more (math_usable), or the
 * last such one when there are fewer. */
#define RANKED_USABLE(perf, n, rank, out_algo, out_ws)                                           \
    do {                                                                                         \
        int usable_ = 0;                                                                         \
        for (int i_ = 0; i_ < (n) && usable_ < (rank); i_++)                                     \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && math_usable((perf)[i_].mathType, c->dt)) { \
                (out_algo) = (perf)[i_].algo, (out_ws) = (perf)[i_].memory, usable_++;           \
            }                                                                                    \
        if (!usable_) {                                                                          \
            what = "no usable algorithm for " #out_algo, status = CUDNN_STATUS_NOT_SUPPORTED;     \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

static int cudnn_conv_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                             struct dl_error *err, const char *name, int rank)
{
    struct dl_conv_geom g = dl_conv_geom(l);
    int rc;
    struct cudnn_conv *c = dl_cudnn_io_new(sizeof *c, l, cfg->mb, cfg->dtype, name, &rc, err);
    *inst = NULL;
    if (!c)
        return rc;
    c->bias = g.bias;
    c->name = name;
    c->dt = cfg->dtype;
    c->filter_count = (long)g.K * g.Cg * g.R * g.S;
    c->filter_bytes = c->dt == DL_F32 ? 0 : (dl_dtype_size(c->dt) * (size_t)c->filter_count + 255) / 256 * 256;
    c->N = cfg->mb, c->K = g.K, c->PQ = (long)g.P * g.Q;
    const char *what = NULL;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    int n, k, p, q;
    cudnnHandle_t h = c->io.h;
    cudnnTensorDescriptor_t x = c->io.x, y = c->io.y;
    CUDNN_TRY(cudnnCreateTensorDescriptor(&c->b));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&c->w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c->conv));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(c->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g.K, 1, 1));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(c->w, dl_cudnn_dtype(c->dt), CUDNN_TENSOR_NCHW, g.K, g.Cg, g.R, g.S));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(c->conv, g.ph, g.pw, g.sh, g.sw, g.dh, g.dw, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    CUDNN_TRY(cudnnSetConvolutionGroupCount(c->conv, g.G));
    CUDNN_TRY(cudnnSetConvolutionMathType(c->conv, c->dt == DL_BF16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(c->conv, x, c->w, &n, &k, &p, &q));
    if (n != cfg->mb || k != g.K || p != g.P || q != g.Q) {
        cudnn_conv_destroy(c);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel %s): cuDNN's output is %dx%dx%d, the "
                         "layer's %dx%dx%d", l->name, name, k, p, q, g.K, g.P, g.Q);
    }
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, x, c->w, c->conv, y,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
    RANKED_USABLE(fwd, got, rank, c->fwd, c->ws[DL_DIR_FORWARD]);
    CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c->w, y, c->conv, x,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, bwd_data));
    RANKED_USABLE(bwd_data, got, rank, c->bwd_data, c->ws[DL_DIR_BACKWARD_DATA]);
    CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, c->conv, c->w,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
                                                            bwd_filter));
    RANKED_USABLE(bwd_filter, got, rank, c->bwd_filter, c->ws[DL_DIR_BACKWARD_WEIGHTS]);
    *inst = c;
    return DL_OK;
fail:
    cudnn_conv_destroy(c);
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel %s, algorithm rank %d): %s: %s", l->name, name,
                     rank, what, cudnnGetErrorString(status));
}

static size_t cudnn_conv_workspace_bytes(const void *inst, enum dl_dir dir)
{
    const struct cudnn_conv *c = inst;
    return c->filter_bytes + c->ws[dir];
}

/* cuDNN's workspace of a call: past the bf16 filter (none in f32). */
static void *cudnn_workspace(const struct cudnn_conv *c, const struct dl_kernel_args *a)
{
    return (char *)a->workspace + c->filter_bytes;
}

/* The filter cuDNN reads: the f32 master weights, or (bf16) them rounded
 * to bf16 at the workspace's start; NULL with the failure recorded. */
static const void *filter(const struct cudnn_conv *c, const struct dl_kernel_args *a)
{
    if (c->dt == DL_F32)
        return a->c.param[0];
    return dl_cuda_ok(a, c->name,
                      (cudaError_t)dl_cuda_cast(a->workspace, c->dt, a->c.param[0], DL_F32, c->filter_count, 0),
                      "dl_cuda_cast (weights to bf16)")
               ? a->workspace
               : NULL;
}

static void cudnn_conv_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1, zero = 0;
    const void *w = filter(c, a);
    /* bf16: the output starts as the bias, which the convolution adds to (beta 1) */
    int bias_first = c->bias && c->dt != DL_F32;
    if (!w || (bias_first && !dl_cuda_ok(a, c->name,
                                         (cudaError_t)dl_cuda_bias_fill_bf16(dl_tensor_bf16(&o->out), o->param[1], c->N, (int)c->K, c->PQ),
                                         "bias fill launch")))
        return;
    if (dl_cudnn_ok(a, c->name,
                    cudnnConvolutionForward(c->io.h, &one, c->io.x, dl_tensor_const_any(&o->in[0]), c->w, w, c->conv, c->fwd,
                                            cudnn_workspace(c, a), c->ws[DL_DIR_FORWARD], bias_first ? &one : &zero,
                                            c->io.y, dl_tensor_any(&o->out)),
                    "cudnnConvolutionForward") &&
        c->bias && !bias_first)
        dl_cudnn_ok(a, c->name, cudnnAddTensor(c->io.h, &one, c->b, o->param[1], &one, c->io.y, dl_tensor_any(&o->out)),
                    "cudnnAddTensor");
}

static void cudnn_conv_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1, zero = 0;
    const void *w = o->din[0].data ? filter(c, a) : NULL;
    if (w)
        dl_cudnn_ok(a, c->name,
                    cudnnConvolutionBackwardData(c->io.h, &one, c->w, w, c->io.y, dl_tensor_const_any(&o->dout), c->conv, c->bwd_data,
                                                 cudnn_workspace(c, a), c->ws[DL_DIR_BACKWARD_DATA], &zero, c->io.x,
                                                 dl_tensor_any(&o->din[0])),
                    "cudnnConvolutionBackwardData");
}

static void cudnn_conv_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1, zero = 0;
    int f32 = c->dt == DL_F32;
    /* f32: accumulated in place; bf16: written in the filter's dtype at the workspace's start, then added */
    void *dw = f32 ? (void *)o->dparam[0] : a->workspace;
    if (o->dparam[0] &&
        dl_cudnn_ok(a, c->name,
                    cudnnConvolutionBackwardFilter(c->io.h, &one, c->io.x, dl_tensor_const_any(&o->in[0]), c->io.y, dl_tensor_const_any(&o->dout), c->conv,
                                                   c->bwd_filter, cudnn_workspace(c, a),
                                                   c->ws[DL_DIR_BACKWARD_WEIGHTS], f32 ? &one : &zero, c->w, dw),
                    "cudnnConvolutionBackwardFilter") &&
        !f32 &&
        !dl_cuda_ok(a, c->name, (cudaError_t)dl_cuda_cast(o->dparam[0], DL_F32, dw, c->dt, c->filter_count, 1),
                    "dl_cuda_cast (weight gradient added)"))
        return;
    if (!c->bias || !o->dparam[1])
        return;
    if (f32)
        dl_cudnn_ok(a, c->name, cudnnConvolutionBackwardBias(c->io.h, &one, c->io.y, dl_tensor_const_any(&o->dout), &one, c->b, o->dparam[1]),
                    "cudnnConvolutionBackwardBias");
    else
        dl_cuda_ok(a, c->name, (cudaError_t)dl_cuda_bias_grad_bf16(o->dparam[1], dl_tensor_const_bf16(&o->dout), c->N, (int)c->K, c->PQ),
                   "bias gradient launch");
}

#define CUDNN_CONV_KERNEL(SYM, NAME, RANK, DTYPE)                                                \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg,       \
                            void **inst, struct dl_error *err)                                   \
    {                                                                                            \
        return cudnn_conv_create(l, cfg, inst, err, NAME, RANK);                                 \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cuda", .op = &dl_op_conv, .device = DL_DEVICE_CUDA, .dtype = DTYPE, \
        .create = SYM##_create, .destroy = cudnn_conv_destroy,                                   \
        .workspace_bytes = cudnn_conv_workspace_bytes, .forward = cudnn_conv_forward,            \
        .backward_data = cudnn_conv_backward_data, .backward_weights = cudnn_conv_backward_weights, \
    };
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv, "cudnn", 1, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r2, "cudnn-r2", 2, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r3, "cudnn-r3", 3, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r4, "cudnn-r4", 4, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r5, "cudnn-r5", 5, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r6, "cudnn-r6", 6, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r7, "cudnn-r7", 7, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r8, "cudnn-r8", 8, DL_F32)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16, "cudnn-bf16", 1, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r2, "cudnn-bf16-r2", 2, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r3, "cudnn-bf16-r3", 3, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r4, "cudnn-bf16-r4", 4, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r5, "cudnn-bf16-r5", 5, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r6, "cudnn-bf16-r6", 6, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r7, "cudnn-bf16-r7", 7, DL_BF16)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_bf16_r8, "cudnn-bf16-r8", 8, DL_BF16)
