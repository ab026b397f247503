/* test_kernel_fault.c: the path by which a failure inside a kernel call
 * (a CUDA launch, a cuDNN or cuBLAS call: kernel.h's dl_kernel_fail)
 * becomes an error naming the layer, the kernel, the direction and the
 * call, exercised on the host: a test kernel wraps the kernel the executor
 * chose for one layer and, in the direction asked, runs it and then
 * records a failure, as a GPU kernel does when a library call fails.
 * Checked: the executor's status and message in forward, backward-data and
 * backward-weights; that the steps after a failed one do not run (their
 * output keeps a sentinel); that without a failure the wrapped run gives
 * the unwrapped run's loss and gradients bit for bit; that only the first
 * failure is kept; and that the tuner's measurement returns the failure
 * instead of a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernel.h"
#include "backends/reference/reference.h"
#include "core/rng.h"
#include "exec/exec.h"
#include "exec/exec_impl.h"
#include "spec/netfile.h"
#include "tune/tune_impl.h"

static const char NET[] = "input: {shape: [2, 6, 6], classes: 4}\n"
                          "layers:\n"
                          "  - {type: conv, filters: 3, kernel: 3, pad: 1, name: c1}\n"
                          "  - {type: sigmoid, name: s1}\n"
                          "  - {type: fc, units: 4, name: f1}\n"
                          "loss: softmax_cross_entropy\n";
#define BATCH 3

/* The wrapped kernel and the direction in which the wrapper fails (-1: never). */
static const struct dl_kernel *inner;
static int fail_dir = -1;

static void after(const struct dl_kernel_args *a, enum dl_dir dir)
{
    if ((int)dir == fail_dir)
        dl_kernel_fail(a, "failing", "testLibraryCall", "TEST_STATUS_EXECUTION_FAILED");
}

static void w_forward(void *inst, const struct dl_kernel_args *a)
{
    inner->forward(inst, a);
    after(a, DL_DIR_FORWARD);
}

static void w_backward_data(void *inst, const struct dl_kernel_args *a)
{
    inner->backward_data(inst, a);
    after(a, DL_DIR_BACKWARD_DATA);
}

static void w_backward_weights(void *inst, const struct dl_kernel_args *a)
{
    inner->backward_weights(inst, a);
    after(a, DL_DIR_BACKWARD_WEIGHTS);
}

static void w_destroy(void *inst)
{
    inner->destroy(inst);
}

/* A copy of inner's table whose calls go through the wrapper. */
static struct dl_kernel wrapper_of(const struct dl_kernel *k)
{
    inner = k;
    struct dl_kernel w = *k;
    w.name = "failing";
    w.forward = w_forward;
    w.destroy = w_destroy;
    w.backward_data = k->backward_data ? w_backward_data : NULL;
    w.backward_weights = k->backward_weights ? w_backward_weights : NULL;
    return w;
}

struct fixture {
    struct dl_net net;
    struct dl_exec e;
    dl_real x[BATCH * 2 * 6 * 6];
    int labels[BATCH];
    struct dl_kernel wrapper;
};

static void setup(struct fixture *f, const char *layer)
{
    memset(f, 0, sizeof *f);
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("fault.yaml", NET, &f->net, &err), DL_OK);
    assert_int_equal(dl_exec_init(&f->e, &f->net.graph, BATCH, 7, NULL, &err), DL_OK);
    struct dl_rng r;
    dl_rng_seed(&r, 3);
    for (size_t i = 0; i < sizeof f->x / sizeof f->x[0]; i++)
        f->x[i] = (dl_real)dl_rng_normal(&r);
    for (int n = 0; n < BATCH; n++)
        f->labels[n] = n % 4;
    if (!layer)
        return;
    struct dl_exec_impl *m = f->e.impl;
    for (int i = 0; i < m->n_steps; i++) {
        struct dl_exec_step *s = &m->steps[i];
        if (s->kind != DL_STEP_LAYER || strcmp(f->net.graph.layers[s->layer].name, layer))
            continue;
        f->wrapper = wrapper_of(s->kernel);
        for (int j = 0; j < s->n_inst; j++)
            if (s->inst[j].kernel == s->kernel)
                s->inst[j].kernel = &f->wrapper;
        s->kernel = &f->wrapper;
        return;
    }
    fail_msg("no step runs layer %s", layer);
}

static void teardown(struct fixture *f)
{
    dl_exec_free(&f->e);
    dl_net_free(&f->net);
    fail_dir = -1;
}

static void step(struct fixture *f)
{
    dl_exec_forward(&f->e, f->x, f->labels, BATCH, 1);
    if (f->e.status)
        return;
    dl_exec_zero_grad(&f->e);
    dl_exec_backward(&f->e);
}

static void fails_in(const char *layer, enum dl_dir dir, const char *want)
{
    struct fixture *f = calloc(1, sizeof *f);
    setup(f, layer);
    fail_dir = (int)dir;
    step(f);
    print_message("# %s\n", f->e.err.msg);
    assert_int_equal(f->e.status, DL_ERR_INTERNAL);
    assert_int_equal(f->e.err.code, DL_ERR_INTERNAL);
    assert_string_equal(f->e.err.msg, want);
    teardown(f);
    free(f);
}

static void forward_failure(void **state)
{
    fails_in("c1", DL_DIR_FORWARD,
             "layer 'c1' (kernel failing, forward): testLibraryCall failed: TEST_STATUS_EXECUTION_FAILED");
}

