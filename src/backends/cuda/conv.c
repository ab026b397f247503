/* cuda/conv.c: 2-D convolution on a GPU through cuDNN (built --with-cuda,
 * never run on a GPU so far): forward, backward data and backward filter
 * (+ bias) on NCHW float tensors in device memory, with groups, stride,
 * padding and dilation as the op defines them (the output size cuDNN
 * computes is checked against the layer's at creation).
 *
 * Algorithms as tuner candidates.  cuDNN ranks its algorithms for a shape
 * and direction (cudnnGet*Algorithm_v7, each with its workspace).  The
 * kernels "cudnn", "cudnn-r2", ..., "cudnn-r8" run, in every direction, the
 * first, second, ..., eighth algorithm of that ranking that cuDNN reports
 * usable (the last usable one where a direction has fewer), and
 * workspace_bytes() is that algorithm's workspace.  So every algorithm
 * cuDNN reports is a candidate the tuner times per direction and
 * micro-batch size, and it may combine them across directions (the
 * directions are not coupled: no saved state, separate backward_weights);
 * "cudnn", cuDNN's own first choice, is the default.
 *
 * Math is FP32 FMA only (CUDNN_FMA_MATH: no TF32 or tensor-core rounding).
 * Backward filter and bias accumulate (beta 1), as kernel.h asks.  This is
 * cuDNN's legacy convolution API (kept in cuDNN 9, deprecated in favour of
 * the graph API). */
#include "backends/cuda/cuda.h"

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/cuda/cudnn_io.h"
#include "backends/cuda/fault.h"
#include "ops/kinds.h"

struct cudnn_conv {
    struct dl_cudnn_io io;           /* handle; x: N C H W, y: N K P Q */
    cudnnTensorDescriptor_t b;       /* 1 K 1 1 */
    cudnnFilterDescriptor_t w;       /* K, C/G, R, S */
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws[DL_N_DIRS];
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

/* The rank-th (1-based) algorithm of a direction's ranking that cuDNN
 * reports usable without tensor-core math (which rounds inputs), or the
 * last such one when there are fewer. */
#define RANKED_USABLE(perf, n, rank, out_algo, out_ws)                                           \
    do {                                                                                         \
        int usable_ = 0;                                                                         \
        for (int i_ = 0; i_ < (n) && usable_ < (rank); i_++)                                     \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].mathType != CUDNN_TENSOR_OP_MATH && \
                (perf)[i_].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {                  \
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
    struct cudnn_conv *c = dl_cudnn_io_new(sizeof *c, l, cfg->mb, "cudnn", &rc, err);
    *inst = NULL;
    if (!c)
        return rc;
    c->bias = g.bias;
    c->name = name;
    const char *what = NULL;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    int n, k, p, q;
    cudnnHandle_t h = c->io.h;
    cudnnTensorDescriptor_t x = c->io.x, y = c->io.y;
    CUDNN_TRY(cudnnCreateTensorDescriptor(&c->b));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&c->w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c->conv));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(c->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g.K, 1, 1));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g.K, g.Cg, g.R, g.S));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(c->conv, g.ph, g.pw, g.sh, g.sw, g.dh, g.dw, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    CUDNN_TRY(cudnnSetConvolutionGroupCount(c->conv, g.G));
    CUDNN_TRY(cudnnSetConvolutionMathType(c->conv, CUDNN_FMA_MATH));
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(c->conv, x, c->w, &n, &k, &p, &q));
    if (n != cfg->mb || k != g.K || p != g.P || q != g.Q) {
        cudnn_conv_destroy(c);
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn): cuDNN's output is %dx%dx%d, the "
                         "layer's %dx%dx%d", l->name, k, p, q, g.K, g.P, g.Q);
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
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel cudnn, algorithm rank %d): %s: %s", l->name, rank,
                     what, cudnnGetErrorString(status));
}

static size_t cudnn_conv_workspace_bytes(const void *inst, enum dl_dir dir)
{
    const struct cudnn_conv *c = inst;
    return c->ws[dir];
}

static void cudnn_conv_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1, zero = 0;
    if (dl_cudnn_ok(a, c->name,
                    cudnnConvolutionForward(c->io.h, &one, c->io.x, o->in[0], c->w, o->param[0], c->conv, c->fwd,
                                            a->workspace, c->ws[DL_DIR_FORWARD], &zero, c->io.y, o->out),
                    "cudnnConvolutionForward") &&
        c->bias)
        dl_cudnn_ok(a, c->name, cudnnAddTensor(c->io.h, &one, c->b, o->param[1], &one, c->io.y, o->out),
                    "cudnnAddTensor");
}

static void cudnn_conv_backward_data(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1, zero = 0;
    if (o->din[0])
        dl_cudnn_ok(a, c->name,
                    cudnnConvolutionBackwardData(c->io.h, &one, c->w, o->param[0], c->io.y, o->dout, c->conv,
                                                 c->bwd_data, a->workspace, c->ws[DL_DIR_BACKWARD_DATA], &zero,
                                                 c->io.x, o->din[0]),
                    "cudnnConvolutionBackwardData");
}

static void cudnn_conv_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    const struct cudnn_conv *c = inst;
    const struct dl_op_call *o = &a->c;
    const float one = 1;
    if (o->dparam[0])
        dl_cudnn_ok(a, c->name,
                    cudnnConvolutionBackwardFilter(c->io.h, &one, c->io.x, o->in[0], c->io.y, o->dout, c->conv,
                                                   c->bwd_filter, a->workspace, c->ws[DL_DIR_BACKWARD_WEIGHTS], &one,
                                                   c->w, o->dparam[0]),
                    "cudnnConvolutionBackwardFilter");
    if (c->bias && o->dparam[1])
        dl_cudnn_ok(a, c->name, cudnnConvolutionBackwardBias(c->io.h, &one, c->io.y, o->dout, &one, c->b, o->dparam[1]),
                    "cudnnConvolutionBackwardBias");
}

#define CUDNN_CONV_KERNEL(SYM, NAME, RANK)                                                       \
    static int SYM##_create(const struct dl_layer *l, const struct dl_kernel_config *cfg,       \
                            void **inst, struct dl_error *err)                                   \
    {                                                                                            \
        return cudnn_conv_create(l, cfg, inst, err, NAME, RANK);                                       \
    }                                                                                            \
    const struct dl_kernel SYM = {                                                               \
        .name = NAME, .backend = "cuda", .op = &dl_op_conv, .device = DL_DEVICE_CUDA,            \
        .create = SYM##_create, .destroy = cudnn_conv_destroy,                                   \
        .workspace_bytes = cudnn_conv_workspace_bytes, .forward = cudnn_conv_forward,            \
        .backward_data = cudnn_conv_backward_data, .backward_weights = cudnn_conv_backward_weights, \
    };
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv, "cudnn", 1)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r2, "cudnn-r2", 2)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r3, "cudnn-r3", 3)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r4, "cudnn-r4", 4)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r5, "cudnn-r5", 5)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r6, "cudnn-r6", 6)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r7, "cudnn-r7", 7)
CUDNN_CONV_KERNEL(dl_kernel_cudnn_conv_r8, "cudnn-r8", 8)
