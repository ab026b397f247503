/* test_shard.c: a rank's view of the network for tensor parallelism (the
 * executor's equivalence with one process is tested under mpirun).  The
 * default rule pairs fc layers column/row and alternates convolutions
 * filters/channels, channel-local layers follow their inputs, the loss
 * reads class-split logits as they are (gathered with split: none or
 * fewer than 2 classes a rank); every parameter's slices over the tensor ranks
 * tile the whole tensor exactly once (an input split's bias on rank 0);
 * a layer the tensor ranks do not divide stays whole (auto) or is refused
 * (explicit split); pipeline ranks get their stage's layers, or with
 * interleaved stages their V stages' layers, and the tensors crossing the
 * cuts are listed once per reading stage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/shard.h"
#include "spec/netfile.h"

static const char *const CNN =
    "input: {shape: [3, 8, 8], classes: 6}\n"
    "layers:\n"
    "  - {name: c1, type: conv, filters: 8, kernel: 3, pad: 1}\n"
    "  - {name: bn1, type: batchnorm}\n"
    "  - {name: r1, type: relu}\n"
    "  - {name: c2, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: r2, type: relu}\n"
    "  - {name: c3, type: conv, filters: 4, kernel: 1}\n"
    "  - {name: sum, type: add, inputs: [c3, r2]}\n"
    "  - {name: pool, type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: f1, type: fc, units: 12}\n"
    "  - {name: f2, type: fc, units: 6}\n"
    "loss: softmax_cross_entropy\n";

static void load(const char *text, struct dl_net *net)
{
    struct dl_error err = {0};
    int rc = dl_net_load_string("net.yaml", text, net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

static void make(const struct dl_net *net, int dp, int tp, int pp, int rank, struct dl_shard *s)
{
    struct dl_grid_dims d = {dp, tp, pp};
    struct dl_error err = {0};
    int rc = dl_shard_make(&net->graph, &d, 1, rank, NULL, s, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

static const struct dl_shard_layer *L(const struct dl_shard *s, const char *name)
{
    int i = dl_graph_find(s->g, name);
    assert_true(i >= 0);
    return &s->layer[i];
}

static const struct dl_layer *V(const struct dl_shard *s, const char *name)
{
    return &s->local.layers[dl_graph_find(s->g, name)];
}

static void default_rule(void **state)
{
    struct dl_net net;
    load(CNN, &net);
    struct dl_shard s;
    make(&net, 1, 2, 1, 1, &s);
    assert_true(L(&s, "c1")->by_output && L(&s, "c1")->split_out && L(&s, "c1")->in[0] == DL_TP_IN_AS_IS);
    assert_int_equal(V(&s, "c1")->out_shape.c, 4);
    assert_true(L(&s, "bn1")->split_out && V(&s, "bn1")->param[0].count == 4); /* channel-local, its own channels */
    assert_true(L(&s, "r1")->split_out);
    assert_true(L(&s, "c2")->by_input && L(&s, "c2")->partial && !L(&s, "c2")->split_out);
    assert_int_equal(V(&s, "c2")->in_shape[0].c, 4);
    assert_int_equal(V(&s, "c2")->n_params, 1); /* the bias of an input split lives on tensor rank 0 */
    assert_true(L(&s, "c3")->by_output);
    assert_true(L(&s, "sum")->split_out && L(&s, "sum")->in[0] == DL_TP_IN_AS_IS && L(&s, "sum")->in[1] == DL_TP_IN_SLICE);
    assert_true(L(&s, "pool")->split_out);
    assert_true(L(&s, "f1")->by_input && V(&s, "f1")->in_shape[0].c == 2); /* channel blocks as row blocks */
    assert_true(L(&s, "f2")->by_output && V(&s, "f2")->out_shape.c == 3);
    const struct dl_shard_layer *loss = &s.layer[s.g->loss];
    assert_true(loss->split_classes && loss->in[0] == DL_TP_IN_AS_IS && !loss->split_out); /* no gather */
    assert_int_equal(s.local.layers[s.g->loss].in_shape[0].c, 3);
    dl_shard_free(&s);
    make(&net, 1, 2, 1, 0, &s);
    assert_int_equal(V(&s, "c2")->n_params, 2);
    dl_shard_free(&s);
    dl_net_free(&net);
}

