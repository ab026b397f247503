/* test_kernels_net.c: whole networks through the executor with the default
 * (fast) kernels vs the reference kernels: a few SGD steps of LeNet-5 and of
 * a small ResNet-like net (conv, batch norm, relu, residual add, max pool,
 * global average pool, fc) give the same losses within 1e-4 relative, also
 * for a smaller last batch; the fast path repeats itself bit for bit for a
 * fixed seed and thread count; and the planned arena is used without any
 * allocation per step (the executor has nothing to allocate with).  A small
 * conv net also runs on oneDNN kernels alone (all=onednn), where fc1 (the
 * inner product) takes the blocked max-pool output without a reorder step.
 * A ReLU folded into the convolution or batch norm before it (first or not,
 * so that the input gradient goes through the folded ReLU's mask) or into
 * the max pooling after it (NCHW or blocked) trains bit for bit like the
 * ReLU layer.  A sequence fc with weights past 64 MiB runs on one matrix
 * over the batch's positions by default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "exec/exec.h"
#include "spec/netfile.h"
#include "train_steps.h"

#define STEPS 4

static const char *const LENET =
    "input: {shape: [1, 28, 28], classes: 10}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, filters: 6, kernel: 5, pad: 2}\n"
    "  - {type: relu}\n"
    "  - {type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: conv2, type: conv, filters: 16, kernel: 5}\n"
    "  - {type: relu}\n"
    "  - {type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: fc1, type: fc, units: 120}\n"
    "  - {type: relu}\n"
    "  - {name: fc2, type: fc, units: 84}\n"
    "  - {type: relu}\n"
    "  - {name: fc3, type: fc, units: 10}\n"
    "loss: softmax_cross_entropy\n";

static const char *const RESNET =
    "input: {shape: [3, 20, 20], classes: 7}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, filters: 16, kernel: 3, stride: 2, pad: 1, bias: false}\n"
    "  - {name: bn1, type: batchnorm}\n"
    "  - {name: relu, type: relu}\n"
    "  - {name: pool, type: maxpool, kernel: 3, stride: 2, pad: 1}\n"
    "  - {name: b1, type: conv, filters: 16, kernel: 3, pad: 1, bias: false}\n"
    "  - {name: b1bn, type: batchnorm}\n"
    "  - {name: b1r, type: relu}\n"
    "  - {name: b2, type: conv, filters: 16, kernel: 3, pad: 1, bias: false}\n"
    "  - {name: b2bn, type: batchnorm}\n"
    "  - {name: add, type: add, inputs: [b2bn, pool]}\n"
    "  - {name: r2, type: relu}\n"
    "  - {name: d, type: conv, filters: 32, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: dbn, type: batchnorm}\n"
    "  - {name: c3, type: conv, filters: 32, kernel: 3, stride: 2, pad: 1, inputs: [r2]}\n"
    "  - {name: add2, type: add, inputs: [c3, dbn]}\n"
    "  - {name: r3, type: relu}\n"
    "  - {name: gap, type: global_avgpool}\n"
    "  - {name: fc, type: fc, units: 7}\n"
    "loss: softmax_cross_entropy\n";

/* conv2 (on oneDNN) makes nChw8c activations, which relu and max pool keep
 * on oneDNN and fc1 gets as they are on the oneDNN inner product. */
static const char *const BLOCKED_FC =
    "input: {shape: [3, 12, 12], classes: 5}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, filters: 16, kernel: 3, pad: 1}\n"
    "  - {type: relu}\n"
    "  - {name: conv2, type: conv, filters: 20, kernel: 3, pad: 1}\n"
    "  - {type: relu}\n"
    "  - {type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: fc1, type: fc, units: 30}\n"
    "  - {type: relu}\n"
    "  - {name: fc2, type: fc, units: 5}\n"
    "loss: softmax_cross_entropy\n";

/* Losses of STEPS SGD steps (the last one on a smaller batch) and the
 * final weights. */
