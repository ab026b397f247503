/* test_exec_device.c: the executor's memory comes from its device
 * (exec.h's options.device): the arena, the weights, their gradients and
 * the non-trainable state are blocks that device allocated (and freed at
 * the end), the initial weights and state arrive by the device's copy,
 * and gradients are zeroed by the device's fill.  On a device without host
 * memory (device.h's host_memory 0), each forward copies the batch and
 * the labels in, backward copies the loss's gradient seed in, and the loss
 * and the scores for accuracy are copied out,
 * exactly those bytes; a gradient from several consumers is summed by the
 * device's accumulate.  The device here is the host's table with every
 * call recorded, so the executor may run; its results (initial weights and
 * state, loss, correct answers, gradients after a step) must be bit for
 * bit those of an executor on the plain host device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "exec/exec.h"
#include "spec/netfile.h"

static const char NET[] = "input: {shape: [3, 8, 8], classes: 5}\n"
                          "layers:\n"
                          "  - {type: conv, filters: 4, kernel: 3, pad: 1}\n"
                          "  - {type: batchnorm}\n"
                          "  - {type: relu}\n"
                          "  - {type: fc, units: 5}\n"
                          "loss: softmax_cross_entropy\n";
/* c1's output feeds r1 and the add: its gradient is a sum */
static const char RESIDUAL[] = "input: {shape: [3, 8, 8], classes: 5}\n"
                               "layers:\n"
                               "  - {type: conv, filters: 3, kernel: 3, pad: 1, name: c1}\n"
                               "  - {type: relu, name: r1}\n"
                               "  - {type: conv, filters: 3, kernel: 3, pad: 1, name: c2}\n"
                               "  - {type: add, inputs: [c1, c2], name: a}\n"
                               "  - {type: fc, units: 5}\n"
                               "loss: softmax_cross_entropy\n";
#define BATCH 4

/* ---------------------------------------------------------------- the recording device */
#define MAX_BLOCKS 64
static struct block {
    void *p;
    size_t bytes;
    int live;
} blocks[MAX_BLOCKS];
static int n_blocks;
static long to_device_bytes, to_host_bytes, filled_bytes, accumulated;
/* 1: what is copied to the device is overwritten on the host afterwards
 * (all bits set: NaN values, label -1), so that anything the executor
 * reads from the host's batch instead of the device's copy shows. */
static int poison_sources;

static void *rec_alloc(size_t bytes, struct dl_error *err)
{
    void *p = dl_device_host.alloc(bytes, err);
    if (p && n_blocks < MAX_BLOCKS)
        blocks[n_blocks++] = (struct block){p, bytes, 1};
    return p;
}

static void rec_free(void *p)
{
    for (int i = 0; i < n_blocks && p; i++)
        if (blocks[i].p == p && blocks[i].live)
            blocks[i].live = 0;
    dl_device_host.free(p);
}

static int rec_copy(void *dst, const void *src, size_t bytes, enum dl_copy_dir dir, struct dl_error *err)
{
    if (dir == DL_COPY_TO_HOST)
        to_host_bytes += (long)bytes;
    if (dir != DL_COPY_TO_DEVICE)
        return dl_device_host.copy(dst, src, bytes, dir, err);
    to_device_bytes += (long)bytes;
    int rc = dl_device_host.copy(dst, src, bytes, dir, err);
    if (poison_sources)
        memset((void *)src, 0xff, bytes); /* the test's own batch and labels, or staging buffers */
    return rc;
}

static int rec_fill(void *dst, int byte, size_t bytes, struct dl_error *err)
{
    filled_bytes += (long)bytes;
    return dl_device_host.fill(dst, byte, bytes, err);
}

static int rec_accumulate(void *dst, const void *src, long n, enum dl_dtype dtype, struct dl_error *err)
{
    accumulated += n;
    return dl_device_host.accumulate(dst, src, n, dtype, err);
}

/* The live block [p, p + bytes) lies in, or NULL. */
static const struct block *block_of(const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (int i = 0; i < n_blocks; i++) {
        const unsigned char *b = blocks[i].p;
        if (blocks[i].live && c >= b && c + bytes <= b + blocks[i].bytes)
            return &blocks[i];
    }
    return NULL;
}

static int live_blocks(void)
{
    int n = 0;
    for (int i = 0; i < n_blocks; i++)
        n += blocks[i].live;
    return n;
}

/* ---------------------------------------------------------------- tests */
struct run {
    struct dl_net net;
    struct dl_exec e;
};

static void start_net(struct run *r, const struct dl_device *dev, const char *net)
{
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("exec_device.yaml", net, &r->net, &err), DL_OK);
    struct dl_exec_options o = {.device = dev};
    assert_int_equal(dl_exec_init(&r->e, &r->net.graph, BATCH, 7, &o, &err), DL_OK);
}

static void start(struct run *r, const struct dl_device *dev)
{
    start_net(r, dev, NET);
}

static void train_step(struct run *r)
{
    static dl_real x[BATCH * 3 * 8 * 8];
    static int labels[BATCH];
    memcpy(labels, (int[BATCH]){0, 3, 1, 4}, sizeof labels);
    struct dl_rng rng;
    dl_rng_seed(&rng, 5);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (dl_real)dl_rng_normal(&rng);
    dl_exec_forward(&r->e, x, labels, BATCH, 1);
    dl_exec_zero_grad(&r->e);
    dl_exec_backward(&r->e);
    assert_int_equal(r->e.status, 0);
}

