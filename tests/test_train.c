/* test_train.c: dl_train as a program that calls the library runs it
 * (issue 41): the network file's settings reach the run with the default
 * training options, without the caller copying them (trainer.h's rule).
 * The file's train.precision chooses the kernels: a network whose file
 * says precision: bf16 runs its fc layers through bf16 kernels
 * (onednn-bf16, or reference-bf16 where the CPU has no bf16: both are
 * kernels of dtype bf16), the same network in fp32 through none, and
 * kernel choices of the caller's that leave the precision at fp32 do not
 * override the file; precision: auto times a step in both and runs in the
 * faster (res reports the times; auto's pick and the slow-bf16 warning
 * from given times).  parallel.recompute: full makes a network of blocks
 * plan a smaller arena (on_memory); parallel.zero: 1 is refused with the
 * caller's local SGD, and on the file's train.device emulated (a device
 * without host memory); parallel.micro_batches cuts the batch into that
 * many chunks (more than its samples is refused, naming the count) unless
 * the caller asks for a chunk count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backends/kernel.h"
#include "spec/netfile.h"
#include "train/trainer.h"

/* Two fc layers on synthetic data, two steps of batch 8. */
static void load(const char *precision, struct dl_net *net)
{
    char text[1024];
    snprintf(text, sizeof text,
             "input: {shape: [16], classes: 4}\n"
             "data: {dataset: synthetic, train_samples: 32, test_samples: 8}\n"
             "layers:\n"
             "  - {name: fc1, type: fc, units: 16}\n"
             "  - {name: relu, type: relu}\n"
             "  - {name: fc2, type: fc, units: 4}\n"
             "loss: softmax_cross_entropy\n"
             "train: {batch: 8, epochs: 1, max_steps: 2, seed: 3, precision: %s}\n",
             precision);
    struct dl_error err = {0};
    int rc = dl_net_load_string("train.yaml", text, net, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

/* dl_train's result with the default options (kernels: the caller's kernel
 * choices, NULL for none). */
static void train_with(const char *precision, const struct dl_kernel_choices *kernels, struct dl_train_result *res)
{
    struct dl_net net;
    load(precision, &net);
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    o.exec.kernels = kernels;
    struct dl_error err = {0};
    int rc = dl_train(&net, &o, NULL, res, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    assert_int_equal(res->steps, 2);
    dl_net_free(&net);
}

/* The layers dl_train ran with bf16 kernels. */
static int bf16_layers(const char *precision, const struct dl_kernel_choices *kernels)
{
    struct dl_train_result res;
    train_with(precision, kernels, &res);
    return res.bf16_layers;
}

static void file_says_bf16(void **state)
{
    (void)state;
    assert_true(bf16_layers("bf16", NULL) >= 2); /* both fc layers (and what follows them in bf16) */
}

static void file_says_fp32(void **state)
{
    (void)state;
    assert_int_equal(bf16_layers("fp32", NULL), 0);
}

/* train.precision auto in a file a program trains: dl_train times a step
 * in both precisions and runs in the faster, which res reports. */
static void file_says_auto(void **state)
{
    (void)state;
    struct dl_train_result res;
    train_with("auto", NULL, &res);
    const struct dl_precision_probe *p = &res.precision_probe;
    assert_true(res.precision_auto);
    assert_true(p->f32_ms > 0 && p->bf16_ms > 0);
    assert_int_equal(p->batch, 8);
    if (dl_precision_faster(p) == DL_BF16)
        assert_true(res.bf16_layers >= 2);
    else
        assert_int_equal(res.bf16_layers, 0);
    train_with("bf16", NULL, &res);
    assert_false(res.precision_auto);
}

/* auto's pick and the slow-bf16 warning from a probe's figures. */
static void auto_picks_the_faster(void **state)
{
    (void)state;
    struct dl_precision_probe faster_bf16 = {.f32_ms = 4.0, .bf16_ms = 2.0, .batch = 16, .native = 1};
    struct dl_precision_probe slower_bf16 = {.f32_ms = 2.0, .bf16_ms = 5.0, .batch = 16, .native = 0};
    assert_int_equal(dl_precision_faster(&faster_bf16), DL_BF16);
    assert_int_equal(dl_precision_faster(&slower_bf16), DL_F32);
    assert_false(dl_precision_slow(&faster_bf16));
    assert_true(dl_precision_slow(&slower_bf16));
    slower_bf16.native = 1; /* native bf16 measured slower: no warning, auto still says so */
    assert_false(dl_precision_slow(&slower_bf16));
    char line[512];
    dl_precision_describe(&faster_bf16, 1, line, sizeof line);
    assert_string_equal(line, "precision auto: bf16 (a step of 16 samples took 2.00 ms in bf16, 4.00 ms in fp32 on "
                              "this machine: native bf16)");
    slower_bf16.native = 0;
    dl_precision_describe(&slower_bf16, 0, line, sizeof line);
    assert_string_equal(line, "--precision bf16 on a CPU with no native bf16 (AVX512-BF16 or AMX): a step of 16 "
                              "samples took 5.00 ms in bf16 against 2.00 ms in fp32 on this machine, 2.5x slower; "
                              "--precision auto picks the faster");
}

static void caller_choices_leave_the_file_precision(void **state)
{
    (void)state;
    struct dl_kernel_choices ch = {.precision = DL_F32, .no_fusion = 1};
    assert_true(bf16_layers("bf16", &ch) >= 2);
}

/* A network of two blocks of fc layers; `extra` ends the file (a parallel:
 * section, say) and train_extra goes into its train: map. */
static void load_blocks(const char *train_extra, const char *extra, struct dl_net *net)
{
    char text[2048];
    snprintf(text, sizeof text,
             "input: {shape: [16], classes: 4}\n"
             "data: {dataset: synthetic, train_samples: 32, test_samples: 8}\n"
             "blocks:\n"
             "  b:\n"
             "    layers:\n"
             "      - {name: fc1, type: fc, units: 64}\n"
             "      - {name: relu, type: relu}\n"
             "      - {name: fc2, type: fc, units: 16}\n"
             "layers:\n"
             "  - {name: h, block: b, repeat: 2}\n"
             "  - {name: out, type: fc, units: 4}\n"
             "loss: softmax_cross_entropy\n"
             "train: {batch: 8, epochs: 1, max_steps: 2, seed: 3%s}\n"
             "%s",
             train_extra, extra);
    struct dl_error err = {0};
    int rc = dl_net_load_string("blocks.yaml", text, net, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

static void on_memory(void *ctx, const struct dl_rank_memory *ranks, int n)
{
    assert_int_equal(n, 1);
    *(double *)ctx = ranks[0].arena_bytes;
}

/* dl_train of the blocks network with o; its status, the message in msg
 * and the planned arena in *arena. */
static int train_blocks(const char *train_extra, const char *extra, const struct dl_train_opts *o, char *msg,
                        size_t size, double *arena)
{
    struct dl_net net;
    load_blocks(train_extra, extra, &net);
    struct dl_train_hooks hooks = {.ctx = arena, .on_memory = on_memory};
    struct dl_train_result res;
    struct dl_error err = {0};
    int rc = dl_train(&net, o, &hooks, &res, &err);
    snprintf(msg, size, "%s", rc ? err.msg : "");
    if (!rc)
        assert_int_equal(res.steps, 2);
    dl_net_free(&net);
    return rc;
}

static void file_recompute_shrinks_the_arena(void **state)
{
    (void)state;
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    char msg[512];
    double kept = 0, recomputed = 0;
    assert_int_equal(train_blocks("", "parallel: {recompute: none}\n", &o, msg, sizeof msg, &kept), DL_OK);
    assert_int_equal(train_blocks("", "parallel: {recompute: full}\n", &o, msg, sizeof msg, &recomputed), DL_OK);
    assert_true(kept > 0);
    assert_true(recomputed < kept);
}

static void file_zero_refuses_local_sgd(void **state)
{
    (void)state;
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    struct dl_error err = {0};
    assert_int_equal(dl_consistency_parse("local-sgd:4", &o.parallel, &err), DL_OK);
    char msg[512];
    double arena = 0;
    assert_int_equal(train_blocks("", "", &o, msg, sizeof msg, &arena), DL_OK); /* without ZeRO it trains */
    assert_int_equal(train_blocks("", "parallel: {zero: 1}\n", &o, msg, sizeof msg, &arena), DL_ERR_SPEC);
    assert_non_null(strstr(msg, "--zero 1: synchronous data parallelism only"));
}

static void file_device_opened(void **state)
{
    (void)state;
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    char msg[512];
    double arena = 0;
    assert_int_equal(train_blocks(", device: emulated", "", &o, msg, sizeof msg, &arena), DL_OK);
    assert_int_equal(train_blocks(", device: emulated", "parallel: {zero: 1}\n", &o, msg, sizeof msg, &arena),
                     DL_ERR_SPEC);
    assert_non_null(strstr(msg, "--zero 1: not on a device without host memory yet (--device emulated)"));
}

static void file_micro_batches_unless_the_caller_asks(void **state)
{
    (void)state;
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    char msg[512];
    double arena = 0;
    assert_int_equal(train_blocks("", "parallel: {micro_batches: 16}\n", &o, msg, sizeof msg, &arena), DL_ERR_SPEC);
    assert_non_null(strstr(msg, "--pipeline-chunks 16: a rank's part of the batch has only 8 samples"));
    o.pipeline_chunks = 2;
    assert_int_equal(train_blocks("", "parallel: {micro_batches: 16}\n", &o, msg, sizeof msg, &arena), DL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(file_says_bf16),
        cmocka_unit_test(file_says_fp32),
        cmocka_unit_test(file_says_auto),
        cmocka_unit_test(auto_picks_the_faster),
        cmocka_unit_test(caller_choices_leave_the_file_precision),
        cmocka_unit_test(file_recompute_shrinks_the_arena),
        cmocka_unit_test(file_zero_refuses_local_sgd),
        cmocka_unit_test(file_device_opened),
        cmocka_unit_test(file_micro_batches_unless_the_caller_asks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