/* Every parameter's slices over the T tensor ranks tile the whole tensor once. */
static void slices_tile(const struct dl_net *net, int T)
{
    const struct dl_graph *g = &net->graph;
    struct dl_shard *s = calloc((size_t)T, sizeof *s);
    for (int t = 0; t < T; t++)
        make(net, 1, T, 1, t, &s[t]);
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            const struct dl_param_desc *whole = &g->layers[i].param[j];
            long covered = 0;
            int holders = 0;
            for (int t = 0; t < T; t++) {
                const struct dl_layer *v = &s[t].local.layers[i];
                if (j >= v->n_params)
                    continue;
                const struct dl_param_slice *sl = &s[t].layer[i].slice[j];
                holders++;
                if (sl->dim < 0) {
                    assert_int_equal(v->param[j].count, whole->count);
                    covered = whole->count;
                    continue;
                }
                assert_int_equal(sl->offset, (long)sl->count * t); /* block t, in order */
                assert_int_equal(v->param[j].count * whole->dims[sl->dim], whole->count * sl->count);
                covered += v->param[j].count;
            }
            assert_true(holders >= 1);
            assert_int_equal(covered, whole->count);
        }
    for (int t = 0; t < T; t++)
        dl_shard_free(&s[t]);
    free(s);
}

static void slices(void **state)
{
    struct dl_net net;
    load(CNN, &net);
    slices_tile(&net, 2);
    slices_tile(&net, 4);
    dl_net_free(&net);
}

static void refused_or_whole(void **state)
{
    struct dl_net net;
    load(CNN, &net);
    struct dl_shard s;
    make(&net, 1, 3, 1, 0, &s); /* 3 divides nothing here but f1's 12 units */
    assert_true(L(&s, "c1")->split == DL_SPLIT_NONE && L(&s, "c1")->whole_because);
    assert_true(L(&s, "f1")->by_output);
    dl_shard_free(&s);
    dl_net_free(&net);
    static const char *const bad[][2] = {
        {"  - {name: c, type: conv, filters: 6, kernel: 1, split: filters}\n", "4 tensor ranks do not divide its 6 outputs"},
        {"  - {name: c, type: conv, filters: 8, kernel: 1, split: channels}\n", "do not divide its 3 input channels"},
        {"  - {name: c, type: relu, split: column}\n", "this layer follows its input"},
        {"  - {name: c, type: conv, filters: 8, kernel: 3, stride: 2, pad: 1, split: height}\n",
         "only stride-1 'same' convolutions are split by height (stride 1 and 2 x pad"},
        {"  - {name: c, type: conv, filters: 8, kernel: 3, split: height}\n", "only stride-1 'same' convolutions"},
        {"  - {name: c, type: conv, filters: 8, kernel: 5, pad: 2, split: height}\n",
         "bands of 1 of its 4 rows on 4 tensor ranks are thinner than the 2 rows"},
        {"  - {name: c, type: maxpool, kernel: 2, split: height}\n",
         "only stride-1 'same' convolutions are split by height; element-wise layers, add and batch norm follow"},
        {"  - {name: c, type: relu, split: height}\n", "follow a height-split input (leave split out)"},
        {"  - {name: c, type: fc, units: 4, split: height}\n", "only stride-1 'same' convolutions"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, "input: {shape: [3, 4, 4], classes: 2}\nlayers:\n%s  - {name: f, type: fc, units: 2}\n"
                 "loss: softmax_cross_entropy\n", bad[k][0]);
        load(text, &net);
        struct dl_grid_dims d = {1, 4, 1};
        struct dl_error err = {0};
        assert_int_equal(dl_shard_make(&net.graph, &d, 1, 0, NULL, &s, &err), DL_ERR_SPEC);
        print_message("# %s\n", err.msg);
        assert_non_null(strstr(err.msg, "layer 'c'"));
        assert_non_null(strstr(err.msg, bad[k][1]));
        dl_net_free(&net);
    }
}

/* The loss over a column-split last layer takes its class blocks as they
 * are; split: none on the loss gathers them, and so does a grid that would
 * leave a rank fewer than 2 classes (said, as for a layer that stays
 * whole); a last layer the tensor ranks do not divide stays whole and the
 * loss reads it whole. */
static void class_split_loss(void **state)
{
    static const char *const head = "input: {shape: [5, 1, 1], classes: %d}\nlayers:\n"
                                     "  - {name: f1, type: fc, units: %d}\nloss: %s\n";
    static const struct {
        int classes, T;
        const char *loss;
        int split_classes, gather, whole;
    } cases[] = {
        {6, 2, "softmax_cross_entropy", 1, 0, 0},
        {6, 3, "{type: softmax_cross_entropy, label_smoothing: 0.1}", 1, 0, 0},
        {6, 2, "{type: softmax_cross_entropy, split: none}", 0, 1, 0},
        {4, 4, "softmax_cross_entropy", 0, 1, 1},
        {7, 2, "softmax_cross_entropy", 0, 0, 0},
        {7, 3, "softmax_cross_entropy", 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, head, cases[k].classes, cases[k].classes, cases[k].loss);
        struct dl_net net;
        load(text, &net);
        struct dl_shard s;
        for (int t = 0; t < cases[k].T; t++) {
            make(&net, 1, cases[k].T, 1, t, &s);
            const struct dl_shard_layer *loss = &s.layer[s.g->loss];
            if (t == 0)
                print_message("# %d classes on %d ranks, loss %s: split_classes %d, input %d\n", cases[k].classes,
                              cases[k].T, cases[k].loss, loss->split_classes, loss->in[0]);
            assert_int_equal(loss->split_classes, cases[k].split_classes);
            assert_int_equal(loss->in[0] == DL_TP_IN_GATHER, cases[k].gather);
            assert_int_equal(loss->whole_because != NULL, cases[k].whole);
            assert_int_equal(L(&s, "f1")->by_output, cases[k].classes % cases[k].T == 0);
            assert_int_equal(L(&s, "f1")->whole_because != NULL, cases[k].classes % cases[k].T != 0);
            if (loss->split_classes)
                assert_int_equal(s.local.layers[s.g->loss].in_shape[0].c, cases[k].classes / cases[k].T);
            dl_shard_free(&s);
        }
        dl_net_free(&net);
    }
}