static void train(const char *text, const char *kernels, int batch, double *loss, float **weights, long *n)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("net.yaml", text, &net, &err), 0);
    struct dl_kernel_choices ch = {0};
    if (kernels)
        assert_int_equal(dl_kernel_choice_add(&ch, kernels, &err), 0);
    struct dl_exec e;
    assert_int_equal(dl_exec_init(&e, &net.graph, batch, 3, &(struct dl_exec_options){.kernels = &ch}, &err), 0);
    train_steps(&e, net.graph.classes, batch, STEPS, loss, weights, n);
    dl_exec_free(&e);
    dl_net_free(&net);
}

/* kernels: NULL (the defaults) or a --kernel choice for the fast run. */
static void fast_vs_reference(const char *text, const char *kernels, int batch)
{
    double lf[STEPS], lr[STEPS], l2[STEPS];
    float *wf, *wr, *w2;
    long n;
    train(text, kernels, batch, lf, &wf, &n);
    train(text, "all=reference", batch, lr, &wr, &n);
    train(text, kernels, batch, l2, &w2, &n);
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(lf[s] - lr[s]) / fabs(lr[s]);
        print_message("# step %d: loss %.7f fast, %.7f reference, relative difference %.1e\n", s + 1, lf[s], lr[s],
                      rel);
        assert_true(rel <= 1e-4);
        assert_true(lf[s] == l2[s]); /* deterministic for a fixed thread count */
    }
    double num = 0, den = 1e-30;
    for (long i = 0; i < n; i++) {
        num = fmax(num, fabs((double)wf[i] - wr[i]));
        den = fmax(den, fabs((double)wr[i]));
    }
    print_message("# weights after %d steps: relative difference %.1e\n", STEPS, num / den);
    assert_true(num / den <= 1e-4);
    assert_memory_equal(wf, w2, sizeof *wf * (size_t)n);
    free(wf);
    free(wr);
    free(w2);
}

static void lenet5(void **state)
{
    fast_vs_reference(LENET, NULL, 16);
}

/* Few input channels at stride 1 (the direct convolution, which folds a
 * following ReLU in), the second ReLU's input also read by a residual add,
 * so it is not folded, and a ReLU before an NCHW max pooling, which moves
 * into the pooling. */
static const char *const FUSABLE =
    "input: {shape: [3, 11, 13], classes: 4}\n"
    "layers:\n"
    "  - {name: c1, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: r1, type: relu}\n"
    "  - {name: c2, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: r2, type: relu}\n"
    "  - {name: sum, type: add, inputs: [r2, c2]}\n"
    "  - {name: r3, type: relu}\n"
    "  - {name: pool, type: maxpool, kernel: 2}\n"
    "  - {name: fc, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

/* Every convolution on the direct kernel (at most 4 input channels), each
 * with its ReLU folded in: c2's and c3's input gradients are computed
 * through the folded ReLU's mask, which c1 (reading the network's input)
 * never needs. */
static const char *const DIRECT_CHAIN =
    "input: {shape: [3, 11, 13], classes: 4}\n"
    "layers:\n"
    "  - {name: c1, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: r1, type: relu}\n"
    "  - {name: c2, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: r2, type: relu}\n"
    "  - {name: c3, type: conv, filters: 6, kernel: [3, 2], pad: [1, 0]}\n"
    "  - {name: r3, type: relu}\n"
    "  - {name: pool, type: maxpool, kernel: 2}\n"
    "  - {name: fc, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

/* SGD steps with and without folding ReLUs into convolutions; returns how
 * many layers were folded. */
static int train_fusion(const char *text, int no_fusion, int batch, double *loss, float **weights, long *n)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("net.yaml", text, &net, &err), 0);
    struct dl_kernel_choices ch = {.no_fusion = no_fusion};
    struct dl_exec e;
    assert_int_equal(dl_exec_init(&e, &net.graph, batch, 3, &(struct dl_exec_options){.kernels = &ch}, &err), 0);
    int fused = 0;
    for (int i = 0; i < net.graph.n; i++)
        fused += e.fused[i] != 0;
    train_steps(&e, net.graph.classes, batch, STEPS, loss, weights, n);
    dl_exec_free(&e);
    dl_net_free(&net);
    return fused;
}

