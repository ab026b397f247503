/* test_kernels.c: every fast kernel against the reference op on random
 * inputs: forward output, input gradient, weight gradients (accumulated onto
 * non-zero values) and batch-norm running statistics, relative error at most
 * 1e-4 in fp32, over odd sizes, stride, padding, dilation, groups and
 * non-square kernels; each kernel also run as two micro-batches (weight
 * gradients accumulating across them) where it allows that.  A second table
 * offers the input in a blocked layout, as a oneDNN convolution produces it
 * (the fc kernels on inputs straight from such a layer).  Kernels that can
 * fuse a ReLU are also run fused, against themselves unfused followed by a
 * ReLU, bit for bit, in every case and layout.  Every kernel of the build
 * meets some case of its kind (every_kernel_has_a_case), and the last case
 * checks that every kernel the CPU can run was compared at least once.
 * No kernel keeps more state for fewer samples of any case
 * (saved_state_grows_with_samples).
 * Losses (softmax cross-entropy, with and without label smoothing) are
 * cases too, on random labels.  The bf16 kernels (kernel.h "Dtypes") run
 * every case of the kinds they serve on bf16 inputs and output gradient
 * (bf16_kernels): their output and input gradients must be the
 * reference's on the same bf16 values and bf16-rounded parameters, rounded
 * once to bf16 (each product of two bf16 values is exact in f32, so
 * computing at bf16's rounding points adds that one rounding and nothing
 * else); weight gradients are the reference's in f32.  In test_kernels_cuda
 * the GPU's bf16 kernels (convolution, fc, attention) run the same way on
 * device copies, the convolution allowed the two roundings it adds (its
 * bias and each call's weight gradient rounded to bf16, cuda/conv.c).
 * The harness itself (kernel_check.c: layouts, copies to the kernel's
 * device and back) gives for the reference kernel bit for bit what the
 * reference called directly gives (harness_equals_direct_reference).
 *
 * One source, two programs: test_kernels takes the host's kernels;
 * test_kernels_cuda (built --with-cuda, TEST_ON_CUDA) the GPU's, run on
 * device copies of the same inputs (kernel_check.c) against the same host
 * reference, and reports itself skipped with dl_device_open's reason where
 * there is no GPU; it has cases of its own (token ids, long attention rows,
 * sequences through every GPT layer: TEST_ON_CUDA) for the GPU's
 * transformer kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_simd/simd.h"
#include "backends/device.h"
#include "backends/reference/reference.h"
#include "core/threads.h"
#include "kernel_check.h"

#define TOL 1e-4

#ifdef TEST_ON_CUDA
#include "ops/kinds.h"
#define TEST_DEVICE DL_DEVICE_CUDA
#else
#define TEST_DEVICE DL_DEVICE_CPU
#endif

/* 1 for a kernel of the device this program tests. */
static int on_test_device(const struct dl_kernel *k)
{
    return k->device == TEST_DEVICE;
}

struct kcase {
    const char *name;
    const char *input; /* [C, H, W] */
    const char *layer; /* flow-style YAML of the layer under test */
    int batch;
    const char *second; /* NULL, or a layer "s" on the input before the tested one (a second input's producer) */
};