/* The host's table with every call recorded; host_memory as given. */
static struct dl_device recording(int host_memory)
{
    struct dl_device rec = dl_device_host;
    rec.alloc = rec_alloc, rec.free = rec_free, rec.copy = rec_copy, rec.fill = rec_fill;
    rec.accumulate = rec_accumulate;
    rec.host_memory = host_memory;
    n_blocks = 0, to_device_bytes = 0, to_host_bytes = 0, filled_bytes = 0, accumulated = 0, poison_sources = 0;
    return rec;
}

static void memory_from_the_device(void **state)
{
    struct dl_device rec = recording(1);
    struct run *dev = calloc(1, sizeof *dev), *host = calloc(1, sizeof *host);
    start(dev, &rec);
    start(host, NULL);
    struct dl_exec *e = &dev->e;
    size_t wb = sizeof(dl_real) * (size_t)e->n_weights, sb = sizeof(dl_real) * (size_t)e->n_state;
    assert_true(e->n_weights > 0 && e->n_state > 0); /* batch norm's running statistics are state */
    const struct block *w = block_of(e->weights, wb), *g = block_of(e->dweights, wb), *s = block_of(e->state, sb);
    assert_non_null(w);
    assert_non_null(g);
    assert_non_null(s);
    assert_true(w != g && g != s && w != s);
    assert_non_null(block_of(e->act[0].data, sizeof(dl_real))); /* activations: the arena */
    /* initial values copied over, the same as drawn for the host */
    assert_true(to_device_bytes >= (long)(wb + sb));
    assert_memory_equal(e->weights, host->e.weights, wb);
    assert_memory_equal(e->state, host->e.state, sb);
    long filled = filled_bytes;
    train_step(dev);
    train_step(host);
    assert_true(filled_bytes - filled >= (long)wb); /* dl_exec_zero_grad through the device */
    double ld = dl_exec_loss_sum(e), lh = dl_exec_loss_sum(&host->e);
    assert_memory_equal(&ld, &lh, sizeof ld);
    assert_memory_equal(e->dweights, host->e.dweights, wb);
    assert_memory_equal(e->state, host->e.state, sb);
    print_message("# %d blocks from the device (weights %zu, state %zu bytes), %ld bytes copied to it, %ld filled\n",
                  n_blocks, wb, sb, to_device_bytes, filled_bytes);
    dl_exec_free(e);
    assert_int_equal(live_blocks(), 0); /* everything given back to the device */
    dl_exec_free(&host->e);
    dl_net_free(&dev->net);
    dl_net_free(&host->net);
    free(dev);
    free(host);
}

/* A device whose memory the host does not touch: the batch and labels go
 * in by copies, the losses and scores come out by copies, nothing more. */
static void batch_in_results_out(void **state)
{
    struct dl_device rec = recording(0);
    struct run *dev = calloc(1, sizeof *dev), *host = calloc(1, sizeof *host);
    start(dev, &rec);
    start(host, NULL);
    long in_count = (long)BATCH * dl_shape_count(dev->net.graph.input), classes = 5;
    long before = to_device_bytes;
    poison_sources = 1;
    train_step(dev);
    poison_sources = 0;
    train_step(host);
    /* the batch, its labels, and the loss's gradient seed (1/batch per sample) */
    assert_int_equal(to_device_bytes - before,
                     (long)sizeof(dl_real) * in_count + (long)sizeof(int) * BATCH + (long)sizeof(dl_real) * BATCH);
    before = to_host_bytes;
    double ld = dl_exec_loss_sum(&dev->e), lh = dl_exec_loss_sum(&host->e);
    assert_int_equal(to_host_bytes - before, (long)sizeof(dl_real) * BATCH);
    assert_memory_equal(&ld, &lh, sizeof ld);
    before = to_host_bytes;
    int cd = dl_exec_correct(&dev->e), ch = dl_exec_correct(&host->e);
    assert_int_equal(to_host_bytes - before, (long)sizeof(dl_real) * BATCH * classes);
    assert_int_equal(cd, ch);
    size_t wb = sizeof(dl_real) * (size_t)dev->e.n_weights;
    assert_memory_equal(dev->e.dweights, host->e.dweights, wb);
    print_message("# %ld bytes in, loss %.9g and %d of %d correct out, as on the host\n",
                  (long)sizeof(dl_real) * in_count + (long)sizeof(int) * BATCH, ld, cd, BATCH);
    dl_exec_free(&dev->e);
    assert_int_equal(live_blocks(), 0);
    dl_exec_free(&host->e);
    dl_net_free(&dev->net);
    dl_net_free(&host->net);
    free(dev);
    free(host);
}

/* A gradient from two consumers is summed by the device's accumulate:
 * c1's output (batch x 3 x 8 x 8 values), with the host's results. */
static void gradient_sums_on_the_device(void **state)
{
    struct dl_device rec = recording(0);
    struct run *dev = calloc(1, sizeof *dev), *host = calloc(1, sizeof *host);
    start_net(dev, &rec, RESIDUAL);
    start_net(host, NULL, RESIDUAL);
    train_step(dev);
    train_step(host);
    assert_int_equal(accumulated, (long)BATCH * 3 * 8 * 8);
    double ld = dl_exec_loss_sum(&dev->e), lh = dl_exec_loss_sum(&host->e);
    assert_memory_equal(&ld, &lh, sizeof ld);
    assert_memory_equal(dev->e.dweights, host->e.dweights, sizeof(dl_real) * (size_t)dev->e.n_weights);
    print_message("# %ld gradient values summed on the device, as on the host\n", accumulated);
    dl_exec_free(&dev->e);
    dl_exec_free(&host->e);
    dl_net_free(&dev->net);
    dl_net_free(&host->net);
    free(dev);
    free(host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_from_the_device),
        cmocka_unit_test(batch_in_results_out),
        cmocka_unit_test(gradient_sums_on_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