/* Height splits: bands of rows (uneven: 10 rows on 4 ranks are 2, 3, 2, 3),
 * halos of pad rows around them and no padding in height in the local
 * convolution, whole weights, convolutions and row-local layers after one
 * keeping the bands (a whole second input of an add cut to the band), and
 * the bands gathered for a layer that needs whole rows (pooling, a
 * stride-2 convolution, which then splits by filters); fewer rows than
 * ranks is refused. */
static const char *const HEIGHT =
    "input: {shape: [3, 10, 6], classes: 4}\n"
    "layers:\n"
    "  - {name: side, type: conv, filters: 4, kernel: 1, split: none}\n"
    "  - {name: c1, type: conv, filters: 4, kernel: 3, pad: 1, split: height, inputs: [input]}\n"
    "  - {name: bn1, type: batchnorm}\n"
    "  - {name: c2, type: conv, filters: 4, kernel: [5, 3], pad: [2, 1]}\n"
    "  - {name: sum, type: add, inputs: [c2, side]}\n"
    "  - {name: down, type: conv, filters: 4, kernel: 3, stride: 2, pad: 1}\n"
    "  - {name: f1, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

static void height_split(void **state)
{
    struct dl_net net;
    load(HEIGHT, &net);
    static const int lo[4] = {0, 2, 5, 7}, rows[4] = {2, 3, 2, 3};
    for (int t = 0; t < 4; t++) {
        struct dl_shard s;
        make(&net, 1, 4, 1, t, &s);
        assert_true(L(&s, "c1")->split == DL_SPLIT_HEIGHT && L(&s, "c1")->split_rows && L(&s, "c1")->halo == 1);
        assert_int_equal(L(&s, "c1")->rows_in[0], DL_TP_IN_SLICE_ROWS);
        assert_int_equal(V(&s, "c1")->in_shape[0].h, rows[t] + 2);
        assert_int_equal(V(&s, "c1")->out_shape.h, rows[t]);
        assert_int_equal(V(&s, "c1")->param[0].count, 4 * 3 * 3 * 3); /* whole weights */
        assert_true(L(&s, "c1")->slice[0].dim == -1 && L(&s, "c1")->slice[1].dim == -1);
        assert_true(L(&s, "bn1")->split_rows && L(&s, "bn1")->rows_in[0] == DL_TP_IN_AS_IS);
        assert_int_equal(V(&s, "bn1")->out_shape.h, rows[t]);
        assert_true(L(&s, "c2")->split_rows && L(&s, "c2")->halo == 2); /* auto keeps the bands */
        assert_int_equal(V(&s, "c2")->in_shape[0].h, rows[t] + 4);
        assert_true(L(&s, "sum")->split_rows && L(&s, "sum")->rows_in[1] == DL_TP_IN_SLICE_ROWS);
        assert_int_equal(V(&s, "sum")->in_shape[1].h, rows[t]);
        assert_true(!L(&s, "down")->split_rows && L(&s, "down")->rows_in[0] == DL_TP_IN_GATHER_ROWS);
        assert_true(L(&s, "down")->by_output && V(&s, "down")->in_shape[0].h == 10);
        int b0, bn;
        dl_shard_band(10, 4, t, &b0, &bn);
        assert_true(b0 == lo[t] && bn == rows[t]);
        char how[200];
        print_message("# rank %d: c1 %s, sum %s, down %s\n", t, dl_shard_describe(&s, dl_graph_find(s.g, "c1"), how,
                      sizeof how), L(&s, "sum")->split_rows ? "bands" : "whole", L(&s, "down")->by_output ? "filters" : "?");
        dl_shard_free(&s);
    }
    slices_tile(&net, 2);
    slices_tile(&net, 4);
    dl_net_free(&net);
    load("input: {shape: [3, 3, 4], classes: 2}\nlayers:\n  - {name: c, type: conv, filters: 4, kernel: 3, pad: 1, "
         "split: height}\n  - {name: f, type: fc, units: 2}\nloss: softmax_cross_entropy\n", &net);
    struct dl_grid_dims d = {1, 4, 1};
    struct dl_error err = {0};
    struct dl_shard s;
    assert_int_equal(dl_shard_make(&net.graph, &d, 1, 0, NULL, &s, &err), DL_ERR_SPEC);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "layer 'c' (conv), split height: its 3 rows are fewer than the 4 tensor ranks"));
    dl_net_free(&net);
}