static const struct kcase cases[] = {
    {"conv_3x3_pad", "[16, 9, 7]", "{type: conv, filters: 32, kernel: 3, pad: 1}", 4, NULL},
    {"conv_3x3_wino_shape", "[32, 12, 12]", "{type: conv, filters: 32, kernel: 3, pad: 1, bias: false}", 2, NULL},
    {"conv_first_layer", "[3, 13, 11]", "{type: conv, filters: 16, kernel: 7, stride: 2, pad: 3}", 2, NULL},
    {"conv_lenet1", "[1, 28, 28]", "{type: conv, filters: 6, kernel: 5, pad: 2}", 4, NULL},
    /* few input channels at stride 1 (the direct kernel): output channel
     * groups of 6 plus a remainder, rows of 16 columns plus a tail, kernel
     * widths 1 to 7, rectangular kernels, uneven padding */
    {"conv_few_channels", "[3, 19, 37]", "{type: conv, filters: 13, kernel: 3, pad: 1}", 3, NULL},
    {"conv_few_7x7", "[2, 12, 9]", "{type: conv, filters: 7, kernel: 7, pad: 3, bias: false}", 2, NULL},
    {"conv_few_rect", "[4, 6, 33]", "{type: conv, filters: 5, kernel: [4, 2], pad: [0, 1]}", 2, NULL},
    {"conv_few_1x1", "[1, 5, 17]", "{type: conv, filters: 1, kernel: 1}", 3, NULL},
    {"conv_few_6x6", "[2, 8, 16]", "{type: conv, filters: 12, kernel: 6, pad: 2}", 2, NULL},
    /* rows narrower than a run: a run's spill covers several rows below */
    {"conv_few_narrow", "[2, 9, 3]", "{type: conv, filters: 7, kernel: 3, pad: 1}", 3, NULL},
    {"conv_lenet2", "[6, 14, 14]", "{type: conv, filters: 16, kernel: 5}", 4, NULL},
    {"conv_stride2_odd", "[5, 9, 8]", "{type: conv, filters: 7, kernel: 3, stride: 2, pad: 1}", 2, NULL},
    {"conv_dilation", "[4, 11, 9]", "{type: conv, filters: 5, kernel: 3, dilation: 2, pad: 2}", 2, NULL},
    {"conv_groups", "[8, 7, 7]", "{type: conv, filters: 12, kernel: 3, groups: 4, pad: 1}", 2, NULL},
    {"conv_depthwise", "[16, 8, 8]", "{type: conv, filters: 16, kernel: 3, groups: 16, pad: 1}", 2, NULL},
    {"conv_rect_mixed", "[6, 9, 10]",
     "{type: conv, filters: 4, kernel: [2, 3], stride: [1, 2], pad: [2, 1], dilation: [3, 1], groups: 2, bias: false}",
     2, NULL},
    {"conv_1x1", "[32, 7, 5]", "{type: conv, filters: 48, kernel: 1, bias: false}", 2, NULL},
    {"conv_1x1_stride2", "[32, 7, 7]", "{type: conv, filters: 16, kernel: 1, stride: 2}", 2, NULL},
    /* rows of 4 KiB in the weights: oneDNN's weight gradient summed back by
     * backends/cpu_onednn/unblock.c, not by a reorder */
    {"conv_1x1_wide", "[1024, 3, 2]", "{type: conv, filters: 32, kernel: 1, bias: false}", 2, NULL},
    {"conv_2x2_wide", "[256, 4, 5]", "{type: conv, filters: 48, kernel: 2, stride: 2}", 2, NULL},
    {"conv_stride_over_kernel", "[2, 8, 7]", "{type: conv, filters: 3, kernel: 2, stride: 3}", 2, NULL},
    /* the last input row and column are never read: oneDNN's right padding is -1 */
    {"conv_1x1_stride2_even", "[16, 8, 8]", "{type: conv, filters: 16, kernel: 1, stride: 2, bias: false}", 2, NULL},
    {"conv_3x3_stride2_even", "[16, 8, 8]", "{type: conv, filters: 8, kernel: 3, stride: 2}", 2, NULL},
    /* im2col keeps col from forward to backward for all of 4 samples (9.4
     * MB) but for 7 of 8 (18.9 MB, over its 16 MiB): the last unfolded again */
    {"conv_im2col_large", "[16, 64, 64]", "{type: conv, filters: 8, kernel: 3, pad: 1}", 8, NULL},
    {"maxpool_2x2", "[6, 10, 9]", "{type: maxpool, kernel: 2, stride: 2}", 2, NULL},
    {"maxpool_3x3_s2_p1", "[16, 11, 11]", "{type: maxpool, kernel: 3, stride: 2, pad: 1}", 2, NULL},
    {"maxpool_ceil", "[3, 7, 8]", "{type: maxpool, kernel: [3, 2], stride: 2, ceil_mode: true}", 2, NULL},
    /* rows of 18 outputs: vector runs of 8 and an overlapping last run */
    {"maxpool_2x2_wide", "[3, 10, 36]", "{type: maxpool, kernel: 2}", 2, NULL},
    {"maxpool_2x2_pad", "[4, 9, 21]", "{type: maxpool, kernel: 2, stride: 2, pad: 1}", 2, NULL},
    {"maxpool_3x2_s1", "[2, 7, 13]", "{type: maxpool, kernel: [3, 2], stride: 1, pad: [1, 0]}", 2, NULL},
    {"avgpool_pad", "[5, 9, 9]", "{type: avgpool, kernel: 3, stride: 2, pad: 1}", 2, NULL},
    {"avgpool_exclude", "[5, 9, 9]", "{type: avgpool, kernel: 3, stride: 2, pad: 1, count_include_pad: false}",
     2, NULL},
    {"avgpool_adaptive", "[4, 8, 6]", "{type: avgpool, output: [2, 3]}", 2, NULL},
    {"global_avgpool", "[20, 5, 7]", "{type: global_avgpool}", 2, NULL},
    {"batchnorm_2d", "[19, 5, 6]", "{type: batchnorm}", 3, NULL},
    {"batchnorm_1d", "[24, 1, 1]", "{type: batchnorm, momentum: 0.3}", 5, NULL},
    /* simd: vectors read as nChw16c, vectors of 20 (no block fits), three
     * chunks of samples (1600 values a plane: 3 samples a unit of work) */
    {"batchnorm_1d_16", "[32, 1, 1]", "{type: batchnorm}", 6, NULL},
    {"batchnorm_1d_odd", "[20, 1, 1]", "{type: batchnorm, eps: 0.01}", 7, NULL},
    {"batchnorm_chunks", "[3, 40, 40]", "{type: batchnorm}", 7, NULL},
    {"relu", "[17, 3, 5]", "{type: relu}", 2, NULL},
    {"leaky_relu", "[7, 3, 5]", "{type: leaky_relu, slope: 0.2}", 2, NULL},
    {"sigmoid", "[7, 3, 5]", "{type: sigmoid}", 2, NULL},
    {"tanh", "[7, 3, 5]", "{type: tanh}", 2, NULL},
    {"gelu", "[7, 3, 5]", "{type: gelu}", 2, NULL},
    {"gelu_exact", "[7, 3, 5]", "{type: gelu, approximate: none}", 2, NULL},
    {"gelu_sequence", "[9, 14]", "{type: gelu}", 3, NULL},
    /* layer and RMS norm over the features of each position: runs of 64 positions and a tail */
    {"layernorm_sequence", "[19, 37]", "{type: layernorm}", 3, NULL},
    {"layernorm_sequence_runs", "[150, 12]", "{type: layernorm, eps: 0.01}", 2, NULL},
    {"layernorm_no_affine", "[7, 64]", "{type: layernorm, affine: false}", 2, NULL},
    {"rmsnorm_sequence", "[19, 37]", "{type: rmsnorm}", 3, NULL},
    {"rmsnorm_sequence_runs", "[150, 12]", "{type: rmsnorm, eps: 0.01}", 2, NULL},
    {"rmsnorm_wide", "[5, 300]", "{type: rmsnorm, eps: 1e-5}", 2, NULL},
    {"add", "[18, 4, 3]", "{type: add, inputs: [input, input]}", 2, NULL},
    /* swiglu: gate the input, up its GELU; a tail of 3 in the last vector, and a call long enough for
     * the threads (150,000 elements in tasks of 4,096) */
    {"swiglu_tail", "[13, 7]", "{type: swiglu, inputs: [input, s]}", 3, "{type: gelu}"},
    {"swiglu_long", "[300, 250]", "{type: swiglu, inputs: [s, input]}", 2, "{type: gelu}"},
    {"add_three", "[5, 3, 7]", "{type: add, inputs: [input, s, input]}", 4, "{type: relu}"},
    /* blocks of 5, 3 and 5 channels in every sample */
    {"concat_uneven", "[5, 4, 3]", "{type: concat, inputs: [input, s, input]}", 4, "{type: conv, filters: 3, kernel: 1}"},
    {"concat_two", "[6, 3, 7]", "{type: concat, inputs: [input, input]}", 2, NULL},
    {"dropout", "[9, 4, 5]", "{type: dropout, rate: 0.3}", 4, NULL},
    {"dropout_vector", "[33, 1, 1]", "{type: dropout, rate: 0.6}", 6, NULL},
    {"dropout_rate0", "[4, 2, 3]", "{type: dropout, rate: 0}", 2, NULL},
    {"leaky_relu_default", "[6, 5, 4]", "{type: leaky_relu}", 2, NULL},
    {"flatten", "[5, 3, 4]", "{type: flatten}", 4, NULL},
    {"fc_vector", "[37, 1, 1]", "{type: fc, units: 19}", 4, NULL},
    {"fc_3d", "[3, 5, 7]", "{type: fc, units: 10, bias: false}", 4, NULL},
    {"fc_odd", "[7, 3, 1]", "{type: fc, units: 1}", 6, NULL},
    {"fc_wide", "[300, 1, 1]", "{type: fc, units: 65}", 8, NULL},
    {"fc_lenet1", "[16, 5, 5]", "{type: fc, units: 120}", 4, NULL},
    /* at every position of a sequence [T, C] (stored [C][T]: one GEMM per sample) */
    {"fc_sequence", "[9, 7]", "{type: fc, units: 6}", 3, NULL},
    {"fc_sequence_no_bias", "[5, 33]", "{type: fc, units: 17, bias: false}", 2, NULL},
    /* the -rows kernels' units in two blocks at mb 2 (2^22 / (2 * 700) = 2995 rows), one at mb 1 */
    {"fc_sequence_blocks", "[700, 5]", "{type: fc, units: 3001}", 2, NULL},
    /* attention on packed q, k, v [T, 3C], three inputs, without the mask, with dropout */
    {"attention", "[7, 24]", "{type: attention, heads: 2}", 3, NULL},
    {"attention_one_head", "[5, 9]", "{type: attention, heads: 1}", 2, NULL},
    {"attention_three", "[6, 8]", "{type: attention, heads: 4, inputs: [input, s, input]}", 2, "{type: relu}"},
    {"attention_full", "[9, 12]", "{type: attention, heads: 2, causal: false}", 2, NULL},
    {"attention_dropout", "[8, 12]", "{type: attention, heads: 2, dropout: 0.25}", 3, NULL},
    /* grouped-query: q of 4 heads of 3 and k, v of 2 packed [T, (4 + 2 2) 3]; multi-query with dropout */
    {"attention_grouped", "[7, 24]", "{type: attention, heads: 4, kv_heads: 2}", 3, NULL},
    {"attention_multi_query", "[6, 20]", "{type: attention, heads: 3, kv_heads: 1, dropout: 0.2}", 2, NULL},
    /* windows longer than dnnl-gemm's blocks of 128 query rows (three, the last of 44): causal, with
     * dropout and grouped; and without the mask (every block sees every key) */
    {"attention_row_blocks", "[300, 24]", "{type: attention, heads: 4, kv_heads: 2, dropout: 0.1}", 2, NULL},
    {"attention_row_blocks_full", "[260, 12]", "{type: attention, heads: 2, causal: false}", 2, NULL},
    /* mixtures of experts: Mixtral's gates with both losses; OLMoE's with a capacity that drops
     * choices; every position to both of 2 experts (each expert takes all rows); 5 positions over 8
     * experts (three or more take none); a sequence longer than a block */
    {"moe", "[9, 7]", "{type: moe, experts: 4, top_k: 2, units: 5, aux_loss: 0.1, z_loss: 0.01}", 3, NULL},
    {"moe_capacity", "[12, 6]", "{type: moe, experts: 3, top_k: 2, units: 4, capacity_factor: 0.5, normalize: false}",
     2, NULL},
    {"moe_every_expert", "[6, 5]", "{type: moe, experts: 2, top_k: 2, units: 3, aux_loss: 0.5}", 2, NULL},
    {"moe_sparse", "[5, 9]", "{type: moe, experts: 8, top_k: 1, units: 6, z_loss: 0.1}", 1, NULL},
    {"moe_long", "[130, 16]", "{type: moe, experts: 4, top_k: 2, units: 24, aux_loss: 0.01}", 2, NULL},
    /* recurrent layers over [T, C]: one step, stacks, both directions, no biases, dropout between layers, odd sizes */
    {"lstm", "[9, 7]", "{type: lstm, hidden: 5}", 3, NULL},
    {"lstm_stack_bidirectional", "[6, 4]", "{type: lstm, hidden: 3, layers: 2, bidirectional: true}", 3, NULL},
    {"lstm_one_step", "[1, 5]", "{type: lstm, hidden: 6, bias: false}", 2, NULL},
    {"gru", "[8, 5]", "{type: gru, hidden: 7}", 3, NULL},
    {"gru_stack_bidirectional", "[5, 6]", "{type: gru, hidden: 4, layers: 2, bidirectional: true}", 2, NULL},
    {"rnn_relu", "[7, 3]", "{type: rnn, hidden: 5, nonlinearity: relu, layers: 2}", 3, NULL},
    {"lstm_dropout", "[8, 5]", "{type: lstm, hidden: 4, layers: 2, dropout: 0.4}", 3, NULL},
    {"gru_dropout_bidirectional", "[6, 3]", "{type: gru, hidden: 3, layers: 2, bidirectional: true, dropout: 0.3}", 2,
     NULL},
    {"rnn_tanh_bidirectional", "[4, 9]", "{type: rnn, hidden: 2, bidirectional: true, bias: false}", 2, NULL},
#ifdef TEST_ON_CUDA
    /* The GPU's transformer kernels on shapes the cases above leave out:
     * token ids (the input's dtype after its shape), a table added at every
     * position, sequences through add and dropout, fc at one position, a
     * layer norm of a vector and of more features than a block's threads,
     * and attention rows longer than a block's threads (causal, full, with
     * dropout, on three inputs). */
    {"embedding", "[11], dtype: i32", "{type: embedding, vocab: 37, dim: 13}", 3, NULL},
    {"embedding_one_position", "[1], dtype: i32", "{type: embedding, vocab: 5, dim: 300}", 4, NULL},
    {"position_embedding", "[7, 12]", "{type: position_embedding, context: 9}", 3, NULL},
    {"position_embedding_full", "[9, 5]", "{type: position_embedding, context: 9}", 2, NULL},
    {"add_sequence", "[13, 6]", "{type: add, inputs: [input, s]}", 2, "{type: gelu}"},
    {"dropout_sequence", "[10, 7]", "{type: dropout, rate: 0.4}", 4, NULL},
    {"fc_sequence_one_position", "[1, 9]", "{type: fc, units: 4}", 4, NULL},
    {"fc_sequence_long", "[300, 5]", "{type: fc, units: 3}", 2, NULL},
    {"layernorm_vector", "[23, 1, 1]", "{type: layernorm}", 3, NULL},
    {"layernorm_wide", "[5, 300]", "{type: layernorm, eps: 0.001}", 2, NULL},
    {"attention_long", "[300, 6]", "{type: attention, heads: 2}", 2, NULL},
    {"attention_long_full", "[270, 8]", "{type: attention, heads: 4, causal: false, inputs: [input, s, input]}", 2,
     "{type: relu}"},
    {"attention_long_dropout", "[260, 6]", "{type: attention, heads: 1, dropout: 0.1}", 2, NULL},
#endif
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* Losses: layer is the network's loss, on class scores of the input's shape. */
static const struct kcase losses[] = {
    {"softmax_xent", "[7, 1, 1]", "{type: softmax_cross_entropy}", 5, NULL},
    {"softmax_xent_smooth", "[12, 1, 1]", "{type: softmax_cross_entropy, label_smoothing: 0.1}", 4, NULL},
    /* at every position of a sequence [T, C] (every 7th label ignored): runs
     * of 8 positions and a tail, two runs of 64 and a tail, smoothing */
    {"softmax_xent_sequence", "[13, 37]", "{type: softmax_cross_entropy}", 3, NULL},
    {"softmax_xent_sequence_runs", "[131, 50]", "{type: softmax_cross_entropy}", 2, NULL},
    {"softmax_xent_sequence_smooth", "[8, 1001]", "{type: softmax_cross_entropy, label_smoothing: 0.2}", 3, NULL},
};
#define N_LOSSES (sizeof losses / sizeof losses[0])

static int is_loss(const struct kcase *kc)
{
    return kc >= losses && kc < losses + N_LOSSES;
}

/* Layers whose input a blocked producer offers (a oneDNN convolution's or
 * pooling's nChw8c / nChw16c output): kernels that take it as it is get it
 * in that layout, the others plain (the executor's reorder). */
struct bcase {
    struct kcase k;
    enum dl_layout offer;
};

static const struct bcase blocked[] = {
    {{"fc_lenet1_block8", "[16, 5, 5]", "{type: fc, units: 120}", 4, NULL}, DL_LAYOUT_BLOCK8},
    {{"fc_padded_block8", "[20, 5, 7]", "{type: fc, units: 13}", 6, NULL}, DL_LAYOUT_BLOCK8},
    {{"fc_odd_block8", "[3, 3, 5]", "{type: fc, units: 7, bias: false}", 2, NULL}, DL_LAYOUT_BLOCK8},
    {{"fc_padded_block16", "[21, 3, 5]", "{type: fc, units: 11}", 4, NULL}, DL_LAYOUT_BLOCK16},
    {{"fc_vector_block8", "[24, 1, 1]", "{type: fc, units: 5}", 4, NULL}, DL_LAYOUT_BLOCK8},
    {{"maxpool_lenet2_block8", "[16, 10, 10]", "{type: maxpool, kernel: 2}", 4, NULL}, DL_LAYOUT_BLOCK8},
    {{"maxpool_padded_block8", "[11, 9, 21]", "{type: maxpool, kernel: 2, stride: 2, pad: 1}", 2, NULL},
     DL_LAYOUT_BLOCK8},
    {{"maxpool_3x3_block16", "[20, 11, 11]", "{type: maxpool, kernel: 3, stride: 2, pad: 1}", 2, NULL},
     DL_LAYOUT_BLOCK16},
    {{"maxpool_ceil_block8", "[3, 7, 8]", "{type: maxpool, kernel: [3, 2], stride: 2, ceil_mode: true}", 3, NULL},
     DL_LAYOUT_BLOCK8},
    {{"maxpool_3x2_s1_block16", "[5, 7, 13]", "{type: maxpool, kernel: [3, 2], stride: 1, pad: [1, 0]}", 2, NULL},
     DL_LAYOUT_BLOCK16},
    /* padding channels, an odd number of positions (a last run of 8), two
     * chunks of samples (86 and 14) */
    {{"batchnorm_padded_block8", "[19, 5, 7]", "{type: batchnorm}", 3, NULL}, DL_LAYOUT_BLOCK8},
    {{"batchnorm_padded_block16", "[20, 3, 3]", "{type: batchnorm}", 4, NULL}, DL_LAYOUT_BLOCK16},
    {{"batchnorm_chunks_block8", "[16, 2, 3]", "{type: batchnorm}", 100, NULL}, DL_LAYOUT_BLOCK8},
};

/* The layer of a two-layer net (the tested one, then an fc to the loss;
 * with the case's second layer "s" first), or for a loss case the loss of a
 * net that flattens its input into class scores. */
static int load(const struct kcase *kc, struct dl_net *net)
{
    char text[1024];
    int classes = 0, dims[3], rank = sscanf(kc->input, "[%d, %d, %d]", &dims[0], &dims[1], &dims[2]);
    if (is_loss(kc) && rank == 2 && (classes = dims[1])) /* a sequence [T, C] */
        snprintf(text, sizeof text, "input: {shape: %s, classes: %d}\nlayers:\n  - {type: gelu, name: f}\n"
                 "loss: %s\n", kc->input, classes, kc->layer);
    else if (is_loss(kc) && sscanf(kc->input, "[%d", &classes) == 1)
        snprintf(text, sizeof text, "input: {shape: %s, classes: %d}\nlayers:\n  - {type: flatten, name: f}\n"
                 "loss: %s\n", kc->input, classes, kc->layer);
    else
        snprintf(text, sizeof text,
                 "input: {shape: %s, classes: 3}\nlayers:\n%s%.*s%s  - %.*s, name: t}\n  - {type: fc, units: 3}\n"
                 "loss: softmax_cross_entropy\n",
                 kc->input, kc->second ? "  - " : "", kc->second ? (int)strlen(kc->second) - 1 : 0,
                 kc->second ? kc->second : "", kc->second ? ", name: s}\n" : "", (int)strlen(kc->layer) - 1, kc->layer);
    struct dl_error err = {0};
    int rc = dl_net_load_string("case.yaml", text, net, &err);
    if (rc)
        print_message("# %s: %s\n", kc->name, err.msg);
    return rc;
}

/* The layer a case tests: the first, or the loss. */
static const struct dl_layer *under_test(const struct kcase *kc, const struct dl_net *net)
{
    return &net->graph.layers[is_loss(kc) ? net->graph.n - 1 : kc->second != NULL];
}

/* The larger error, NaN (a value left unwritten) counting as the largest. */
static double worse(double e, double d)
{
    return d > e || d != d ? d : e;
}

/* Compares everything k computed with the reference; returns the worst error. */
static double compare(const struct dl_layer *l, const struct kc_tensors *a, const struct kc_tensors *r)
{
    int N = a->batch;
    double e = kc_rel_err(a->y, r->y, N * dl_shape_count(l->out_shape));
    if (!(e <= TOL))
        print_message("#   output: relative error %.2e\n", e);
    for (int i = 0; i < l->n_in; i++) {
        if (l->in_shape[i].dtype == DL_I32) /* token ids take no gradient */
            continue;
        double d = kc_rel_err(a->dx[i], r->dx[i], N * dl_shape_count(l->in_shape[i]));
        if (!(d <= TOL))
            print_message("#   input gradient %d: relative error %.2e\n", i, d);
        e = worse(e, d);
    }
    for (int j = 0; j < l->n_params; j++) {
        double d = kc_rel_err(a->dparam[j] ? a->dparam[j] : a->param[j], r->dparam[j] ? r->dparam[j] : r->param[j],
                              l->param[j].count);
        e = worse(e, d);
        if (!(d <= TOL))
            print_message("#   parameter %s: relative error %.2e\n", l->param[j].name, d);
    }
    return e;
}

/* Comparisons per kernel (index in dl_kernels), with the reference and,
 * for kernels that can fuse a ReLU, fused against unfused; checked at the
 * end (every_kernel_compared), so that a registry or supports() change that
 * hides a kernel from every case fails instead of passing untested. */
#define MAX_KERNELS 128 /* of dl_kernels[]: the CUDA build registers 70 */
static int compared[MAX_KERNELS], compared_fused[MAX_KERNELS];

static int kernel_index(const struct dl_kernel *k)
{
    for (int i = 0; dl_kernels[i] && i < MAX_KERNELS; i++)
        if (dl_kernels[i] == k)
            return i;
    fail_msg("kernel %s is not in the registry", k->name);
    return 0;
}

/* Number of elements where a and b differ (bit for bit: a fused ReLU
 * computes exactly what the kernel and a ReLU after it do). */
static long differing(const float *a, const float *b, long n)
{
    long d = 0;
    for (long i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

static void round_to_bf16(struct kc_tensors *t, const struct dl_layer *l, int params);
static void run_bf16(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb, int relu);

/* One run of k for fused_vs_unfused: an f32 kernel on inputs offered in
 * offer, a bf16 one on t's values rounded to bf16 (the layouts it asks). */
static void run_for_fusion(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                           enum dl_layout offer, int relu)
{
    if (k->dtype == DL_BF16)
        run_bf16(k, l, t, mb, relu);
    else
        assert_int_equal(kc_run_fused(k, l, t, mb, offer, relu), 0);
}

/* k with cfg.relu against k followed by a ReLU (kernel.h): the output is
 * max(y, 0), and from that output's gradient dy the input and weight
 * gradients are those of the unfused kernel given dy masked by y > 0, bit
 * for bit (in f32 and in bf16). */
static void fused_vs_unfused(const struct dl_kernel *k, const struct dl_layer *l, const char *name, int batch,
                             int mb, enum dl_layout offer)
{
    struct kc_tensors plain, masked, fused;
    kc_alloc(&plain, l, batch, 11);
    kc_alloc(&masked, l, batch, 11);
    kc_alloc(&fused, l, batch, 11);
    if (k->dtype == DL_BF16) {
        round_to_bf16(&plain, l, 0);
        round_to_bf16(&masked, l, 0);
        round_to_bf16(&fused, l, 0);
    }
    run_for_fusion(k, l, &plain, mb, offer, 0);
    long ny = batch * dl_shape_count(l->out_shape), positive = 0;
    for (long i = 0; i < ny; i++) {
        positive += plain.y[i] > 0;
        if (!(plain.y[i] > 0)) {
            plain.y[i] = 0.0f; /* the ReLU's output */
            masked.dy[i] = 0.0f;
        }
    }
    run_for_fusion(k, l, &masked, mb, offer, 0);
    run_for_fusion(k, l, &fused, mb, offer, 1);
    long d = differing(fused.y, plain.y, ny);
    for (int i = 0; i < l->n_in; i++)
        d += differing(fused.dx[i], masked.dx[i], batch * dl_shape_count(l->in_shape[i]));
    for (int j = 0; j < l->n_params; j++)
        if (fused.dparam[j])
            d += differing(fused.dparam[j], masked.dparam[j], l->param[j].count);
    print_message("# %-24s %-14s mb %d fused ReLU: %ld of %ld outputs positive, %ld values differ from the "
                  "unfused kernel and a ReLU\n", name, k->name, mb, positive, ny, d);
    assert_int_equal(d, 0);
    kc_free(&plain, l);
    kc_free(&masked, l);
    kc_free(&fused, l);
    if (positive > 0 && positive < ny) /* the mask mattered */
        compared_fused[kernel_index(k)]++;
}

static void run_kcase(const struct kcase *kc, enum dl_layout offer)
{
    struct dl_net net;
    assert_int_equal(load(kc, &net), 0);
    const struct dl_layer *l = under_test(kc, &net);
    struct kc_tensors ref;
    kc_alloc(&ref, l, kc->batch, 11);
    assert_int_equal(kc_run(&dl_kernel_reference, l, &ref, kc->batch), 0);
    int tested = 0;
    for (int i = 0; dl_kernels[i]; i++) {
        const struct dl_kernel *k = dl_kernels[i];
        if (k == &dl_kernel_reference || !on_test_device(k) || k->op != l->kind || (k->supports && !k->supports(l)) ||
            k->dtype != DL_F32)
            continue;
        int mbs[2] = {kc->batch, k->whole_batch || kc->batch % 2 ? 0 : kc->batch / 2};
        for (int m = 0; m < 2 && mbs[m]; m++) {
            struct kc_tensors t;
            kc_alloc(&t, l, kc->batch, 11);
            assert_int_equal(kc_run_offered(k, l, &t, mbs[m], offer), 0);
            double e = compare(l, &t, &ref);
            enum dl_layout in[DL_MAX_INPUTS], out, offered[DL_MAX_INPUTS] = {offer};
            dl_kernel_layouts(k, l, offered, in, &out);
            print_message("# %-24s %-12s mb %d in %-7s: relative error %.2e\n", kc->name, k->name, mbs[m],
                          dl_layout_names[in[0]], e);
            assert_true(e <= TOL);
            kc_free(&t, l);
            tested++;
            compared[kernel_index(k)]++;
            if (k->fuses_relu)
                fused_vs_unfused(k, l, kc->name, kc->batch, mbs[m], offer);
        }
    }
    print_message("# %s: %d kernel runs compared\n", kc->name, tested);
    kc_free(&ref, l);
    dl_net_free(&net);
}

static void run_case(void **state)
{
    run_kcase(*state, DL_LAYOUT_PLAIN);
}

static void run_blocked(void **state)
{
    const struct bcase *bc = *state;
    run_kcase(&bc->k, bc->offer);
}

#ifndef TEST_ON_CUDA
/* The reference kernel called straight on t's host tensors (no layouts, no
 * device, no copies): what kc_run must reproduce. */
static void reference_direct(const struct dl_layer *l, struct kc_tensors *t)
{
    struct dl_error err = {0};
    struct dl_kernel_config cfg = {.mb = t->batch};
    void *inst = NULL;
    assert_int_equal(dl_kernel_reference.create(l, &cfg, &inst, &err), 0);
    size_t saved = dl_kernel_saved_bytes(&dl_kernel_reference, inst);
    size_t ws = dl_kernel_workspace_max(&dl_kernel_reference, inst);
    struct dl_kernel_args a;
    memset(&a, 0, sizeof a);
    struct dl_op_call *c = &a.c;
    c->attr = l->attr, c->batch = t->batch, c->n_in = l->n_in, c->training = 1;
    for (int i = 0; i < l->n_in; i++)
        c->in[i] = dl_tensor_of(t->x[i], l->in_shape[i]), c->din[i] = dl_tensor_of(t->dx[i], l->in_shape[i]);
    c->out = dl_tensor_of(t->y, l->out_shape), c->dout = dl_tensor_of(t->dy, l->out_shape);
    c->labels = t->labels, c->key = KC_KEY;
    c->param = t->param, c->dparam = t->dparam;
    c->saved = calloc(saved + 64, 1);
    a.workspace = calloc(ws + 64, 1);
    for (int d = 0; d < DL_N_DIRS; d++)
        dl_kernel_run(&dl_kernel_reference, inst, &a, (enum dl_dir)d, l->n_params > 0, 1);
    free(c->saved);
    free(a.workspace);
    dl_kernel_reference.destroy(inst);
}

static long bits_differ(const float *a, const float *b, long n)
{
    return a && b ? (long)(memcmp(a, b, sizeof *a * (size_t)n) != 0) : 0;
}

/* kc_run (the kernels' harness: layouts, copies to and from the kernel's
 * device) gives, for the reference kernel in every case, bit for bit what
 * the reference called directly on the host tensors gives: output, input
 * gradients, parameters (running statistics) and accumulated gradients.
 * Every kernel is compared with the reference through the same harness,
 * so a harness that lost a result would otherwise hide it on both sides. */
static void harness_equals_direct_reference(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_CASES + N_LOSSES; k++) {
        const struct kcase *kc = k < N_CASES ? &cases[k] : &losses[k - N_CASES];
        struct dl_net net;
        assert_int_equal(load(kc, &net), 0);
        const struct dl_layer *l = under_test(kc, &net);
        struct kc_tensors h, d;
        kc_alloc(&h, l, kc->batch, 11);
        kc_alloc(&d, l, kc->batch, 11);
        assert_int_equal(kc_run(&dl_kernel_reference, l, &h, kc->batch), 0);
        reference_direct(l, &d);
        long differ = bits_differ(h.y, d.y, h.batch * dl_shape_count(l->out_shape));
        for (int i = 0; i < l->n_in; i++)
            differ += bits_differ(h.dx[i], d.dx[i], h.batch * dl_shape_count(l->in_shape[i]));
        for (int j = 0; j < l->n_params; j++)
            differ += bits_differ(h.param[j], d.param[j], l->param[j].count) +
                      bits_differ(h.dparam[j], d.dparam[j], l->param[j].count);
        if (differ)
            fail_msg("%s: %ld of the harness's results differ from the reference called directly", kc->name, differ);
        kc_free(&h, l);
        kc_free(&d, l);
        dl_net_free(&net);
    }
}
#endif

/* The simd max pooling forward in layout lo (NCHW, or blocked with x, y and
 * the winners reordered around it). */
static void simd_maxpool_in(enum dl_layout lo, const struct dl_layer *l, struct dl_op_call c, const float *x,
                            float *y, float *arg)
{
    struct dl_pool_geom g;
    dl_maxpool_geom(l, &g);
    if (lo == DL_LAYOUT_PLAIN) {
        c.in[0].data = (float *)x, c.out.data = y, c.saved = arg;
        dl_simd_maxpool_forward(&c, &g);
        return;
    }
    long nin = c.batch * dl_layout_count(lo, c.in[0].shape), nout = c.batch * dl_layout_count(lo, c.out.shape);
    float *bx = malloc(sizeof(float) * (size_t)nin), *by = malloc(sizeof(float) * (size_t)nout),
          *barg = malloc(sizeof(float) * (size_t)nout);
    dl_layout_reorder(x, DL_LAYOUT_PLAIN, bx, lo, c.batch, c.in[0].shape, 0);
    c.in[0].data = bx, c.out.data = by, c.saved = barg;
    dl_simd_maxpool_blocked_forward(&c, &g, dl_layout_block(lo));
    dl_layout_reorder(by, lo, y, DL_LAYOUT_PLAIN, c.batch, c.out.shape, 0);
    dl_layout_reorder(barg, lo, arg, DL_LAYOUT_PLAIN, c.batch, c.out.shape, 0);
    free(bx), free(by), free(barg);
}

/* The vectorized max pooling, NCHW and blocked, against the reference op on
 * inputs full of ties, signed zeros and NaNs (random inputs have none): the
 * same outputs and the same saved winners, bit for bit, which decide where
 * backward sends each gradient. */
static void maxpool_ties_and_nans(void **state)
{
    static const struct kcase pools[] = {
        {"lenet", "[3, 24, 24]", "{type: maxpool, kernel: 2}", 3, NULL},
        {"pad", "[2, 9, 21]", "{type: maxpool, kernel: 2, stride: 2, pad: 1}", 2, NULL},
        {"3x3", "[2, 11, 11]", "{type: maxpool, kernel: 3, stride: 2, pad: 1}", 2, NULL},
        {"ceil", "[3, 7, 8]", "{type: maxpool, kernel: [3, 2], stride: 2, ceil_mode: true}", 2, NULL},
        {"lenet2", "[16, 10, 10]", "{type: maxpool, kernel: 2}", 3, NULL},
        {"3x3_odd", "[11, 9, 9]", "{type: maxpool, kernel: 3, stride: 1, pad: 1}", 2, NULL},
    };
    const float values[] = {-1.0f, -0.0f, 0.0f, 1.0f, NAN};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        struct dl_net net;
        assert_int_equal(load(&pools[i], &net), 0);
        const struct dl_layer *l = &net.graph.layers[0];
        long nin = pools[i].batch * dl_shape_count(l->in_shape[0]), nout = pools[i].batch * dl_shape_count(l->out_shape);
        float *x = malloc(sizeof *x * (size_t)nin), *y[2], *arg[2];
        for (int v = 0; v < 2; v++) {
            y[v] = malloc(sizeof(float) * (size_t)nout);
            arg[v] = malloc(sizeof(float) * (size_t)nout);
        }
        uint64_t r = 7 + i;
        for (long j = 0; j < nin; j++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            int pick = (int)(r >> 33) % 32; /* NaN rarely, so most windows have none */
            x[j] = values[pick < 30 ? pick % 4 : 4];
        }
        struct dl_op_call c = {.attr = l->attr, .batch = pools[i].batch, .n_in = 1, .training = 1};
        c.in[0] = dl_tensor_of(x, l->in_shape[0]), c.out = dl_tensor_of(y[0], l->out_shape), c.saved = arg[0];
        l->kind->forward(&c);
        for (int lo = 0; lo < DL_N_LAYOUTS; lo++) {
            simd_maxpool_in((enum dl_layout)lo, l, c, x, y[1], arg[1]);
            assert_memory_equal(y[0], y[1], sizeof(float) * (size_t)nout);
            assert_memory_equal(arg[0], arg[1], sizeof(float) * (size_t)nout);
        }
        print_message("# maxpool ties and NaNs, %s: %ld outputs equal in every layout\n", pools[i].name, nout);
        for (int v = 0; v < 2; v++)
            free(y[v]), free(arg[v]);
        free(x);
        dl_net_free(&net);
    }
}

static float bf16_rounded(float x)
{
    return dl_bf16_to_f32(dl_f32_to_bf16(x));
}

/* t's inputs, output gradient and (params: 1) weights (the first
 * parameter; the bias stays f32) rounded to bf16 in place. */
static void round_to_bf16(struct kc_tensors *t, const struct dl_layer *l, int params)
{
    for (int i = 0; i < l->n_in; i++)
        for (long v = 0; v < t->batch * dl_shape_count(l->in_shape[i]); v++)
            t->x[i][v] = bf16_rounded(t->x[i][v]);
    for (long v = 0; v < t->batch * dl_shape_count(l->out_shape); v++)
        t->dy[v] = bf16_rounded(t->dy[v]);
    for (int j = 0; params && j < 1 && j < l->n_params; j++)
        for (long v = 0; v < l->param[j].count; v++)
            t->param[j][v] = bf16_rounded(t->param[j][v]);
}

/* Where run_bf16's kernel reads and writes: the host buffers themselves,
 * or for a GPU kernel copies of them on the device (kernel_check.h). */
struct bf16_bufs {
#ifdef TEST_ON_CUDA
    struct kc_device_bufs *dev;
#endif
    int unused;
};

/* The kernel's copy of `bytes` of host (zeros when host is NULL). */
static void *for_kernel(struct bf16_bufs *b, void *host, size_t bytes)
{
#ifdef TEST_ON_CUDA
    void *d = kc_device_copy(b->dev, host, bytes);
    assert_non_null(d);
    return d;
#else
    (void)b, (void)bytes;
    return host;
#endif
}

/* The kernel's copy back into host (nothing to do on the host). */
static void from_kernel(struct bf16_bufs *b, void *host, const void *copy, size_t bytes)
{
#ifdef TEST_ON_CUDA
    kc_device_read(b->dev, host, copy, bytes);
#else
    (void)b, (void)host, (void)copy, (void)bytes;
#endif
}

/* bf16 kernel k forward then backward on l in slices of mb samples, its
 * tensors bf16 copies of t's in the layouts it negotiates from plain ones
 * (results widened back into t, plain), on k's device. */
static void run_bf16(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb, int relu)
{
    struct dl_error err = {0};
    struct dl_kernel_config cfg = {.mb = mb, .relu = relu};
    enum dl_layout offered[DL_MAX_INPUTS] = {DL_LAYOUT_PLAIN};
    dl_kernel_layouts(k, l, offered, cfg.in, &cfg.out);
    void *inst = NULL;
    assert_int_equal(dl_kernel_create(k, l, &cfg, &inst, &err), DL_OK);
    struct dl_shape so = l->out_shape, si[DL_MAX_INPUTS];
    long ny = dl_layout_count(cfg.out, so), nyp = dl_shape_count(so), nx[DL_MAX_INPUTS], nxp[DL_MAX_INPUTS];
    long most = nyp; /* the largest plain tensor: staging */
    for (int i = 0; i < l->n_in; i++)
        most = dl_shape_count(l->in_shape[i]) > most ? dl_shape_count(l->in_shape[i]) : most;
    dl_bf16 *plain = calloc((size_t)(t->batch * most), 2);
    dl_bf16 *x[DL_MAX_INPUTS], *dx[DL_MAX_INPUTS], *y = calloc((size_t)(t->batch * ny), 2),
                                                     *dy = calloc((size_t)(t->batch * ny), 2);
    dl_cast(t->dy, DL_F32, plain, DL_BF16, t->batch * nyp, &err);
    dl_layout_reorder_dtype(plain, DL_LAYOUT_PLAIN, dy, cfg.out, t->batch, so, 0, DL_BF16);
    for (int i = 0; i < l->n_in; i++) {
        si[i] = l->in_shape[i];
        nx[i] = dl_layout_count(cfg.in[i], si[i]);
        nxp[i] = dl_shape_count(si[i]);
        x[i] = calloc((size_t)(t->batch * nx[i]), 2);
        dx[i] = calloc((size_t)(t->batch * nx[i]), 2);
        dl_bf16 *xp = calloc((size_t)(t->batch * nxp[i]), 2);
        dl_cast(t->x[i], DL_F32, xp, DL_BF16, t->batch * nxp[i], &err);
        dl_layout_reorder_dtype(xp, DL_LAYOUT_PLAIN, x[i], cfg.in[i], t->batch, si[i], 0, DL_BF16);
        free(xp);
    }
    size_t ws_bytes = dl_kernel_workspace_max(k, inst) + 64, saved_bytes = dl_kernel_saved_bytes(k, inst) + 64;
    void *ws = calloc(ws_bytes, 1);
    void *saved = calloc(saved_bytes, 1);
    /* the kernel's copies (the same buffers on the host) */
    struct bf16_bufs kb = {0};
#ifdef TEST_ON_CUDA
    kb.dev = kc_device_bufs_new(k);
    assert_non_null(kb.dev);
#endif
    size_t ybytes = 2 * (size_t)(t->batch * ny), xbytes[DL_MAX_INPUTS];
    dl_bf16 *ky = for_kernel(&kb, y, ybytes), *kdy = for_kernel(&kb, dy, ybytes), *kx[DL_MAX_INPUTS],
            *kdx[DL_MAX_INPUTS];
    for (int i = 0; i < l->n_in; i++) {
        xbytes[i] = 2 * (size_t)(t->batch * nx[i]);
        kx[i] = for_kernel(&kb, x[i], xbytes[i]);
        kdx[i] = for_kernel(&kb, dx[i], xbytes[i]);
    }
    void *kws = for_kernel(&kb, ws, ws_bytes), *ksaved = for_kernel(&kb, saved, saved_bytes);
    float *kparam[TEST_MAX_PARAMS] = {0}, *kdparam[TEST_MAX_PARAMS] = {0};
    for (int j = 0; j < l->n_params; j++) {
        size_t bytes = sizeof(float) * (size_t)l->param[j].count;
        kparam[j] = for_kernel(&kb, t->param[j], bytes);
        kdparam[j] = t->dparam[j] ? for_kernel(&kb, t->dparam[j], bytes) : NULL;
    }
    struct dl_kernel_fault fault = {0};
    for (int n0 = 0; n0 < t->batch && !fault.failed; n0 += mb) {
        struct dl_kernel_args a = {.workspace = kws, .fault = &fault};
        a.c.attr = l->attr;
        a.c.batch = mb;
        a.c.n_in = l->n_in;
        a.c.training = 1;
        a.c.key = KC_KEY; /* dropout's mask, as kc_run draws it */
        a.c.sample0 = n0;
        struct dl_shape bo = so;
        bo.dtype = DL_BF16;
        a.c.out = dl_tensor_of(ky + n0 * ny, bo);
        a.c.dout = dl_tensor_of(kdy + n0 * ny, bo);
        a.c.saved = ksaved;
        for (int i = 0; i < l->n_in; i++) {
            struct dl_shape bi = si[i];
            bi.dtype = DL_BF16;
            a.c.in[i] = dl_tensor_of(kx[i] + n0 * nx[i], bi);
            a.c.din[i] = dl_tensor_of(kdx[i] + n0 * nx[i], bi);
        }
        a.c.param = kparam;
        a.c.dparam = kdparam;
        k->forward(inst, &a);
        dl_kernel_run(k, inst, &a, DL_DIR_BACKWARD_DATA, l->n_params > 0, 1);
        dl_kernel_run(k, inst, &a, DL_DIR_BACKWARD_WEIGHTS, l->n_params > 0, 1);
    }
    if (fault.failed)
        fail_msg("%s: %s failed: %s", k->name, fault.call, fault.reason);
    from_kernel(&kb, y, ky, ybytes);
    for (int j = 0; j < l->n_params; j++) { /* running statistics; accumulated gradients */
        from_kernel(&kb, t->param[j], kparam[j], sizeof(float) * (size_t)l->param[j].count);
        if (t->dparam[j])
            from_kernel(&kb, t->dparam[j], kdparam[j], sizeof(float) * (size_t)l->param[j].count);
    }
    for (int i = 0; i < l->n_in; i++)
        from_kernel(&kb, dx[i], kdx[i], xbytes[i]);
#ifdef TEST_ON_CUDA
    assert_int_equal(kc_device_release(kb.dev), DL_OK);
#endif
    dl_layout_reorder_dtype(y, cfg.out, plain, DL_LAYOUT_PLAIN, t->batch, so, 0, DL_BF16);
    dl_cast(plain, DL_BF16, t->y, DL_F32, t->batch * nyp, &err);
    for (int i = 0; i < l->n_in; i++) {
        dl_layout_reorder_dtype(dx[i], cfg.in[i], plain, DL_LAYOUT_PLAIN, t->batch, si[i], 0, DL_BF16);
        dl_cast(plain, DL_BF16, t->dx[i], DL_F32, t->batch * nxp[i], &err);
        free(x[i]);
        free(dx[i]);
    }
    free(plain);
    free(y);
    free(dy);
    free(ws);
    free(saved);
    k->destroy(inst);
}

/* Values of a outside the bound a fast bf16 kernel is held to against r,
 * the reference on the same bf16 values: |a - r| <= round |r| + K 2^-24 s,
 * s the reference's result on absolute values (each sum's sum of |terms|):
 * summing K exact products in f32 in any order is within K 2^-24 s, and a
 * result rounded to bf16 (round = 2^-8, else 2^-24) moves by at most round
 * times its size more. */
static long outside_bound(const float *a, const float *r, const float *s, long n, double K, double round)
{
    long d = 0;
    for (long i = 0; i < n; i++) {
        double bound = round * (fabs(r[i]) + K * 0x1p-24 * s[i]) + K * 0x1p-24 * s[i] + 1e-30;
        if (!(fabs((double)a[i] - r[i]) <= bound) && d++ == 0)
            print_message("#   value %ld: %.9g, the reference %.9g, bound %.3g (sum of |terms| %.3g)\n", i,
                          (double)a[i], (double)r[i], bound, (double)s[i]);
    }
    return d;
}

/* Values of a that are not b rounded once to bf16. */
static long not_rounded_once(const float *a, const float *b, long n)
{
    long d = 0;
    for (long i = 0; i < n; i++) {
        float want = bf16_rounded(b[i]);
        d += memcmp(&a[i], &want, sizeof want) != 0;
    }
    return d;
}

#ifndef TEST_ON_CUDA
/* bf16 reorders between every pair of layouts (13 channels: a partial
 * block) move what the f32 reorders move, bit for bit, write padding as
 * zeros, and accumulate in f32 rounded once (the executor's casts keep a
 * tensor's layout, so bf16 tensors are reordered in bf16). */
static void bf16_reorders(void **state)
{
    struct dl_shape s = {13, 3, 5};
    int n = 2;
    long most = n * dl_layout_count(DL_LAYOUT_BLOCK16, s);
    float *xf = calloc((size_t)most, sizeof *xf), *yf = calloc((size_t)most, sizeof *yf);
    float *acc = calloc((size_t)most, sizeof *acc);
    dl_bf16 *xb = calloc((size_t)most, 2), *yb = calloc((size_t)most, 2), *zb = calloc((size_t)most, 2);
    for (int from = 0; from < DL_N_LAYOUTS; from++)
        for (int to = 0; to < DL_N_LAYOUTS; to++) {
            if (from != DL_LAYOUT_PLAIN && to != DL_LAYOUT_PLAIN && from != to)
                continue; /* blocked to blocked goes through plain */
            long nin = n * dl_layout_count((enum dl_layout)from, s), nout = n * dl_layout_count((enum dl_layout)to, s);
            kc_fill(xf, nin, 7 + (uint64_t)from);
            kc_fill(acc, nout, 9 + (uint64_t)to);
            for (long i = 0; i < nin; i++)
                xf[i] = bf16_rounded(xf[i]);
            dl_cast(xf, DL_F32, xb, DL_BF16, nin, NULL);
            memset(yf, 0x7f, sizeof *yf * (size_t)nout); /* garbage where padding goes */
            memset(yb, 0x7f, 2 * (size_t)nout);
            dl_layout_reorder(xf, (enum dl_layout)from, yf, (enum dl_layout)to, n, s, 0);
            dl_layout_reorder_dtype(xb, (enum dl_layout)from, yb, (enum dl_layout)to, n, s, 0, DL_BF16);
            long moved = 0, summed = 0;
            for (long i = 0; i < nout; i++)
                moved += dl_bf16_to_f32(yb[i]) != yf[i];
            dl_cast(acc, DL_F32, zb, DL_BF16, nout, NULL);
            for (long i = 0; i < nout; i++)
                yf[i] = dl_bf16_to_f32(zb[i]); /* the destination, widened */
            dl_layout_reorder(xf, (enum dl_layout)from, yf, (enum dl_layout)to, n, s, 1);
            dl_layout_reorder_dtype(xb, (enum dl_layout)from, zb, (enum dl_layout)to, n, s, 1, DL_BF16);
            for (long i = 0; i < nout; i++)
                summed += dl_bf16_to_f32(zb[i]) != bf16_rounded(yf[i]);
            print_message("# bf16 reorder %s -> %s: %ld values moved otherwise than in f32, %ld sums not rounded "
                          "once\n", dl_layout_names[from], dl_layout_names[to], moved, summed);
            assert_int_equal(moved + summed, 0);
        }
    free(xf), free(yf), free(acc), free(xb), free(yb), free(zb);
}
#endif

static void bf16_kernels(void **state)
{
    int runs = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        struct dl_net net;
        assert_int_equal(load(&cases[c], &net), 0);
        const struct dl_layer *l = under_test(&cases[c], &net);
        int batch = cases[c].batch;
        for (int i = 0; dl_kernels[i]; i++) {
            const struct dl_kernel *k = dl_kernels[i];
            if (k->dtype != DL_BF16 || !on_test_device(k) || (k->op && k->op != l->kind) ||
                (k->supports && !k->supports(l)))
                continue;
            struct kc_tensors ref, mag;
            kc_alloc(&ref, l, batch, 11);
            round_to_bf16(&ref, l, 1);
            assert_int_equal(kc_run(&dl_kernel_reference, l, &ref, batch), 0);
            /* the sums of |terms|: the reference on absolute values, weight gradients from 0 */
            kc_alloc(&mag, l, batch, 11);
            round_to_bf16(&mag, l, 1);
            for (int j = 0; j < l->n_in; j++)
                for (long v = 0; v < batch * dl_shape_count(l->in_shape[j]); v++)
                    mag.x[j][v] = fabsf(mag.x[j][v]);
            for (long v = 0; v < batch * dl_shape_count(l->out_shape); v++)
                mag.dy[v] = fabsf(mag.dy[v]);
            for (int j = 0; j < l->n_params; j++) {
                for (long v = 0; v < l->param[j].count; v++)
                    mag.param[j][v] = fabsf(mag.param[j][v]);
                if (mag.dparam[j])
                    memset(mag.dparam[j], 0, sizeof *mag.dparam[j] * (size_t)l->param[j].count);
            }
            assert_int_equal(kc_run(&dl_kernel_reference, l, &mag, batch), 0);
            /* the longest sum: a weight gradient's over the batch and positions, or an output's inputs */
            double K = (double)batch * dl_shape_count(l->out_shape) + dl_shape_count(l->in_shape[0]) + 1;
            int exact = k == &dl_kernel_reference_bf16;
            int mbs[2] = {batch, batch % 2 || k->whole_batch ? 0 : batch / 2};
            for (int m = 0; m < 2 && mbs[m]; m++) {
                struct kc_tensors t;
                kc_alloc(&t, l, batch, 11);
                round_to_bf16(&t, l, 0); /* the kernel gets the f32 master weights */
                run_bf16(k, l, &t, mbs[m], 0);
                long ny = batch * dl_shape_count(l->out_shape), d = 0;
                double e = 0;
                if (exact) { /* the reference's results rounded once */
                    d = not_rounded_once(t.y, ref.y, ny);
                    for (int j = 0; j < l->n_in; j++)
                        d += not_rounded_once(t.dx[j], ref.dx[j], batch * dl_shape_count(l->in_shape[j]));
                    for (int j = 0; j < l->n_params; j++)
                        if (t.dparam[j])
                            e = worse(e, kc_rel_err(t.dparam[j], ref.dparam[j], l->param[j].count));
                } else if (!l->kind->autocast_bf16) {
                    /* not a sum of products (batch norm, activations, pooling, add; attention: on the
                     * GPU its f32 internals make it the f32 result rounded once, on the CPU its weights
                     * and their gradient are rounded to bf16 before the second products, as autocast's
                     * bmm takes them): as a whole, within two bf16 roundings (an intermediate's and the
                     * output's; oneDNN's batch norm backward and the CPU's attention take both) and a sum over a channel's M = N H W values in f32,
                     * 2^-7 + M 2^-24, of the largest value (batch norm's statistics move every output) */
                    double M = (double)batch * l->in_shape[0].h * l->in_shape[0].w, tol = 0x1p-7 + M * 0x1p-24;
                    e = kc_rel_err(t.y, ref.y, ny);
                    for (int j = 0; j < l->n_in; j++)
                        e = worse(e, kc_rel_err(t.dx[j], ref.dx[j], batch * dl_shape_count(l->in_shape[j])));
                    for (int j = 0; j < l->n_params; j++)
                        if (t.dparam[j])
                            e = worse(e, kc_rel_err(t.dparam[j], ref.dparam[j], l->param[j].count));
                    d = !(e <= tol);
                } else { /* within the accumulation bound; weight gradients on top of their pre-set values */
                    /* a result one of whose terms or partial sums was rounded to bf16 on its way is
                     * within 2^-9 s more, 2^15 terms' worth of 2^-24 s: on the GPU the convolution's
                     * output (its bias rounded) and weight gradient (cuDNN's, in the filter's dtype) */
                    double y_terms = 0, dw_terms = 0;
#ifdef TEST_ON_CUDA
                    if (l->kind == &dl_op_conv)
                        y_terms = l->n_params > 1 ? 0x1p15 : 0, dw_terms = 0x1p15;
#endif
                    d = outside_bound(t.y, ref.y, mag.y, ny, K + y_terms, 0x1p-8);
                    for (int j = 0; j < l->n_in; j++)
                        d += outside_bound(t.dx[j], ref.dx[j], mag.dx[j], batch * dl_shape_count(l->in_shape[j]), K,
                                           0x1p-8);
                    for (int j = 0; j < l->n_params; j++)
                        if (t.dparam[j])
                            d += outside_bound(t.dparam[j], ref.dparam[j], mag.dparam[j], l->param[j].count,
                                               K + 1 + (j == 0 ? dw_terms : 0), 0x1p-24);
                }
                print_message("# %-24s %-14s mb %d: %ld values %s, relative error %.2e\n", cases[c].name, k->name,
                              mbs[m], d,
                              exact                     ? "not the reference's rounded once to bf16"
                              : l->kind->autocast_bf16 ? "outside round |r| + K 2^-24 sum|terms| of the reference r"
                                                        : "over 2^-7 + N H W 2^-24 relative (0 or 1)",
                              e);
                assert_int_equal(d, 0);
                assert_true(!exact || (mbs[m] == batch ? e == 0 : e <= TOL)); /* halves sum in another order */
                kc_free(&t, l);
                compared[kernel_index(k)]++;
                runs++;
                if (k->fuses_relu)
                    fused_vs_unfused(k, l, cases[c].name, batch, mbs[m], DL_LAYOUT_PLAIN);
            }
            kc_free(&ref, l);
            kc_free(&mag, l);
        }
        dl_net_free(&net);
    }
    print_message("# bf16 kernels: %d runs compared\n", runs);
}