static void backward_data_failure(void **state)
{
    fails_in("s1", DL_DIR_BACKWARD_DATA,
             "layer 's1' (kernel failing, backward-data): testLibraryCall failed: TEST_STATUS_EXECUTION_FAILED");
}

static void backward_weights_failure(void **state)
{
    struct fixture probe;
    setup(&probe, NULL);
    const struct dl_kernel *k = NULL;
    for (int i = 0; i < probe.e.impl->n_steps; i++)
        if (probe.e.impl->steps[i].kind == DL_STEP_LAYER && probe.e.impl->steps[i].layer == 2)
            k = probe.e.impl->steps[i].kernel;
    assert_non_null(k);
    int separate = !dl_kernel_weights_in_data(k);
    teardown(&probe);
    /* a kernel that computes weight gradients inside backward data fails there */
    fails_in("f1", separate ? DL_DIR_BACKWARD_WEIGHTS : DL_DIR_BACKWARD_DATA,
             separate ? "layer 'f1' (kernel failing, backward-weights): testLibraryCall failed: "
                        "TEST_STATUS_EXECUTION_FAILED"
                      : "layer 'f1' (kernel failing, backward-data): testLibraryCall failed: "
                        "TEST_STATUS_EXECUTION_FAILED");
}

/* A forward failure stops the run there: the layers after it do not run. */
static void later_steps_skipped(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    setup(f, "c1");
    struct dl_exec_impl *m = f->e.impl;
    dl_real *fc_out = NULL;
    long fc_count = 0;
    for (int i = 0; i < m->n_steps; i++)
        if (m->steps[i].kind == DL_STEP_LAYER && m->steps[i].layer == 2) {
            fc_out = m->tensors[m->steps[i].out].data;
            fc_count = m->tensors[m->steps[i].out].count * BATCH;
        }
    assert_non_null(fc_out);
    for (long i = 0; i < fc_count; i++)
        fc_out[i] = (dl_real)12345;
    fail_dir = DL_DIR_FORWARD;
    dl_exec_forward(&f->e, f->x, f->labels, BATCH, 1);
    assert_int_equal(f->e.status, DL_ERR_INTERNAL);
    for (long i = 0; i < fc_count; i++)
        assert_true(fc_out[i] == (dl_real)12345);
    teardown(f);
    free(f);
}

/* Wrapped but never failing: the same loss and gradients, bit for bit. */
static void no_failure_no_change(void **state)
{
    struct fixture *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    setup(a, NULL);
    setup(b, "c1");
    step(a);
    step(b);
    assert_int_equal(a->e.status, 0);
    assert_int_equal(b->e.status, 0);
    double la = dl_exec_loss_sum(&a->e), lb = dl_exec_loss_sum(&b->e);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_int_equal(a->e.n_weights, b->e.n_weights);
    assert_memory_equal(a->e.dweights, b->e.dweights, sizeof(dl_real) * (size_t)a->e.n_weights);
    teardown(a);
    teardown(b);
    free(a);
    free(b);
}

static void first_failure_kept(void **state)
{
    struct dl_kernel_fault fault = {0};
    struct dl_kernel_args a = {.fault = &fault}, none = {.fault = NULL};
    dl_kernel_fail(&none, "k", "ignored", "nowhere to record"); /* no fault: nothing happens */
    dl_kernel_fail(&a, "first", "callOne", "REASON_ONE");
    dl_kernel_fail(&a, "second", "callTwo", "REASON_TWO");
    char name[] = "L";
    struct dl_layer l = {.name = name};
    struct dl_error err = {0};
    assert_int_equal(dl_kernel_fault_error(&fault, &l, DL_DIR_BACKWARD_DATA, &err), DL_ERR_INTERNAL);
    assert_string_equal(err.msg, "layer 'L' (kernel first, backward-data): callOne failed: REASON_ONE");
    /* taken: the fault is clear for the next run */
    assert_int_equal(fault.failed, 0);
    assert_int_equal(dl_kernel_fault_error(&fault, &l, DL_DIR_FORWARD, &err), DL_OK);
}

/* The tuner times nothing that failed: its measurement returns the error. */
static void tuner_reports_failure(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    setup(f, NULL);
    const struct dl_layer *l = &f->net.graph.layers[0];
    struct dl_kernel w = wrapper_of(&dl_kernel_reference);
    int want[DL_N_DIRS] = {1, 1, 1};
    struct dl_tune_row row[DL_N_DIRS];
    struct dl_error err = {0};
    assert_int_equal(dl_tune_measure(&w, l, 2, want, 0, 1, (size_t)1 << 30, row, &err), DL_OK);
    fail_dir = DL_DIR_FORWARD;
    assert_int_equal(dl_tune_measure(&w, l, 2, want, 0, 1, (size_t)1 << 30, row, &err), DL_ERR_INTERNAL);
    assert_string_equal(err.msg,
                        "layer 'c1' (kernel failing, forward): testLibraryCall failed: TEST_STATUS_EXECUTION_FAILED");
    fail_dir = DL_DIR_BACKWARD_DATA;
    assert_int_equal(dl_tune_measure(&w, l, 2, want, 0, 1, (size_t)1 << 30, row, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "(kernel failing, backward-data)"));
    teardown(f);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_failure_kept),     cmocka_unit_test(forward_failure),
        cmocka_unit_test(backward_data_failure),  cmocka_unit_test(backward_weights_failure),
        cmocka_unit_test(later_steps_skipped),    cmocka_unit_test(no_failure_no_change),
        cmocka_unit_test(tuner_reports_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