/* A folded ReLU computes what the ReLU layer does, bit for bit (on data
 * without NaNs): the same losses and weights as with --no-fusion, for ReLUs
 * folded into convolutions, max poolings and batch norms. */
static void relu_fused(void **state)
{
    const char *nets[] = {LENET, FUSABLE, DIRECT_CHAIN, RESNET};
    /* LeNet: relu1 into conv1, relu2 (conv2 runs on oneDNN) into maxpool2
     * (nChw8c); FUSABLE: r1 into c1, r3 into pool (NCHW), not r2;
     * DIRECT_CHAIN: each ReLU into its convolution; RESNET: relu into bn1,
     * b1r into b1bn (the batch norm's fused ReLU), r2 and r3 into the adds
     * before them (r2 read by two layers) */
    const int expect[] = {2, 2, 3, 4};
    for (int k = 0; k < 4; k++) {
        double lf[STEPS], lu[STEPS];
        float *wf, *wu;
        long n;
        int fused = train_fusion(nets[k], 0, 8, lf, &wf, &n);
        assert_int_equal(train_fusion(nets[k], 1, 8, lu, &wu, &n), 0);
        print_message("# net %d: %d ReLU folded; last loss %.7f fused, %.7f not\n", k, fused, lf[STEPS - 1],
                      lu[STEPS - 1]);
        assert_int_equal(fused, expect[k]);
        assert_memory_equal(lf, lu, sizeof lf);
        assert_memory_equal(wf, wu, sizeof *wf * (size_t)n);
        free(wf);
        free(wu);
    }
}

/* Every layer on a oneDNN kernel where there is one: fc1 (the inner
 * product) reads the oneDNN max pool's blocked output as it is. */
static void blocked_onednn_fc(void **state)
{
    fast_vs_reference(BLOCKED_FC, "all=onednn", 8);
}

static void resnet_like(void **state)
{
    fast_vs_reference(RESNET, NULL, 8);
}

/* The number of reorder steps of net text with all=onednn and then fc=fc;
 * *n_on: fc layers on kernel fc. */
static int reorders(const char *text, const char *fc, int *n_on)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("net.yaml", text, &net, &err), 0);
    struct dl_kernel_choices ch = {0};
    char spec[64];
    snprintf(spec, sizeof spec, "fc=%s", fc);
    assert_int_equal(dl_kernel_choice_add(&ch, "all=onednn", &err), 0);
    assert_int_equal(dl_kernel_choice_add(&ch, spec, &err), 0);
    struct dl_exec e;
    assert_int_equal(dl_exec_plan(&e, &net.graph, 8, &(struct dl_exec_options){.kernels = &ch}, &err), 0);
    *n_on = 0;
    for (int i = 0; i < net.graph.n; i++)
        *n_on += strcmp(e.kernel[i]->name, fc) == 0 && strcmp(net.graph.layers[i].kind->name, "fc") == 0;
    int r = dl_exec_reorders(&e);
    dl_exec_free(&e);
    dl_net_free(&net);
    return r;
}

/* With oneDNN convolutions and pooling (blocked activations), the oneDNN
 * inner product takes the pool output as it is, without the reorder step
 * the GEMM fc needs. */
static void onednn_fc_saves_reorder(void **state)
{
    int gemm_fc, onednn_fc;
    int r_gemm = reorders(BLOCKED_FC, "dnnl-gemm", &gemm_fc);
    int r_onednn = reorders(BLOCKED_FC, "onednn", &onednn_fc);
    print_message("# all=onednn: %d reorder steps with fc=dnnl-gemm (%d fc layers), %d with fc=onednn "
                  "(%d)\n", r_gemm, gemm_fc, r_onednn, onednn_fc);
    assert_int_equal(gemm_fc, 2);
    assert_int_equal(onednn_fc, 2);
    /* oneDNN picks plain layouts on CPUs without AVX2 (ONEDNN_MAX_CPU_ISA=SSE41): nothing to save */
    assert_int_equal(r_onednn, r_gemm > 0 ? r_gemm - 1 : 0);
}

