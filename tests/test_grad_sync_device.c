/* test_grad_sync_device.c: data parallelism's gradient buckets on a device
 * without host memory (parallel/grad_sync.c), on the emulated device.  The
 * communicators are stand-ins for two ranks with equal gradients: their
 * allreduce doubles the buffer, and checks where it lives -- host memory
 * for the host's communicator, the device's for one of device buffers (as
 * NCCL's are), which is how the NCCL path (compiled only, no GPU here) is
 * exercised.  After a step, the device executor's gradients (copied out)
 * must equal the host executor's bit for bit, whether its buckets were
 * staged through host memory or scaled and summed in place over the
 * communicator of device buffers, each bucket's allreduce queued behind
 * the device mark recorded after its backward and scale in that step; and a communicator of device buffers
 * is refused for an executor on the host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "backends/device.h"
#include "core/clock.h"
#include "core/rng.h"
#include "exec/exec.h"
#include "parallel/grad_sync.h"
#include "spec/netfile.h"

static const char NET[] = "input: {shape: [3, 8, 8], classes: 5}\n"
                          "layers:\n"
                          "  - {type: conv, filters: 4, kernel: 3, pad: 1}\n"
                          "  - {type: batchnorm}\n"
                          "  - {type: relu}\n"
                          "  - {type: fc, units: 5}\n"
                          "loss: softmax_cross_entropy\n";
#define BATCH 4

/* Calls of the stand-ins' allreduce, and those given memory of the wrong kind. */
static int host_calls, device_calls, wrong_memory;
/* The device stand-in's waits for a bucket's mark, and those whose mark
 * was not recorded in the step under way (began: the host clock when it
 * began; the emulated device's marks are host clock readings). */
static int marks_waited, stale_marks;
static double began;

/* 1 when n floats at p are emulated device memory (its copy refuses any other). */
static int on_device(const float *p, size_t n)
{
    float *probe = malloc(sizeof *probe * (n ? n : 1));
    struct dl_error err = {0};
    int yes = probe && dl_device_emulated.copy(probe, p, sizeof *p * n, DL_COPY_TO_HOST, &err) == DL_OK;
    free(probe);
    return yes;
}

static int host_allreduce(struct dl_comm *c, void *values, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    float *buf = values;
    assert_int_equal(dtype, DL_F32);
    host_calls++;
    if (on_device(buf, n))
        wrong_memory++;
    for (size_t i = 0; i < n; i++)
        buf[i] += buf[i];
    return DL_OK;
}

static int device_allreduce(struct dl_comm *c, void *values, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    float *buf = values;
    assert_int_equal(dtype, DL_F32);
    device_calls++;
    if (!on_device(buf, n)) {
        wrong_memory++;
        return dl_errorf(err, DL_ERR_COMM, "a host buffer given to a communicator of device buffers");
    }
    dl_device_work_begin(&dl_device_emulated); /* the stand-in's "GPU" adds on the device */
    for (size_t i = 0; i < n; i++)
        buf[i] += buf[i];
    dl_device_work_end(&dl_device_emulated);
    return DL_OK;
}

static int device_wait_mark(struct dl_comm *c, const struct dl_device_mark *m, struct dl_error *err)
{
    marks_waited++;
    if (m->seconds < began)
        stale_marks++;
    return DL_OK;
}

static void nothing(struct dl_comm *c)
{
}

static const struct dl_comm_ops host_ops = {.name = "two equal host ranks", .allreduce = host_allreduce,
                                            .destroy = nothing};
static const struct dl_comm_ops device_ops = {.name = "two equal device ranks", .device_buffers = 1,
                                              .allreduce = device_allreduce, .wait_mark = device_wait_mark,
                                              .destroy = nothing};

struct run {
    struct dl_net net;
    struct dl_exec e;
};

static void start(struct run *r, const struct dl_device *dev)
{
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("grad_sync_device.yaml", NET, &r->net, &err), DL_OK);
    struct dl_exec_options o = {.device = dev};
    assert_int_equal(dl_exec_init(&r->e, &r->net.graph, BATCH, 7, &o, &err), DL_OK);
}

static void finish(struct run *r)
{
    dl_exec_free(&r->e);
    dl_net_free(&r->net);
}

/* One step of r's executor with its buckets summed by gs (this rank: half
 * of the global batch), the step's two metrics summed after them. */