/* 0 for a kernel that has no implementation on this CPU: oneDNN's Winograd
 * convolution exists for AVX-512 only, and its bf16 one is required only
 * where the CPU has AVX512-BF16 (elsewhere their supports() decline every
 * layer, or may: oneDNN emulates bf16 on some AVX-512 CPUs). */
static int runs_on_this_cpu(const struct dl_kernel *k)
{
    __builtin_cpu_init();
    if (!strcmp(k->name, "onednn-bf16"))
        return __builtin_cpu_supports("avx512bf16");
    return strcmp(k->name, "onednn-wino") != 0 || __builtin_cpu_supports("avx512f");
}

/* Every kernel of this build that this CPU can run was compared with the
 * reference in some case above, and every kernel that fuses a ReLU was
 * compared fused where the ReLU's mask mattered. */
static void every_kernel_compared(void **state)
{
    int missing = 0;
    for (int i = 0; dl_kernels[i] && i < MAX_KERNELS; i++) {
        const struct dl_kernel *k = dl_kernels[i];
        if (k == &dl_kernel_reference || !on_test_device(k))
            continue;
        if (!runs_on_this_cpu(k)) {
            print_message("# %-12s (%s): not on this CPU, %d comparisons\n", k->name, k->op ? k->op->name : "any op",
                          compared[i]);
            continue;
        }
        print_message("# %-12s (%s): %d comparisons with the reference", k->name, k->op ? k->op->name : "any op",
                      compared[i]);
        print_message(k->fuses_relu ? ", %d fused against unfused\n" : "\n", compared_fused[i]);
        missing += compared[i] == 0 || (k->fuses_relu && compared_fused[i] == 0);
    }
    assert_int_equal(missing, 0);
}

