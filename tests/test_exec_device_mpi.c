/* test_exec_device_mpi.c: run under mpirun on 2 ranks by
 * test_exec_device_mpi.sh.  The tensor group's communication steps of an
 * executor on a device without host memory (the emulated device), staged
 * through host mirrors over the group's communicator, or in place on the
 * device's memory over a communicator of device buffers (exec.h's
 * tensor_device_comm, NCCL on a GPU; compiled only, no GPU here).  The
 * communicator of device buffers is a stand-in: the grid's MPI tensor
 * group, declared device_buffers, that refuses any buffer that is not
 * emulated device memory and moves the bytes with the device's memory
 * opened; the host's communicator is the same group behind a wrapper that
 * refuses device memory.  Each rank's shard of a network (tp=2) runs one
 * forward and backward on the host, staged on the device and in place on
 * the device: the loss, the count of correct arg-maxes, the weights and
 * every gradient of the last two must equal the host's bit for bit, and
 * every collective the staged run made over the host's communicator for
 * a channel-block step, the in-place run made over the device's instead
 * (host calls staged - host calls in place = device calls > 0).  The
 * networks (tp_nets.h) split convolutions by filters and channels, gather,
 * slice and sum (reduce-scatter of a gathered input's gradient, allreduce
 * of a row-split fc's output and of an input used as it is), drop out
 * split features, add split tensors, and read one tensor by a split and a
 * whole consumer (a gathered or sliced gradient added to another's).  Rank 0 prints one TAP line per check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/device.h"
#include "core/rng.h"
#include "exec/exec.h"
#include "parallel/grid.h"
#include "spec/netfile.h"
#include "mpi_report.h"
#include "tp_nets.h"

#define BATCH 6

static struct dl_comm *world;

static const char *const NETS[][2] = {
    {"cnn", TP_NET_CNN},
    {"mlp", TP_NET_MLP},
    {"splits", TP_NET_SPLITS},
    /* tensors read by a split and a whole consumer: a whole one sliced for
     * a channel split and read whole by another layer (its gradient
     * gathered and added to the other's), a split one gathered for a whole
     * layer and read as it is by a channel split (the gathered gradient's
     * block added to the other's) */
    {"shared", "input: {shape: [4, 6, 6], classes: 4}\n"
               "layers:\n"
               "  - {name: c0, type: conv, filters: 8, kernel: 3, pad: 1, split: none}\n"
               "  - {name: c1, type: conv, filters: 4, kernel: 1, split: channels}\n"
               "  - {name: side, type: conv, filters: 4, kernel: 1, split: none, inputs: [c0]}\n"
               "  - {name: sum, type: add, inputs: [c1, side]}\n"
               "  - {name: c2, type: conv, filters: 8, kernel: 3, pad: 1, split: filters}\n"
               "  - {name: w2, type: tanh, split: none}\n"
               "  - {name: c3, type: conv, filters: 4, kernel: 1, split: channels, inputs: [c2]}\n"
               "  - {name: c4, type: conv, filters: 4, kernel: 1, split: none, inputs: [w2]}\n"
               "  - {name: sum2, type: add, inputs: [c3, c4]}\n"
               "  - {name: f1, type: fc, units: 4}\n"
               "loss: softmax_cross_entropy\n"},
};

/* Collectives through each stand-in, and buffers given to the wrong one. */
static int host_calls, device_calls, wrong_memory;

/* 1 when bytes at p are emulated device memory (its copy refuses any other). */
static int on_device(const void *p, size_t bytes)
{
    void *probe = malloc(bytes ? bytes : 1);
    struct dl_error err = {0};
    int yes = probe && dl_device_emulated.copy(probe, p, bytes, DL_COPY_TO_HOST, &err) == DL_OK;
    free(probe);
    return yes;
}

static struct dl_comm *inner(struct dl_comm *c)
{
    return c->impl;
}

/* Buffers where c's kind keeps them (device_buffers: the emulated
 * device's memory), counted; else an error. */
static int where(struct dl_comm *c, const void *a, const void *b, size_t bytes, struct dl_error *err)
{
    int dev = c->ops->device_buffers;
    (dev ? &device_calls : &host_calls)[0]++;
    if (on_device(a, bytes) != dev || on_device(b, bytes) != dev) {
        wrong_memory++;
        return dl_errorf(err, DL_ERR_COMM, "a %s buffer given to a communicator of %s buffers", dev ? "host" : "device",
                         dev ? "device" : "host");
    }
    if (dev)
        dl_device_work_begin(&dl_device_emulated); /* the stand-in's "GPU" reads and writes the device */
    return DL_OK;
}

static int done(struct dl_comm *c, int rc)
{
    if (c->ops->device_buffers)
        dl_device_work_end(&dl_device_emulated);
    return rc;
}