static void one_rank_and_pipeline(void **state)
{
    struct dl_net net;
    load(CNN, &net);
    struct dl_shard s;
    struct dl_error err = {0};
    assert_int_equal(dl_shard_whole(&net.graph, &s, &err), DL_OK);
    assert_true(s.V == 1 && s.n_edges == 0);
    for (int i = 0; i < net.graph.n; i++)
        assert_true(dl_shard_runs(&s, i) && s.layer[i].stage == 0);
    for (int i = 0; i < net.graph.n; i++) {
        assert_true(dl_shape_eq(s.local.layers[i].out_shape, net.graph.layers[i].out_shape));
        assert_int_equal(s.local.layers[i].n_params, net.graph.layers[i].n_params);
        assert_true(!net.graph.layers[i].n_params || s.layer[i].slice[0].dim == -1);
    }
    dl_shard_free(&s);
    int prev_end = 0;
    for (int p = 0; p < 3; p++) { /* dp=2 x pp=3: ranks 2p and 2p+1 hold stage p */
        for (int d = 0; d < 2; d++) {
            make(&net, 2, 1, 3, 2 * p + d, &s);
            assert_int_equal(s.pos.p, p);
            int first = s.stages.first[p], end = s.stages.first[p + 1];
            assert_int_equal(first, prev_end);
            assert_true(end > first);
            for (int i = 0; i < net.graph.n; i++)
                assert_int_equal(dl_shard_runs(&s, i), i >= first && i < end);
            if (d == 1)
                prev_end = end;
            dl_shard_free(&s);
        }
    }
    assert_int_equal(prev_end, net.graph.n);
    dl_net_free(&net);
}

/* Interleaved stages: pp=2 with 2 stages per rank cuts 4 stages; rank p
 * runs stages p and p+2 and nothing else, and the edges are exactly the
 * (layer, later stage reading it) pairs, the residual add's skip among them. */
static void interleaved_stages(void **state)
{
    struct dl_net net;
    load(CNN, &net);
    const struct dl_graph *g = &net.graph;
    for (int p = 0; p < 2; p++) {
        struct dl_shard s;
        struct dl_grid_dims d = {1, 1, 2};
        struct dl_error err = {0};
        assert_int_equal(dl_shard_make(g, &d, 2, p, NULL, &s, &err), DL_OK);
        assert_int_equal(s.stages.S, 4);
        assert_int_equal(s.V, 2);
        assert_int_equal(dl_shard_stage(&s, 0), p);
        assert_int_equal(dl_shard_stage(&s, 1), p + 2);
        for (int i = 0; i < g->n; i++) {
            int st = dl_stages_of(&s.stages, i);
            assert_int_equal(s.layer[i].stage, st);
            assert_int_equal(dl_shard_runs(&s, i), st == p || st == p + 2);
        }
        int want = 0;
        for (int l = 0; l < g->n; l++)
            for (int to = s.layer[l].stage + 1; to < 4; to++) {
                int reads = 0;
                for (int j = s.stages.first[to]; j < s.stages.first[to + 1]; j++)
                    for (int k = 0; k < g->layers[j].n_in; k++)
                        reads |= g->layers[j].in[k] == l;
                assert_int_equal(dl_shard_edge(&s, l, to) >= 0, reads);
                want += reads;
            }
        assert_int_equal(s.n_edges, want);
        assert_true(want >= 3); /* every cut, and a skip */
        dl_shard_free(&s);
    }
    /* 5 ranks x 3 stages = 15 stages for 10 layers: refused, naming V */
    struct dl_shard s;
    struct dl_grid_dims d = {1, 1, 5};
    struct dl_error err = {0};
    assert_int_equal(dl_shard_make(g, &d, 3, 0, NULL, &s, &err), DL_ERR_SPEC);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "5 pipeline ranks x 3 virtual stages"));
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_rule),
        cmocka_unit_test(slices),
        cmocka_unit_test(refused_or_whole),
        cmocka_unit_test(class_split_loss),
        cmocka_unit_test(height_split),
        cmocka_unit_test(one_rank_and_pipeline),
        cmocka_unit_test(interleaved_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