#define N_BLOCKED (sizeof blocked / sizeof blocked[0])

/* Case c of the three tables, and the layout its input is offered in. */
static const struct kcase *any_case(size_t c, enum dl_layout *offer)
{
    *offer = c >= N_CASES && c < N_CASES + N_BLOCKED ? blocked[c - N_CASES].offer : DL_LAYOUT_PLAIN;
    return c < N_CASES ? &cases[c] : c < N_CASES + N_BLOCKED ? &blocked[c - N_CASES].k : &losses[c - N_CASES - N_BLOCKED];
}

/* Bytes of state k's instance for mb samples of l keeps (with a fused ReLU
 * when relu), the input offered in offer. */
static size_t saved_for(const struct dl_kernel *k, const struct dl_layer *l, int mb, enum dl_layout offer, int relu)
{
    struct dl_error err = {0};
    struct dl_kernel_config cfg = {.mb = mb, .relu = relu};
    enum dl_layout offered[DL_MAX_INPUTS] = {offer};
    dl_kernel_layouts(k, l, offered, cfg.in, &cfg.out);
    void *inst = NULL;
    int rc = dl_kernel_create(k, l, &cfg, &inst, &err);
    if (rc)
        print_message("# %s on '%s', %d samples: %s\n", k->name, l->name, mb, err.msg);
    assert_int_equal(rc, 0);
    size_t saved = dl_kernel_saved_bytes(k, inst);
    k->destroy(inst);
    return saved;
}

