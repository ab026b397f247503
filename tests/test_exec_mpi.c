/* test_exec_mpi.c: run under mpirun by test_exec_mpi.sh.  For every grid
 * of this many ranks (tensor x pipeline; data parallelism adds nothing to
 * one executor), each rank runs its shard of a network through one
 * forward and backward on the same batch as one process, and checks
 * against that process's executor (run on every rank): its initial weights
 * are exactly the slices of the serial ones, the loss (on the last stage)
 * and every gradient slice agree within float rounding.  The networks have
 * convolutions split both ways, batch norm, a residual add across the
 * splits, max pooling, dropout on split features (the mask each rank draws
 * for its channels must be one process's), a column/row fc pair and an odd
 * last fc whose class scores the loss reads split (label smoothing on one
 * net; gathered with split: none on another; the count of correct
 * arg-maxes agreed over the ranks, ties included), so every slice, gather,
 * sum and stage edge runs.  Each grid also runs with the backward split
 * into input- and weight-gradient passes (zb-h1; without tensor ranks on
 * the default kernels, whose weight gradients have calls of their own,
 * where the reference's come with the input gradients), and where the
 * network has the layers, with two stages per pipeline rank (interleaved;
 * on one rank the stages message each other).  Rank 0 prints one TAP line
 * per check ("ok - ..."), numbered by the script. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "exec/exec.h"
#include "parallel/grid.h"
#include "spec/netfile.h"
#include "mpi_report.h"
#include "tp_nets.h"

#define BATCH 6

static struct dl_comm *world;

/* name, network (tp_nets.h), and for explicit splits the tensor ranks must
 * divide this (else the shard must refuse, naming layer c2) */
static const char *const NETS[][3] = {
    {"cnn", TP_NET_CNN},
    {"mlp", TP_NET_MLP},
    {"splits", TP_NET_SPLITS, TP_NET_SPLITS_RANKS},
    {"height", TP_NET_HEIGHT},
};

static void report(int ok, const char *what, const char *detail)
{
    mpi_report(world, ok, what, detail);
}

/* Largest |a - b| over the slice of whole (the serial tensor) that local
 * holds; *scale raised to the largest |b| of the whole tensor. */
static double slice_diff(const struct dl_param_desc *p, const struct dl_param_slice *sl, const float *local,
                         const float *whole, double *scale)
{
    long stride = 1, extent = 1;
    if (sl->dim >= 0) {
        for (int d = sl->dim + 1; d < p->ndim; d++)
            stride *= p->dims[d];
        extent = p->dims[sl->dim];
    }
    double num = 0;
    for (long i = 0; i < p->count; i++) {
        *scale = fmax(*scale, fabs((double)whole[i]));
        long coord = sl->dim < 0 ? 0 : i / stride % extent;
        if (sl->dim >= 0 && (coord < sl->offset || coord >= sl->offset + sl->count))
            continue;
        long j = sl->dim < 0 ? i : i / (stride * extent) * (sl->count * stride) + (coord - sl->offset) * stride + i % stride;
        num = fmax(num, fabs((double)local[j] - whole[i]));
    }
    return num;
}

/* The largest difference between local's and whole's tensors (param[] or
 * dparam[]) of layer i, relative to the largest value of the layer's whole
 * tensors (a bias before batch norm has a gradient of rounding noise). */
static double layer_diff(const struct dl_graph *g, const struct dl_shard *sh, int i, float *const *local,
                         float *const *whole)
{
    double num = 0, scale = 1e-30;
    for (int j = 0; j < sh->local.layers[i].n_params; j++)
        if (local[j])
            num = fmax(num, slice_diff(&g->layers[i].param[j], &sh->layer[i].slice[j], local[j], whole[j], &scale));
    return num / scale;
}

/* A grid whose tensor ranks an explicit split does not fit: refused before
 * anything runs, naming the layer. */
static void check_refused(const char *name, const struct dl_net *net, const struct dl_grid_dims *d)
{
    struct dl_shard shard;
    struct dl_error err = {0};
    char what[128];
    snprintf(what, sizeof what, "%s on tp=%d,pp=%d is refused", name, d->tp, d->pp);
    int rc = dl_shard_make(&net->graph, d, 1, world->rank, NULL, &shard, &err);
    if (rc == DL_OK)
        dl_shard_free(&shard);
    report(rc == DL_ERR_SPEC && strstr(err.msg, "layer 'c2'"), what, rc ? err.msg : "it was accepted");
}