static void step(struct run *r, struct dl_grad_sync *gs)
{
    static dl_real x[BATCH * 3 * 8 * 8];
    static const int labels[BATCH] = {0, 3, 1, 4};
    struct dl_rng rng;
    dl_rng_seed(&rng, 5);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (dl_real)dl_rng_normal(&rng);
    dl_exec_zero_grad(&r->e);
    began = dl_clock_now();
    dl_grad_sync_begin(gs, 0.5);
    dl_exec_forward(&r->e, x, labels, BATCH, 1);
    dl_exec_backward(&r->e);
    assert_int_equal(r->e.status, 0);
    double extra[2] = {dl_exec_loss_sum(&r->e), 1};
    struct dl_error err = {0};
    assert_int_equal(dl_grad_sync_end(gs, extra, 2, NULL, NULL, NULL, &err), DL_OK);
    assert_true(extra[1] == 2);
}

/* The gradients after one step of an executor on dev, its buckets over
 * comm or in place over device_comm (NULL: none), in host memory. */
static dl_real *gradients(const struct dl_device *dev, struct dl_comm *comm, struct dl_comm *device_comm, long *n)
{
    struct run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    start(r, dev);
    struct dl_grad_sync_opts o = {.algorithm = "native", .bucket_bytes = 256, .overlap = 1, .device_comm = device_comm};
    struct dl_grad_sync *gs = NULL;
    struct dl_error err = {0};
    assert_int_equal(dl_grad_sync_create(comm, &r->e, &o, &gs, &err), DL_OK);
    step(r, gs);
    *n = r->e.n_weights;
    dl_real *g = malloc(sizeof *g * (size_t)*n);
    assert_non_null(g);
    assert_int_equal(dl_exec_device(&r->e)->copy(g, r->e.dweights, sizeof *g * (size_t)*n, DL_COPY_TO_HOST, &err),
                     DL_OK);
    dl_grad_sync_free(gs);
    finish(r);
    free(r);
    return g;
}

static void buckets_staged_or_in_place_equal_the_host(void **state)
{
    struct dl_error err = {0};
    struct dl_comm *host = dl_comm_new(&host_ops, 0, 2, &err), *device = dl_comm_new(&device_ops, 0, 2, &err);
    assert_non_null(host);
    assert_non_null(device);
    long n_host, n_staged, n_in_place;
    dl_real *on_host = gradients(&dl_device_host, host, NULL, &n_host);
    int calls = host_calls;
    dl_real *staged = gradients(&dl_device_emulated, host, NULL, &n_staged);
    assert_true(host_calls - calls > 1); /* the buckets and the metrics, through host memory */
    calls = host_calls;
    dl_real *in_place = gradients(&dl_device_emulated, host, device, &n_in_place);
    assert_int_equal(host_calls - calls, 1); /* the metrics only */
    assert_true(device_calls > 1);
    assert_int_equal(marks_waited, device_calls); /* each bucket's allreduce after its mark, */
    assert_int_equal(stale_marks, 0);              /* recorded in this step */
    assert_int_equal(wrong_memory, 0);
    assert_int_equal(n_staged, n_host);
    assert_int_equal(n_in_place, n_host);
    assert_memory_equal(staged, on_host, sizeof *on_host * (size_t)n_host);
    assert_memory_equal(in_place, on_host, sizeof *on_host * (size_t)n_host);
    print_message("# %ld gradients: staged and in place on the device (%d buckets) as on the host\n", n_host,
                  device_calls);
    free(on_host);
    free(staged);
    free(in_place);
    dl_comm_close(host);
    dl_comm_close(device);
}

static void device_buffers_refused_on_the_host(void **state)
{
    struct dl_error err = {0};
    struct dl_comm *host = dl_comm_new(&host_ops, 0, 2, &err), *device = dl_comm_new(&device_ops, 0, 2, &err);
    struct run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    start(r, NULL);
    struct dl_grad_sync_opts o = {.device_comm = device};
    struct dl_grad_sync *gs = NULL;
    assert_int_equal(dl_grad_sync_create(host, &r->e, &o, &gs, &err), DL_ERR_INTERNAL);
    assert_null(gs);
    finish(r);
    free(r);
    dl_comm_close(host);
    dl_comm_close(device);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_staged_or_in_place_equal_the_host),
        cmocka_unit_test(device_buffers_refused_on_the_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