/* No kernel keeps more state from forward to backward for fewer samples
 * (kernel.h): the executor sizes a layer's saved memory for its whole batch
 * and runs a partial one (an epoch's last, evaluation's, a pipeline chunk)
 * in it.  Every kernel on every case it supports, 1 to the case's batch
 * samples, fused and unfused; conv_im2col_large crosses the samples whose
 * unfolded inputs im2col keeps (issue 40: it kept 7 samples' but none of 8,
 * and LeNet-5's conv2 at batch 512 failed at a last batch of 272). */
static void saved_state_grows_with_samples(void **state)
{
    long instances = 0;
    for (size_t c = 0; c < N_CASES + N_BLOCKED + N_LOSSES; c++) {
        enum dl_layout offer;
        const struct kcase *kc = any_case(c, &offer);
        struct dl_net net;
        assert_int_equal(load(kc, &net), 0);
        const struct dl_layer *l = under_test(kc, &net);
        for (int i = 0; dl_kernels[i]; i++) {
            const struct dl_kernel *k = dl_kernels[i];
            if (!on_test_device(k) || (k->op && k->op != l->kind) || (k->supports && !k->supports(l)))
                continue;
            for (int relu = 0; relu <= (k->fuses_relu != 0); relu++) {
                size_t before = saved_for(k, l, 1, offer, relu);
                for (int mb = 2; mb <= kc->batch; mb++, instances++) {
                    size_t now = saved_for(k, l, mb, offer, relu);
                    if (now < before)
                        print_message("# %s, kernel %s%s: %zu bytes of state for %d samples, %zu for %d\n", kc->name,
                                      k->name, relu ? " (fused ReLU)" : "", before, mb - 1, now, mb);
                    assert_true(now >= before);
                    before = now;
                }
            }
        }
        dl_net_free(&net);
    }
    print_message("# %ld instances compared with the one a sample smaller\n", instances);
}