/* The count of correct arg-maxes of the forward (a, b: taken right after
 * it) against one process's; then, where the loss reads the logits layer's
 * output itself (not a gathered copy), on logits full of ties (values 0-2,
 * the largest several times in every sample, in several ranks' blocks) with
 * labels at the first largest class for some samples and at a later one for
 * others: the lowest class wins, as on one process. */
static int correct_as_serial(int a, int b, struct dl_exec *part, struct dl_exec *serial, const struct dl_shard *sh,
                             int *y, char *detail, size_t size)
{
    const struct dl_graph *g = sh->g;
    int C = g->classes, expect = 0;
    int cl = sh->local.layers[g->logits].out_shape.c, c0 = sh->layer[g->logits].split_out ? sh->pos.t * cl : 0;
    if (sh->layer[g->loss].in[0] != DL_TP_IN_AS_IS) {
        snprintf(detail, size, "correct %d against %d", a, b);
        return a == b;
    }
    for (int n = 0; n < BATCH; n++) {
        int first = -1, later = -1;
        for (int k = 0; k < C; k++) {
            float v = (float)((k * 7 + n) % 3);
            dl_tensor_f32(&serial->act[g->logits])[n * C + k] = v;
            if (k >= c0 && k < c0 + cl)
                dl_tensor_f32(&part->act[g->logits])[n * cl + k - c0] = v;
            if (v == 2 && first >= 0 && later < 0)
                later = k;
            if (v == 2 && first < 0)
                first = k;
        }
        y[n] = n % 3 == 2 && later >= 0 ? later : first; /* unevenly, so that the other rule's count differs */
        expect += y[n] == first;
    }
    int ta = dl_exec_correct(part), tb = dl_exec_correct(serial);
    snprintf(detail, size, "correct %d against %d; with ties %d against %d (expected %d)", a, b, ta, tb, expect);
    return a == b && ta == tb && tb == expect && !part->status;
}

/* One forward and backward of the rank's shard with V stages per pipeline
 * rank (one executor per stage, sharing the first's parameters; a chunk
 * goes through the stages in order and back), the backward whole or split
 * into input-gradient passes (last stage first) and weight-gradient passes
 * after all of them, against one process. */
