/* tp_nets.h: small networks whose shards over tensor ranks take every
 * kind of communication step, for the tests that run executors of a grid
 * under mpirun (test_exec_mpi, test_exec_device_mpi). */
#ifndef DL_TESTS_TP_NETS_H
#define DL_TESTS_TP_NETS_H

#include <stdint.h>
#include <stdlib.h>

#include "core/rng.h"
#include "graph/graph.h"

/* convolutions split both ways, batch norm, a residual add across the
 * splits, max pooling, a column/row fc pair, dropout on split features and
 * an odd last fc whose class scores the loss reads split */
#define TP_NET_CNN \
    "input: {shape: [3, 8, 8], classes: 6}\n" \
    "layers:\n" \
    "  - {name: c1, type: conv, filters: 8, kernel: 3, pad: 1}\n" \
    "  - {name: bn1, type: batchnorm}\n" \
    "  - {name: r1, type: relu}\n" \
    "  - {name: c2, type: conv, filters: 4, kernel: 3, pad: 1}\n" \
    "  - {name: r2, type: tanh}\n" \
    "  - {name: c3, type: conv, filters: 4, kernel: 1}\n" \
    "  - {name: sum, type: add, inputs: [c3, r2]}\n" \
    "  - {name: pool, type: maxpool, kernel: 2, stride: 2}\n" \
    "  - {name: f1, type: fc, units: 12}\n" \
    "  - {name: s1, type: sigmoid}\n" \
    "  - {name: f2, type: fc, units: 8}\n" \
    "  - {name: d1, type: dropout, rate: 0.4}\n" \
    "  - {name: f3, type: fc, units: 6}\n" \
    "loss: softmax_cross_entropy\n"

/* fc layers split by columns and rows, a label-smoothed loss */
#define TP_NET_MLP \
    "input: {shape: [12, 1, 1], classes: 4}\n" \
    "layers:\n" \
    "  - {name: f1, type: fc, units: 16}\n" \
    "  - {name: a1, type: tanh}\n" \
    "  - {name: f2, type: fc, units: 8}\n" \
    "  - {name: a2, type: leaky_relu}\n" \
    "  - {name: f3, type: fc, units: 4}\n" \
    "loss: {type: softmax_cross_entropy, label_smoothing: 0.1}\n"

/* every other way in: a filter split of a split input (gathered, its
 * gradient reduce-scattered), a whole layer after a split one
 * (gathered, its gradient cut), a row split of a whole input (sliced,
 * its gradient allgathered) */
#define TP_NET_SPLITS \
    "input: {shape: [4, 6, 6], classes: 4}\n" \
    "layers:\n" \
    "  - {name: c1, type: conv, filters: 8, kernel: 3, pad: 1}\n" \
    "  - {name: c2, type: conv, filters: 8, kernel: 3, pad: 1, split: filters}\n" \
    "  - {name: r2, type: relu, split: none}\n" \
    "  - {name: c3, type: conv, filters: 4, kernel: 1, split: channels}\n" \
    "  - {name: f1, type: fc, units: 8, split: row}\n" \
    "  - {name: f2, type: fc, units: 4}\n" \
    "loss: {type: softmax_cross_entropy, split: none}\n"
/* the tensor ranks must divide this (else the shard refuses, naming layer c2) */
#define TP_NET_SPLITS_RANKS "8"

/* spatial: bands of 10 rows (uneven on 3 and 4 ranks) cut from a
 * filter-split tensor (its channels gathered first), through
 * convolutions with halos of 1 and 2 rows (a dilated one), batch norm on
 * bands, a 1x1 convolution and an add that keep the bands (its whole
 * second input cut to the band), then gathered for a stride-2
 * convolution split by filters */
#define TP_NET_HEIGHT \
    "input: {shape: [3, 10, 6], classes: 4}\n" \
    "layers:\n" \
    "  - {name: c0, type: conv, filters: 4, kernel: 1}\n" \
    "  - {name: c1, type: conv, filters: 4, kernel: 3, pad: 1, split: height}\n" \
    "  - {name: bn1, type: batchnorm}\n" \
    "  - {name: r1, type: relu}\n" \
    "  - {name: c2, type: conv, filters: 5, kernel: 3, pad: 2, dilation: 2}\n" \
    "  - {name: r2, type: tanh}\n" \
    "  - {name: c3, type: conv, filters: 4, kernel: 1}\n" \
    "  - {name: side, type: conv, filters: 4, kernel: 1, split: none, inputs: [c0]}\n" \
    "  - {name: sum, type: add, inputs: [c3, side]}\n" \
    "  - {name: down, type: conv, filters: 4, kernel: 3, stride: 2, pad: 1}\n" \
    "  - {name: f1, type: fc, units: 4}\n" \
    "loss: softmax_cross_entropy\n"

/* The tests' batch of n samples for g: inputs normal, labels uniform over
 * its classes, from seed 3 (x: malloc'd, the caller frees it). */
static inline float *tp_random_batch(const struct dl_graph *g, int n, int *y)
{
    long count = (long)n * dl_shape_count(g->input);
    float *x = malloc(sizeof *x * (size_t)count);
    struct dl_rng r;
    dl_rng_seed(&r, 3);
    for (long i = 0; i < count; i++)
        x[i] = (float)dl_rng_normal(&r);
    for (int k = 0; k < n; k++)
        y[k] = (int)dl_rng_below(&r, (uint64_t)g->classes);
    return x;
}

#endif