/* Every kernel of the build but the reference (which hands the layer to its
 * op and reads no attribute by key) meets layers of the kind it serves in
 * the tables above: its supports() reads their attributes, and it runs on
 * those it supports (none for a kernel this CPU cannot run: oneDNN's
 * Winograd convolution needs AVX-512).  So every attribute a kernel reads
 * resolves against its kind's table here (backends/attr.h stops the
 * program otherwise): a key renamed in an op file fails this program. */
static void every_kernel_has_a_case(void **state)
{
    int served[MAX_KERNELS] = {0}, runs[MAX_KERNELS] = {0}, n_kernels = 0;
    while (dl_kernels[n_kernels])
        n_kernels++;
    assert_true(n_kernels <= MAX_KERNELS);
    for (size_t c = 0; c < N_CASES + N_BLOCKED + N_LOSSES; c++) {
        enum dl_layout offer;
        const struct kcase *kc = any_case(c, &offer);
        struct dl_net net;
        assert_int_equal(load(kc, &net), 0);
        const struct dl_layer *l = under_test(kc, &net);
        for (int i = 0; i < n_kernels; i++) {
            const struct dl_kernel *k = dl_kernels[i];
            int serves = !k->op || k->op == l->kind; /* op NULL: every kind (the bf16 reference) */
            served[i] += serves;
            runs[i] += serves && (!k->supports || k->supports(l));
        }
        dl_net_free(&net);
    }
    int missing = 0;
    for (int i = 0; i < n_kernels; i++) {
        const struct dl_kernel *k = dl_kernels[i];
        if (k == &dl_kernel_reference || !on_test_device(k))
            continue;
        print_message("# kernel %-12s for %-15s: %2d layers, runs on %d\n", k->name, k->op ? k->op->name : "any op",
                      served[i], runs[i]);
        missing += served[i] == 0 || (!k->op && runs[i] == 0);
    }
    assert_int_equal(missing, 0);
}