/* The fast path really is fast kernels with blocked layouts here. */
/* A batch norm after an NCHW convolution (im2col here) takes its input as
 * it is, and the ReLU (folded into it) and the max pooling after it keep
 * NCHW: no reorder step until a oneDNN layer wants a blocked layout, and
 * then of the 4x smaller pooled tensor.  Same results as the reference
 * kernels (with 4 filters and with 16). */
static const char *const PLAIN_STEM =
    "input: {shape: [3, 12, 12], classes: 5}\n"
    "layers:\n"
    "  - {name: stem, type: conv, filters: %d, kernel: 3, pad: 1, bias: false}\n"
    "  - {name: bn, type: batchnorm}\n"
    "  - {name: relu, type: relu}\n"
    "  - {name: pool, type: maxpool, kernel: 3, stride: 2, pad: 1}\n"
    "  - {name: fc, type: fc, units: 5}\n"
    "loss: softmax_cross_entropy\n";

static void bn_after_plain_conv_stays_plain(void **state)
{
    for (int filters = 4; filters <= 16; filters += 12) {
        char text[1024];
        snprintf(text, sizeof text, PLAIN_STEM, filters);
        struct dl_net net;
        struct dl_error err = {0};
        assert_int_equal(dl_net_load_string("net.yaml", text, &net, &err), 0);
        struct dl_kernel_choices ch = {0};
        assert_int_equal(dl_kernel_choice_add(&ch, "conv=dnnl-gemm", &err), 0);
        struct dl_exec e;
        assert_int_equal(dl_exec_plan(&e, &net.graph, 8, &(struct dl_exec_options){.kernels = &ch}, &err), 0);
        print_message("# %d filters: stem %s, bn %s, pool %s, %d reorder steps\n", filters,
                      dl_layout_names[e.act[0].layout], dl_layout_names[e.act[1].layout],
                      dl_layout_names[e.act[3].layout], dl_exec_reorders(&e));
        for (int i = 0; i <= 3; i++)
            assert_int_equal(e.act[i].layout, DL_LAYOUT_PLAIN);
        assert_int_equal(dl_exec_reorders(&e), 0);
        dl_exec_free(&e);
        dl_net_free(&net);
        fast_vs_reference(text, "conv=dnnl-gemm", 8);
    }
}

static void resnet_uses_fast_kernels(void **state)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("net.yaml", RESNET, &net, &err), 0);
    struct dl_exec e;
    assert_int_equal(dl_exec_plan(&e, &net.graph, 8, NULL, &err), 0);
    int fast = 0;
    for (int i = 0; i < net.graph.n; i++)
        fast += strcmp(e.kernel[i]->name, "reference") != 0;
    print_message("# %d of %d layers on fast kernels, %d reorder steps\n", fast, net.graph.n, dl_exec_reorders(&e));
    assert_true(fast >= net.graph.n - 1); /* all but the loss */
    dl_exec_free(&e);
    dl_net_free(&net);
}

/* The default kernel of a sequence fc: one matrix over the batch's
 * positions (dnnl-gemm-rows) where its weights pass 64 MiB (a vocabulary
 * head: here 65,536 x 1,024, 256 MiB, beyond any cache), one GEMM per
 * sample (dnnl-gemm) below, and for a vector input (no positions); a
 * --kernel choice of either is taken whatever the size. */