static int wrap_allreduce(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, struct dl_error *err)
{
    int rc = where(c, buf, buf, dl_dtype_size(dtype) * n, err);
    return rc ? rc : done(c, inner(c)->ops->allreduce(inner(c), buf, dtype, n, err));
}

static int wrap_reduce_scatter(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                               struct dl_error *err)
{
    size_t bytes = dl_dtype_size(dtype) * count;
    int rc = where(c, (const unsigned char *)send + (size_t)c->rank * bytes, recv, bytes, err);
    return rc ? rc : done(c, inner(c)->ops->reduce_scatter(inner(c), send, recv, dtype, count, err));
}

static int wrap_allgather(struct dl_comm *c, const void *send, void *recv, size_t bytes, struct dl_error *err)
{
    int rc = where(c, send, recv, bytes, err);
    return rc ? rc : done(c, inner(c)->ops->allgather(inner(c), send, recv, bytes, err));
}

static void nothing(struct dl_comm *c)
{
}

static const struct dl_comm_ops host_ops = {.name = "the tensor group, host memory only",
                                            .allreduce = wrap_allreduce, .reduce_scatter = wrap_reduce_scatter,
                                            .allgather = wrap_allgather, .destroy = nothing};
static const struct dl_comm_ops device_ops = {.name = "the tensor group, emulated device memory only",
                                              .device_buffers = 1, .allreduce = wrap_allreduce,
                                              .reduce_scatter = wrap_reduce_scatter, .allgather = wrap_allgather,
                                              .destroy = nothing};

static struct dl_comm *wrap(const struct dl_comm_ops *ops, struct dl_comm *group)
{
    struct dl_error err = {0};
    struct dl_comm *c = dl_comm_new(ops, group->rank, group->size, &err);
    if (c)
        c->impl = group;
    return c;
}

/* What one forward and backward of an executor left: in host memory. */
struct result {
    double loss;
    int correct;
    long n;
    dl_real *weights, *grads;
    char error[256];
};

static void run(const struct dl_graph *g, const struct dl_shard *shard, struct dl_comm *tensor,
                const struct dl_device *dev, struct dl_comm *device_comm, struct result *r)
{
    struct dl_error err = {0};
    struct dl_exec e;
    struct dl_exec_options o = {.shard = shard, .tensor_comm = tensor, .device = dev,
                                .tensor_device_comm = device_comm};
    memset(r, 0, sizeof *r);
    if (dl_exec_init(&e, g, BATCH, 11, &o, &err) != DL_OK) {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
        return;
    }
    int y[BATCH];
    float *x = tp_random_batch(g, BATCH, y);
    dl_exec_zero_grad(&e);
    dl_exec_forward(&e, x, y, BATCH, 1);
    r->loss = dl_exec_loss_sum(&e);
    r->correct = dl_exec_correct(&e);
    dl_exec_backward(&e);
    r->n = e.n_weights;
    r->weights = malloc(sizeof *r->weights * (size_t)(r->n ? r->n : 1));
    r->grads = malloc(sizeof *r->grads * (size_t)(r->n ? r->n : 1));
    const struct dl_device *d = dl_exec_device(&e);
    if (e.status)
        snprintf(r->error, sizeof r->error, "%s", e.err.msg);
    else if (d->copy(r->weights, e.weights, sizeof *r->weights * (size_t)r->n, DL_COPY_TO_HOST, &err) ||
             d->copy(r->grads, e.dweights, sizeof *r->grads * (size_t)r->n, DL_COPY_TO_HOST, &err))
        snprintf(r->error, sizeof r->error, "%s", err.msg);
    free(x);
    dl_exec_free(&e);
}

static void result_free(struct result *r)
{
    free(r->weights);
    free(r->grads);
}

/* 1 when b is a's bit for bit; else detail says where it is not. */
static int same(const struct result *a, const struct result *b, char *detail, size_t size)
{
    if (b->error[0]) {
        snprintf(detail, size, "%s", b->error);
        return 0;
    }
    if (memcmp(&a->loss, &b->loss, sizeof a->loss) || a->correct != b->correct || a->n != b->n) {
        snprintf(detail, size, "loss %.9g against %.9g, correct %d against %d, %ld weights against %ld", b->loss,
                 a->loss, b->correct, a->correct, b->n, a->n);
        return 0;
    }
    for (long i = 0; i < a->n; i++)
        if (memcmp(&a->weights[i], &b->weights[i], sizeof *a->weights) ||
            memcmp(&a->grads[i], &b->grads[i], sizeof *a->grads)) {
            snprintf(detail, size, "weight %ld: %.9g against %.9g, gradient %.9g against %.9g", i,
                     (double)b->weights[i], (double)a->weights[i], (double)b->grads[i], (double)a->grads[i]);
            return 0;
        }
    snprintf(detail, size, "%ld weights", a->n);
    return 1;
}

