/* test_optim_device.c: the optimizers' update loops of a device against
 * the host's.  Every algorithm and variant (SGD plain, momentum, Nesterov;
 * AdaGrad; RMSProp with and without momentum; Adam; AdamW) takes five
 * steps from the same weights and gradients, once with the host's loops
 * on host memory and once with the device's loops on device copies
 * (dl_optim_init_on); weights and state read back must match within
 * 1e-6 relative (a GPU may contract a*b+c into one rounding).
 *
 * One source, two programs: test_optim_device runs the host device
 * through the same copies (and checks that a CUDA device gets the GPU's
 * loops where the build has them and is refused, naming it, where not); test_optim_device_cuda (built
 * --with-cuda, TEST_ON_CUDA) the GPU's loops, and reports itself skipped
 * with dl_device_open's reason where there is no GPU. */
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
#include "optim/optim.h"

#ifdef TEST_ON_CUDA
#define TEST_DEVICE DL_DEVICE_CUDA
#else
#define TEST_DEVICE DL_DEVICE_CPU
#endif
#define N 1031
#define STEPS 5

static const struct dl_device *dev;

struct variant {
    const char *name;
    struct dl_optim_spec spec;
};

static const struct variant variants[] = {
    {"sgd", {.kind = DL_OPTIM_SGD, .lr = 0.1, .weight_decay = 1e-2}},
    {"sgd_momentum", {.kind = DL_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2}},
    {"sgd_nesterov", {.kind = DL_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .nesterov = 1, .weight_decay = 1e-2}},
    {"adagrad", {.kind = DL_OPTIM_ADAGRAD, .lr = 0.05, .weight_decay = 1e-2, .eps = 1e-10}},
    {"rmsprop", {.kind = DL_OPTIM_RMSPROP, .lr = 0.01, .alpha = 0.99, .eps = 1e-8, .weight_decay = 1e-2}},
    {"rmsprop_momentum",
     {.kind = DL_OPTIM_RMSPROP, .lr = 0.01, .alpha = 0.9, .eps = 1e-8, .momentum = 0.8, .weight_decay = 1e-2}},
    {"adam", {.kind = DL_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2}},
    {"adamw", {.kind = DL_OPTIM_ADAMW, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1}},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static double rel_err(const float *a, const float *b, long n)
{
    double diff = 0, ref = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        diff = d > diff || d != d ? d : diff;
        ref = fabs((double)b[i]) > ref ? fabs((double)b[i]) : ref;
    }
    return ref > 0 ? diff / ref : diff;
}

static void *on_device(const void *host, size_t bytes)
{
    struct dl_error err = {0};
    void *p = dev->alloc(bytes, &err);
    assert_non_null(p);
    assert_int_equal(dev->copy(p, host, bytes, DL_COPY_TO_DEVICE, &err), DL_OK);
    return p;
}

static void device_equals_host(void **state)
{
    const struct variant *v = *state;
    struct dl_error err = {0};
    struct dl_optim host, device;
    assert_int_equal(dl_optim_init(&host, &v->spec, N, &err), DL_OK);
    assert_int_equal(dl_optim_init_on(&device, &v->spec, N, dev, &err), DL_OK);
    assert_int_equal(device.algo->device, TEST_DEVICE);
    assert_string_equal(device.algo->name, host.algo->name);
    float w[N], w0[N], g[N], got[N];
    struct dl_rng r;
    dl_rng_seed(&r, 17);
    for (int i = 0; i < N; i++)
        w0[i] = w[i] = (float)dl_rng_normal(&r);
    float *wd = on_device(w, sizeof w), *gd = on_device(w, sizeof g); /* gd: overwritten each step */
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++)
            g[i] = (float)dl_rng_normal(&r);
        assert_int_equal(dev->copy(gd, g, sizeof g, DL_COPY_TO_DEVICE, &err), DL_OK);
        assert_int_equal(dl_optim_step(&host, v->spec.lr, w, g), DL_OK);
        assert_int_equal(dl_optim_step(&device, v->spec.lr, wd, gd), DL_OK);
    }
    assert_int_equal(dev->copy(got, wd, sizeof got, DL_COPY_TO_HOST, &err), DL_OK);
    double e = rel_err(got, w, N);
    int slots = host.algo->state_vectors;
    float *st = malloc(sizeof(float) * N * (size_t)slots);
    assert_int_equal(dev->copy(st, device.state, sizeof(float) * N * (size_t)slots, DL_COPY_TO_HOST, &err), DL_OK);
    double es = rel_err(st, host.state, (long)N * slots);
    print_message("# %-16s weights: relative error %.2e, state: %.2e (%d steps on %s)\n", v->name, e, es, STEPS,
                  dev->name);
    assert_true(e <= 1e-6);
    assert_true(es <= 1e-6);
    assert_true(rel_err(got, w0, N) > 1e-3); /* the steps moved the weights */
    free(st);
    dev->free(wd);
    dev->free(gd);
    dl_optim_free(&host);
    dl_optim_free(&device);
}

#ifndef TEST_ON_CUDA
/* A CUDA device's table (host memory under the CUDA kind, never stepped)
 * gets the GPU's loops in a build with them, and is refused, naming it, in
 * a build without. */
static void loops_follow_the_device_kind(void **state)
{
    struct dl_device fake = dl_device_host;
    fake.kind = DL_DEVICE_CUDA;
    fake.kernels = DL_DEVICE_CUDA;
    fake.name = "cuda";
    struct dl_optim o;
    struct dl_error err = {0};
    for (size_t i = 0; i < N_VARIANTS; i++) {
        const struct dl_optim_algo *gpu = dl_optim_algo_find(variants[i].spec.kind, DL_DEVICE_CUDA);
        int rc = dl_optim_init_on(&o, &variants[i].spec, N, &fake, &err);
        if (gpu) {
            assert_int_equal(rc, DL_OK);
            assert_ptr_equal(o.algo, gpu);
            assert_int_equal(o.algo->device, DL_DEVICE_CUDA);
            dl_optim_free(&o);
        } else {
            assert_int_equal(rc, DL_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.msg, "no update loops on cuda"));
            assert_null(o.state);
        }
        print_message("# %-16s on a cuda table: %s\n", variants[i].name, gpu ? "the GPU's loops" : "refused");
    }
    assert_int_equal(dl_optim_algo_find(DL_OPTIM_ADAM, DL_DEVICE_CPU)->device, DL_DEVICE_CPU);
}
#endif

int main(void)
{
    struct dl_error err = {0};
    if (dl_device_open(TEST_DEVICE, 0, &dev, &err)) { /* cmocka's skip() would count as a failure under TAP */
        printf("1..0 # SKIP %s\n", err.msg);
        return 0;
    }
    struct CMUnitTest tests[N_VARIANTS + 1];
    size_t n = 0;
    for (size_t i = 0; i < N_VARIANTS; i++)
        tests[n++] = (struct CMUnitTest){variants[i].name, device_equals_host, NULL, NULL, (void *)&variants[i]};
#ifndef TEST_ON_CUDA
    tests[n++] = (struct CMUnitTest){"loops_follow_the_device_kind", loops_follow_the_device_kind, NULL, NULL, NULL};
#endif
    return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}
