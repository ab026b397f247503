/* test_train.c: dl_train as a program that calls the library runs it
 * (issue 41): the network file's train.precision chooses the kernels, with
 * the default training options and no kernel choices of the caller's.  A
 * network whose file says precision: bf16 runs its fc layers through bf16
 * kernels (onednn-bf16, or reference-bf16 where the CPU has no bf16: both
 * are kernels of dtype bf16), the same network in fp32 through none, and
 * kernel choices of the caller's that leave the precision at fp32 do not
 * override the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

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

/* The layers dl_train ran with bf16 kernels, with the default options
 * (kernels: the caller's kernel choices, NULL for none). */
static int bf16_layers(const char *precision, const struct dl_kernel_choices *kernels)
{
    struct dl_net net;
    load(precision, &net);
    struct dl_train_opts o;
    dl_train_opts_defaults(&o);
    o.exec.kernels = kernels;
    struct dl_train_result res;
    struct dl_error err = {0};
    int rc = dl_train(&net, &o, NULL, &res, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    assert_int_equal(res.steps, 2);
    dl_net_free(&net);
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

static void caller_choices_leave_the_file_precision(void **state)
{
    (void)state;
    struct dl_kernel_choices ch = {.precision = DL_F32, .no_fusion = 1};
    assert_true(bf16_layers("bf16", &ch) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(file_says_bf16),
        cmocka_unit_test(file_says_fp32),
        cmocka_unit_test(caller_choices_leave_the_file_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