/* Document masking (op.h's doc_start): every f32 attention kernel with
 * doc_mask against the reference on odd shapes and document layouts (one
 * document, many short ones, a boundary at a 128-row block's edge,
 * documents of one position), a different layout per sample, in one
 * slice and in two; a kernel without doc_mask is one the registry never
 * gives a masked layer (dl_kernel_usable). */
static void doc_starts(int *start, long T, int layout, long n)
{
    for (long t = 0; t < T; t++) {
        int begins = 0;
        switch ((layout + n) % 5) {
        case 0: begins = t == 0; break;                          /* one document */
        case 1: begins = t % 3 == 0; break;                      /* many short ones */
        case 2: begins = t == 0 || t == 128 || t == 129; break;  /* at a row block's edge; one of length 1 */
        case 3: begins = 1; break;                               /* every position its own document */
        default: begins = t == 0 || t == T / 2 || t == T - 1; break;
        }
        start[t] = begins ? (int)t : start[t - 1];
    }
}

static void attention_doc_masks(void **state)
{
    static const struct kcase dcases[] = {
        {"doc_attention", "[7, 24]", "{type: attention, heads: 2}", 3, NULL},
        {"doc_attention_grouped", "[9, 24]", "{type: attention, heads: 4, kv_heads: 2}", 2, NULL},
        {"doc_attention_full", "[10, 12]", "{type: attention, heads: 2, causal: false}", 2, NULL},
        {"doc_attention_dropout", "[8, 12]", "{type: attention, heads: 2, dropout: 0.25}", 2, NULL},
        {"doc_attention_blocks", "[300, 12]", "{type: attention, heads: 2, kv_heads: 1, dropout: 0.1}", 2, NULL},
        {"doc_attention_blocks_full", "[261, 12]", "{type: attention, heads: 2, causal: false}", 2, NULL},
    };
    struct dl_kernel_choices masked = {.doc_mask = 1};
    masked.device = TEST_DEVICE;
    int compared_runs = 0;
    for (size_t c = 0; c < sizeof dcases / sizeof dcases[0]; c++)
        for (int layout = 0; layout < 5; layout++) {
            const struct kcase *kc = &dcases[c];
            struct dl_net net;
            assert_int_equal(load(kc, &net), 0);
            const struct dl_layer *l = under_test(kc, &net);
            long T = l->out_shape.h;
            int *start = malloc(sizeof *start * (size_t)(T * kc->batch));
            for (long n = 0; n < kc->batch; n++)
                doc_starts(start + n * T, T, layout, n);
            struct kc_tensors ref;
            kc_alloc(&ref, l, kc->batch, 17);
            ref.doc_start = start;
            assert_int_equal(kc_run(&dl_kernel_reference, l, &ref, kc->batch), 0);
            for (int i = 0; dl_kernels[i]; i++) {
                const struct dl_kernel *k = dl_kernels[i];
                if (k == &dl_kernel_reference || !on_test_device(k) || k->op != l->kind || (k->supports && !k->supports(l)))
                    continue;
                if (!k->doc_mask) { /* never chosen for a masked layer (the bf16 kernel) */
                    assert_false(dl_kernel_usable(k, l, &masked));
                    continue;
                }
                if (k->dtype != DL_F32)
                    continue;
                int mbs[2] = {kc->batch, kc->batch % 2 ? 0 : kc->batch / 2};
                for (int m = 0; m < 2 && mbs[m]; m++) {
                    int mb = mbs[m];
                    struct kc_tensors t;
                    kc_alloc(&t, l, kc->batch, 17);
                    t.doc_start = start;
                    assert_int_equal(kc_run(k, l, &t, mb), 0);
                    double e = compare(l, &t, &ref);
                    print_message("# %-26s layout %d %-10s mb %d: relative error %.2e\n", kc->name, layout, k->name,
                                  mb, e);
                    assert_true(e <= TOL);
                    kc_free(&t, l);
                    compared_runs++;
                }
            }
            ref.doc_start = NULL;
            kc_free(&ref, l);
            free(start);
            dl_net_free(&net);
        }
    print_message("# %d masked kernel runs compared\n", compared_runs);
#ifndef TEST_ON_CUDA
    assert_true(compared_runs > 0);
#endif
}