static void head_fc_as_one_matrix(void **state)
{
    (void)state;
    static const char *const nets[] = {
        "input: {shape: [8, 1024], classes: 4}\nlayers:\n  - {name: fc, type: fc, units: 65536}\n",
        "input: {shape: [8, 1024], classes: 4}\nlayers:\n  - {name: fc, type: fc, units: 16383}\n",
        "input: {shape: [1024, 1, 1], classes: 4}\nlayers:\n  - {name: fc, type: fc, units: 65536}\n",
    };
    static const char *const want[] = {"dnnl-gemm-rows", "dnnl-gemm", "dnnl-gemm"};
    for (int i = 0; i < 3; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s  - {type: fc, units: 4}\nloss: softmax_cross_entropy\n", nets[i]);
        struct dl_net net;
        struct dl_error err = {0};
        assert_int_equal(dl_net_load_string("net.yaml", text, &net, &err), 0);
        const struct dl_layer *fc = &net.graph.layers[0];
        assert_string_equal(dl_kernel_select(fc, NULL)->name, want[i]);
        struct dl_kernel_choices ch = {0};
        assert_int_equal(dl_kernel_choice_add(&ch, i ? "fc=dnnl-gemm-rows" : "fc=dnnl-gemm", &err), 0);
        assert_string_equal(dl_kernel_select(fc, &ch)->name, i == 2 ? "dnnl-gemm" : i ? "dnnl-gemm-rows" : "dnnl-gemm");
        dl_net_free(&net);
    }
}

static int sync_calls;
static void count_sync(void *ctx, double *v, int n)
{
    sync_calls++;
}

/* Calls of the cross-rank statistics hook in one training step of the
 * small ResNet whose executor is made with choices ch; *bn_kernel gets the
 * kernel of its first batch norm. */
static int sync_hook_calls(const struct dl_kernel_choices *ch, const struct dl_kernel **bn_kernel)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("net.yaml", RESNET, &net, &err), 0);
    struct dl_exec e;
    assert_int_equal(dl_exec_init(&e, &net.graph, 4, 3, &(struct dl_exec_options){.kernels = ch}, &err), 0);
    e.hooks.sync_sum = count_sync;
    *bn_kernel = e.kernel[dl_graph_find(&net.graph, "bn1")];
    float x[4 * 3 * 20 * 20] = {0};
    int y[4] = {0, 1, 2, 3};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((i * 7919) % 13) - 6;
    sync_calls = 0;
    dl_exec_zero_grad(&e);
    dl_exec_forward(&e, x, y, 4, 1);
    dl_exec_backward(&e);
    assert_int_equal(e.status, 0);
    dl_exec_free(&e);
    dl_net_free(&net);
    return sync_calls;
}

/* --sync-bn's rule lives in the kernel choices: with sync_stats every batch
 * norm runs on a kernel that honours the op's sync_sum hook (which is then
 * called in forward and backward), even when a --kernel choice names one
 * that does not; without it a choice of oneDNN's keeps per-rank statistics.
 * The default (simd) honours the hook. */
static void sync_stats_kernels(void **state)
{
    struct dl_kernel_choices ch = {0};
    struct dl_error err = {0};
    const struct dl_kernel *k;
    int plain = sync_hook_calls(&ch, &k);
    print_message("# default batch norm: %s, %d hook calls\n", k->name, plain);
    assert_true(k->whole_batch && k->sync_stats);
    assert_true(plain >= 2 * 4); /* four batch norms, forward and backward each */
    assert_int_equal(dl_kernel_choice_add(&ch, "batchnorm=onednn", &err), 0);
    int onednn = sync_hook_calls(&ch, &k);
    print_message("# batchnorm=onednn: %s, %d hook calls\n", k->name, onednn);
    assert_true(!k->sync_stats && onednn == 0); /* per-rank statistics */
    ch.sync_stats = 1;
    int synced = sync_hook_calls(&ch, &k);
    print_message("# batchnorm=onednn with sync_stats: %s, %d hook calls\n", k->name, synced);
    assert_true(k->sync_stats);
    assert_int_equal(synced, plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lenet5),
        cmocka_unit_test(relu_fused),
        cmocka_unit_test(blocked_onednn_fc),
        cmocka_unit_test(onednn_fc_saves_reorder),
        cmocka_unit_test(resnet_like),
        cmocka_unit_test(resnet_uses_fast_kernels),
        cmocka_unit_test(head_fc_as_one_matrix),
        cmocka_unit_test(sync_stats_kernels),
        cmocka_unit_test(bn_after_plain_conv_stays_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