static void check_net(const char *name, const struct dl_net *net)
{
    const struct dl_graph *g = &net->graph;
    struct dl_error err = {0};
    char what[200], detail[300] = "";
    struct dl_grid_dims d = {1, 2, 1};
    struct dl_grid grid;
    struct dl_shard shard;
    int ok = dl_grid_open(world, &d, &grid, &err) == DL_OK;
    ok = ok && dl_shard_make(g, &d, 1, world->rank, NULL, &shard, &err) == DL_OK;
    snprintf(what, sizeof what, "%s on tp=2: set up", name);
    if (!mpi_report(world, ok, what, err.msg))
        return;
    struct dl_comm *host = wrap(&host_ops, grid.tensor), *device = wrap(&device_ops, grid.tensor);
    struct result on_host, staged, in_place;
    run(g, &shard, grid.tensor, NULL, NULL, &on_host);
    int h0 = host_calls;
    run(g, &shard, host, &dl_device_emulated, NULL, &staged);
    int h1 = host_calls, d1 = device_calls;
    run(g, &shard, host, &dl_device_emulated, device, &in_place);
    int host_staged = h1 - h0, host_in_place = host_calls - h1, on_device_calls = device_calls - d1;

    snprintf(what, sizeof what, "%s on tp=2: staged on the device as on the host, bit for bit", name);
    ok = !on_host.error[0];
    if (!ok)
        snprintf(detail, sizeof detail, "the host: %s", on_host.error);
    mpi_report(world, ok && same(&on_host, &staged, detail, sizeof detail), what, detail);
    snprintf(what, sizeof what, "%s on tp=2: in place on the device as on the host, bit for bit", name);
    mpi_report(world, ok && same(&on_host, &in_place, detail, sizeof detail), what, detail);
    snprintf(what, sizeof what, "%s on tp=2: the channel-block collectives moved to the communicator of device "
             "buffers (%d host calls staged, %d in place, %d device calls)", name, host_staged, host_in_place,
             on_device_calls);
    snprintf(detail, sizeof detail, "%d buffers given to the wrong communicator", wrong_memory);
    mpi_report(world, on_device_calls > 0 && host_staged - host_in_place == on_device_calls && !wrong_memory, what,
               detail);
    result_free(&on_host);
    result_free(&staged);
    result_free(&in_place);
    dl_comm_close(host);
    dl_comm_close(device);
    dl_shard_free(&shard);
    dl_grid_close(&grid);
}

/* A communicator of device buffers for an executor on the host, or of
 * another size than the tensor group: refused before anything runs. */
static void check_refused(const struct dl_net *net)
{
    struct dl_error err = {0};
    struct dl_grid_dims d = {1, 2, 1};
    struct dl_grid grid;
    struct dl_shard shard;
    int ok = dl_grid_open(world, &d, &grid, &err) == DL_OK;
    ok = ok && dl_shard_make(&net->graph, &d, 1, world->rank, NULL, &shard, &err) == DL_OK;
    if (!mpi_report(world, ok, "refusals: set up", err.msg))
        return;
    struct dl_comm *device = wrap(&device_ops, grid.tensor);
    struct dl_exec e;
    struct dl_exec_options o = {.shard = &shard, .tensor_comm = grid.tensor, .tensor_device_comm = device};
    int rc = dl_exec_init(&e, &net->graph, BATCH, 11, &o, &err);
    if (rc == DL_OK)
        dl_exec_free(&e);
    mpi_report(world, rc == DL_ERR_INTERNAL && strstr(err.msg, "device buffers"),
               "a communicator of device buffers is refused for an executor on the host", err.msg);
    o.tensor_device_comm = grid.tensor; /* host memory */
    o.device = &dl_device_emulated;
    rc = dl_exec_init(&e, &net->graph, BATCH, 11, &o, &err);
    if (rc == DL_OK)
        dl_exec_free(&e);
    mpi_report(world, rc == DL_ERR_INTERNAL && strstr(err.msg, "device buffers"),
               "a communicator of host buffers is refused as the tensor group's of device buffers", err.msg);
    dl_comm_close(device);
    dl_shard_free(&shard);
    dl_grid_close(&grid);
}

int main(int argc, char **argv)
{
    struct dl_error err = {0};
    if (dl_comm_open("mpi", &argc, &argv, &world, &err) != DL_OK) {
        printf("not ok - open mpi: %s\n", err.msg);
        return 1;
    }
    if (world->size != 2) {
        mpi_report(world, 0, "run on 2 ranks", "another count");
        dl_comm_close(world);
        return 1;
    }
    for (size_t k = 0; k < sizeof NETS / sizeof NETS[0]; k++) {
        struct dl_net net;
        if (dl_net_load_string(NETS[k][0], NETS[k][1], &net, &err) != DL_OK) {
            mpi_report(world, 0, NETS[k][0], err.msg);
            continue;
        }
        check_net(NETS[k][0], &net);
        if (k == 0)
            check_refused(&net);
        dl_net_free(&net);
    }
    dl_comm_close(world);
    return 0;
}