int main(void)
{
    /* Three threads, more than the CPUs of a small machine: the sample-parallel
     * kernels' per-thread buffers and their final sums run as in training,
     * with some threads getting no sample of a small micro-batch. */
    dl_threads_set(3);
    struct dl_error err = {0};
    const struct dl_device *dev;
    if (dl_device_open(TEST_DEVICE, 0, &dev, &err)) { /* cmocka's skip() would count as a failure under TAP */
        printf("1..0 # SKIP %s\n", err.msg);
        return 0;
    }
    struct CMUnitTest tests[N_CASES + N_BLOCKED + N_LOSSES + 8];
    for (size_t i = 0; i < N_CASES; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
    for (size_t i = 0; i < N_BLOCKED; i++)
        tests[N_CASES + i] = (struct CMUnitTest){blocked[i].k.name, run_blocked, NULL, NULL, (void *)&blocked[i]};
    tests[N_CASES + N_BLOCKED] = (struct CMUnitTest){"maxpool_ties_and_nans", maxpool_ties_and_nans, NULL, NULL, NULL};
    tests[N_CASES + N_BLOCKED + 1] = (struct CMUnitTest){"every_kernel_has_a_case", every_kernel_has_a_case, NULL, NULL, NULL};
    tests[N_CASES + N_BLOCKED + 2] = (struct CMUnitTest){"saved_state_grows_with_samples",
                                                         saved_state_grows_with_samples, NULL, NULL, NULL};
    size_t n_tests = N_CASES + N_BLOCKED + 3;
    for (size_t i = 0; i < N_LOSSES; i++)
        tests[n_tests++] = (struct CMUnitTest){losses[i].name, run_case, NULL, NULL, (void *)&losses[i]};
#ifndef TEST_ON_CUDA
    tests[n_tests++] = (struct CMUnitTest){"harness_equals_direct_reference", harness_equals_direct_reference, NULL,
                                           NULL, NULL};
#endif
    tests[n_tests++] = (struct CMUnitTest){"attention_doc_masks", attention_doc_masks, NULL, NULL, NULL};
    tests[n_tests++] = (struct CMUnitTest){"bf16_kernels", bf16_kernels, NULL, NULL, NULL};
#ifndef TEST_ON_CUDA
    tests[n_tests++] = (struct CMUnitTest){"bf16_reorders", bf16_reorders, NULL, NULL, NULL};
#endif
    /* last: it counts what the cases before it compared */
    tests[n_tests++] = (struct CMUnitTest){"every_kernel_compared", every_kernel_compared, NULL, NULL, NULL};
    return _cmocka_run_group_tests("tests", tests, n_tests, NULL, NULL);
}