static void check_grid(const char *name, const struct dl_net *net, const struct dl_grid_dims *d, int V, int split)
{
    const struct dl_graph *g = &net->graph;
    struct dl_error err = {0};
    char what[160], detail[256] = "";
    snprintf(what, sizeof what, "%s on tp=%d,pp=%d%s%s", name, d->tp, d->pp, V > 1 ? ", 2 stages per rank" : "",
             split ? ", backward split" : "");
    struct dl_kernel_choices ch = {0};
    if (!split || d->tp > 1)
        dl_kernel_choice_add(&ch, "all=reference", &err);
    struct dl_exec serial, part[2];
    struct dl_grid grid;
    struct dl_shard shard;
    int ok = dl_grid_open(world, d, &grid, &err) == DL_OK, made = 0;
    ok = ok && dl_shard_make(g, d, V, world->rank, NULL, &shard, &err) == DL_OK;
    struct dl_exec_options so = {.kernels = &ch}, po = {.kernels = &ch, .shard = &shard, .tensor_comm = grid.tensor,
                                                         .pipeline_comm = grid.pipeline, .split_backward = split};
    ok = ok && dl_exec_init(&serial, g, BATCH, 11, &so, &err) == DL_OK;
    for (int v = 0; ok && v < V; v++, made++) {
        po.stage = v;
        po.share_params = v ? &part[0] : NULL;
        ok = dl_exec_init(&part[v], g, BATCH, 11, &po, &err) == DL_OK;
    }
    if (!ok) {
        snprintf(detail, sizeof detail, "%s", err.msg);
        report(0, what, detail);
        return;
    }
    int y[BATCH];
    float *x = tp_random_batch(g, BATCH, y);
    double init = 0, grad = 0;
    for (int i = 0; i < g->n; i++)
        if (dl_shard_runs(&shard, i))
            init = fmax(init, layer_diff(g, &shard, i, part[0].param[i], serial.param[i]));
    snprintf(detail, sizeof detail, "initial weights differ by %.1e", init);
    report(init == 0, what, detail);
    int correct[2] = {0, 0}, loss_v = 0;
    dl_exec_zero_grad(&serial);
    dl_exec_forward(&serial, x, y, BATCH, 1);
    correct[0] = dl_exec_correct(&serial); /* a gathered copy of the logits lives until backward */
    dl_exec_backward(&serial);
    dl_exec_zero_grad(&part[0]);
    double part_loss = 0;
    for (int v = 0; v < V; v++) {
        dl_exec_forward(&part[v], x, y, BATCH, 1);
        part_loss += dl_exec_loss_sum(&part[v]);
        correct[1] += dl_exec_correct(&part[v]);
        if (g->loss >= part[v].first && g->loss < part[v].end)
            loss_v = v;
    }
    for (int v = V - 1; v >= 0; v--)
        split ? dl_exec_backward_input(&part[v]) : dl_exec_backward(&part[v]);
    for (int v = 0; split && v < V; v++)
        dl_exec_backward_weights(&part[v]);
    ok = !serial.status;
    for (int v = 0; v < V; v++) {
        dl_exec_sends_wait(&part[v]);
        if (part[v].status && ok) {
            snprintf(detail, sizeof detail, "%s", part[v].err.msg);
            ok = 0;
        }
    }
    if (serial.status)
        snprintf(detail, sizeof detail, "%s", serial.err.msg);
    double loss = dl_shard_runs(&shard, g->loss) ? fabs(part_loss - dl_exec_loss_sum(&serial)) /
                                                       fabs(dl_exec_loss_sum(&serial))
                                                 : 0;
    for (int i = 0; ok && i < g->n; i++) {
        if (!dl_shard_runs(&shard, i))
            continue;
        double dd = layer_diff(g, &shard, i, part[0].dparam[i], serial.dparam[i]);
        if (dd > grad)
            snprintf(detail, sizeof detail, "loss %.1e; layer '%s' gradients differ by %.1e", loss, g->layers[i].name, dd);
        grad = fmax(grad, dd);
    }
    char w2[260];
    snprintf(w2, sizeof w2, "%s: loss and gradients as one process (loss %.1e, gradients %.1e on rank 0)", what, loss,
             grad);
    report(ok && loss <= 1e-5 && grad <= 1e-5, w2, detail);
    if (ok && dl_shard_runs(&shard, g->loss))
        ok = correct_as_serial(correct[1], correct[0], &part[loss_v], &serial, &shard, y, detail, sizeof detail);
    snprintf(w2, sizeof w2, "%s: correct arg-maxes as one process (loss %s)", what,
             shard.layer[g->loss].split_classes ? "over split classes" : "on whole logits");
    report(ok, w2, detail);
    free(x);
    for (int v = made - 1; v >= 0; v--)
        dl_exec_free(&part[v]);
    dl_exec_free(&serial);
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
    int P = world->size;
    for (size_t k = 0; k < sizeof NETS / sizeof NETS[0]; k++) {
        struct dl_net net;
        if (dl_net_load_string(NETS[k][0], NETS[k][1], &net, &err) != DL_OK) {
            report(0, NETS[k][0], err.msg);
            continue;
        }
        for (int tp = 1; tp <= P; tp++)
            if (P % tp == 0) {
                struct dl_grid_dims d = {1, tp, P / tp};
                if (NETS[k][2] && atoi(NETS[k][2]) % tp) {
                    check_refused(NETS[k][0], &net, &d);
                    continue;
                }
                check_grid(NETS[k][0], &net, &d, 1, 0);
                check_grid(NETS[k][0], &net, &d, 1, 1);
                if (2 * d.pp < net.graph.n) /* room for two stages per pipeline rank */
                    check_grid(NETS[k][0], &net, &d, 2, tp == 1);
            }
        dl_net_free(&net);
    }
    dl_comm_close(world);
    return 0;
}
