/* test_planner.c: the planner (doc/planner.md).  The stage cuts are the
 * best of every possible cut (brute force: least costliest stage, then
 * least largest memory) on random integer costs, where ties are common;
 * the search ranks exactly the layouts a brute-force enumeration of grids,
 * chunks and schedules finds, best first; the model's step time equals
 * its formula where the formula is exact (one rank: the layer times;
 * data parallelism: a rank's share plus the allreduce of every gradient,
 * or with small buckets the timeline of buckets overlapping backward,
 * worked out by hand; zb-h1 and interleaved:2: the simulator on stage
 * costs summed by hand, zb-h1's backward split into input and weight
 * gradients, interleaved's cuts on the link in both directions);
 * the memory of a rank equals what dl_pipeline_init's executors plan and
 * hold for every schedule (zb-h1's planned for backward in two passes,
 * interleaved's one executor per chunk in flight on each stage: their
 * arenas, weights, gradients, momentum and state; an expert rank's block
 * of a mixture of experts too); on a mixture of experts the brute force
 * takes every ep too, and the all-to-alls and the experts' sums over their
 * replicas equal their formulas; --link
 * parses and refuses bad values; the consistency models' exchanges equal
 * their formulas worked out by hand per rank (gossip's neighbours on or
 * off the node, local SGD's and EASGD's allreduce over the link). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/layer_times.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "core/parse.h"
#include "planner/consistency_cost.h"
#include "planner/cuts.h"
#include "planner/layout_memory.h"
#include "planner/tp_split_choice.h"
#include "planner/search.h"
#include "plan/stages.h"
#include "spec/netfile.h"
#include "train/pipeline.h"

/* A small CNN whose convolution and first fc split over 2 tensor ranks. */
static const char *const small_cnn =
    "input: {shape: [3, 12, 12], classes: 4}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, filters: 8, kernel: 3, pad: 1}\n"
    "  - {name: relu1, type: relu}\n"
    "  - {name: pool1, type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: conv2, type: conv, filters: 8, kernel: 3, pad: 1, split: filters}\n"
    "  - {name: relu2, type: relu}\n"
    "  - {name: pool2, type: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: fc1, type: fc, units: 16, split: column}\n"
    "  - {name: relu3, type: relu}\n"
    "  - {name: fc2, type: fc, units: 4, split: row}\n"
    "loss: softmax_cross_entropy\n";

/* An MLP whose fc layers leave their splits to the planner: pairs (fc1,
 * fc2) and (fc3, fc4). */
static const char *const free_mlp =
    "input: {shape: [1, 4, 4], classes: 4}\n"
    "layers:\n"
    "  - {name: flatten, type: flatten}\n"
    "  - {name: fc1, type: fc, units: 16}\n"
    "  - {name: relu1, type: relu}\n"
    "  - {name: fc2, type: fc, units: 16}\n"
    "  - {name: relu2, type: relu}\n"
    "  - {name: fc3, type: fc, units: 8}\n"
    "  - {name: relu3, type: relu}\n"
    "  - {name: fc4, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

/* A mixture of 4 experts (top 2, 8 units each) on 16 features: 64
 * router weights, 1,536 expert weights, the fc 68. */
static const char *const tiny_moe =
    "input: {shape: [1, 4, 4], classes: 4}\n"
    "layers:\n"
    "  - {name: flatten, type: flatten}\n"
    "  - {name: moe, type: moe, experts: 4, top_k: 2, units: 8}\n"
    "  - {name: fc, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

static void load_text(const char *text, struct dl_net *net)
{
    struct dl_error err = {0};
    int rc = dl_net_load_string("small.yaml", text, net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

static void load(struct dl_net *net)
{
    load_text(small_cnn, net);
}

/* A machine of one node with made-up but fixed parameters. */
static void machine(struct dl_machine *m, int K)
{
    memset(m, 0, sizeof *m);
    m->ranks_per_node = K;
    m->node.alpha = 2e-6;
    m->node.beta = 1e-9;
    m->node.gamma = 5e-10;
    m->node_source = "test";
    m->link_alpha = 5e-6;
    m->link_beta = 8e-11;
}

/* The best (cost, memory) over every cut of n items into P runs, lexicographic. */
static void brute_cuts(const double *c, const double *m, int n, int P, int start, double wc, double wm,
                       double *best_c, double *best_m)
{
    if (P == 1) {
        double sc = 0, sm = 0;
        for (int i = start; i < n; i++)
            sc += c[i], sm += m[i];
        sc = fmax(wc, sc), sm = fmax(wm, sm);
        if (sc < *best_c || (sc == *best_c && sm < *best_m))
            *best_c = sc, *best_m = sm;
        return;
    }
    double sc = 0, sm = 0;
    for (int end = start + 1; end <= n - (P - 1); end++) {
        sc += c[end - 1], sm += m[end - 1];
        brute_cuts(c, m, n, P - 1, end, fmax(wc, sc), fmax(wm, sm), best_c, best_m);
    }
}

static void cuts_are_optimal(void **state)
{
    (void)state;
    struct dl_rng rng;
    dl_rng_seed(&rng, 7);
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(dl_rng_below(&rng, 9)), P = 1 + (int)(dl_rng_below(&rng, (uint64_t)n));
        double c[9], m[9];
        for (int i = 0; i < n; i++) { /* small integers: many ties in the cost */
            c[i] = (double)dl_rng_below(&rng, 4);
            m[i] = (double)dl_rng_below(&rng, 10);
        }
        int first[10];
        double got_c, got_m, want_c = INFINITY, want_m = INFINITY;
        assert_int_equal(dl_cuts_balance(c, m, n, P, first, &got_c, &got_m, NULL), DL_OK);
        brute_cuts(c, m, n, P, 0, -INFINITY, -INFINITY, &want_c, &want_m);
        assert_true(got_c == want_c);
        assert_true(got_m == want_m);
        /* the cuts themselves achieve it, contiguous and non-empty */
        double mc = 0, mm = 0;
        assert_int_equal(first[0], 0);
        assert_int_equal(first[P], n);
        for (int s = 0; s < P; s++) {
            assert_true(first[s] < first[s + 1]);
            double sc = 0, sm = 0;
            for (int i = first[s]; i < first[s + 1]; i++)
                sc += c[i], sm += m[i];
            mc = fmax(mc, sc), mm = fmax(mm, sm);
        }
        assert_true(mc == want_c && mm == want_m);
    }
    int first[3];
    assert_int_equal(dl_cuts_balance((double[]){1, 2}, (double[]){1, 2}, 2, 3, first, NULL, NULL, NULL), DL_ERR_SPEC);
}

static void flop_times(const struct dl_graph *g, struct dl_layer_times *t, double rate)
{
    assert_int_equal(dl_layer_times_alloc(t, g->n, NULL), DL_OK);
    dl_layer_times_flops(g, rate, t);
}

/* Every layout of N ranks, built the way search.h says (bucket sizes
 * too), predicted: of the small CNN (its splits fixed) and of the free MLP, whose fc pairs (by
 * hand: fc1 fc2, fc3 fc4) each stay split or whole with tensor ranks. */
static void check_search(const char *text, int n_pairs, const int (*pair)[2])
{
    struct dl_net net;
    load_text(text, &net);
    const struct dl_graph *g = &net.graph;
    int first[DL_PLAN_MAX_PAIRS], second[DL_PLAN_MAX_PAIRS];
    assert_int_equal(dl_split_pairs(g, first, second), n_pairs);
    for (int k = 0; k < n_pairs; k++)
        assert_true(first[k] == pair[k][0] && second[k] == pair[k][1]);
    struct dl_graph split = *g;
    split.layers = calloc((size_t)g->n, sizeof *split.layers);
    struct dl_layer_times t;
    flop_times(g, &t, 1e9);
    for (int N = 1; N <= 8; N *= 2) {
        struct dl_machine m;
        machine(&m, 2); /* 2 ranks per node: larger grids cross the link */
        struct dl_plan_request req = {.g = g, .times = &t, .machine = &m, .ranks = N, .batch = 16};
        struct dl_plan_result r;
        assert_int_equal(dl_plan_search(&req, &r, NULL), DL_OK);
        int count = 0, whole_feasible = 0;
        for (int k = 0; k < r.n_feasible; k++)
            whole_feasible += r.c[r.rank[k]].layout.n_whole > 0;
        double best = INFINITY;
        double *cost = calloc((size_t)g->n, sizeof *cost), *mem = calloc((size_t)g->n, sizeof *mem);
        int experts = 0, with_ep = 0; /* a layer with experts (4 of them); ranked layouts with expert ranks */
        for (int i = 0; i < g->n; i++)
            experts |= g->layers[i].kind->expert_split != NULL;
        for (int k = 0; k < r.n_feasible; k++)
            with_ep += dl_grid_ep(&r.c[r.rank[k]].layout.dims) > 1;
        /* the bit above the pairs': convolutions by samples, when there is a
         * convolution with its split unset (the CNN's conv1; the MLP has none) */
        int free_conv = 0;
        for (int i = 0; i < g->n; i++)
            free_conv |= strcmp(g->layers[i].kind->name, "conv") == 0 && g->layers[i].split == DL_SPLIT_AUTO;
        for (int T = 1; T <= N; T++)
            for (int mask = 0; mask < (T > 1 ? 1 << (n_pairs + free_conv) : 1); mask++)
            for (int P = 1; T * P <= N; P++) {
                if (N % (T * P))
                    continue;
                int D = N / (T * P), local = (16 + D - 1) / D, by_samples = free_conv && (mask >> n_pairs & 1);
                memcpy(split.layers, g->layers, sizeof *g->layers * (size_t)g->n);
                for (int k = 0; k < n_pairs; k++)
                    if (mask & (1 << k))
                        split.layers[pair[k][0]].split = split.layers[pair[k][1]].split = DL_SPLIT_NONE;
                if (by_samples)
                    for (int i = 0; i < g->n; i++)
                        if (strcmp(g->layers[i].kind->name, "conv") == 0 && g->layers[i].split == DL_SPLIT_AUTO)
                            split.layers[i].split = DL_SPLIT_BATCH;
                struct dl_tp_view v;
                if (P > g->n - 1 || (P > 1 && local < P) || dl_tp_view_make(&split, T, N, &m, &v, NULL) != DL_OK)
                    continue;
                /* expert ranks: E dividing D and the experts (4), the batch (16) dividing over D */
                for (int E = 1; E <= D; E++)
                for (int M = P > 1 ? P : 1; M <= (P > 1 ? 8 * P : 1) && M <= local && (!by_samples || local / M >= T) &&
                                            (E == 1 || (experts && D % E == 0 && 4 % E == 0 && 16 % D == 0));
                     M *= 2)
                    for (int k = 0; k < (P > 1 ? 5 : 1); k++) {
                        static const enum dl_pipe_schedule kinds[] = {DL_SCHED_1F1B, DL_SCHED_GPIPE, DL_SCHED_ZB_H1,
                                                                      DL_SCHED_INTERLEAVED, DL_SCHED_INTERLEAVED};
                        static const int Vs[] = {1, 1, 1, 2, 4};
                        if (P * Vs[k] > g->n - 1)
                            continue;
                        struct dl_plan_layout l = {.dims = {D, T, P, 0, E > 1 ? E : 0}, .chunks = M,
                                                   .schedule = kinds[k], .V = Vs[k], .by_samples = by_samples};
                        dl_layout_layer_costs(g, &t, &v, &m, &l.dims, (double)local / M, cost);
                        for (int i = 0; i < g->n; i++)
                            mem[i] = 12.0 * dl_layout_rank_params(&v, &l.dims, i) +
                                     4.0 * (double)dl_shape_count(g->layers[i].out_shape) * local / M * v.share[i];
                        cost[g->n - 2] += cost[g->n - 1];
                        mem[g->n - 2] += mem[g->n - 1];
                        assert_int_equal(dl_cuts_balance(cost, mem, g->n - 1, P * Vs[k], l.first, NULL, NULL, NULL),
                                         DL_OK);
                        l.first[P * Vs[k]] = g->n;
                        /* with dp > 1 and one chunk: grad_sync's buckets, then 1 and 4 MiB */
                        static const size_t buckets[] = {0, 1 << 20, 4 << 20};
                        for (int q = 0; q < (D > 1 && M == 1 ? 3 : 1); q++) {
                            l.bucket_bytes = buckets[q];
                            struct dl_layout_prediction p;
                            assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
                            best = fmin(best, p.step_s);
                            count++;
                        }
                    }
                dl_tp_view_free(&v);
            }
        free(cost), free(mem);
        assert_int_equal(r.n_feasible, count);
        assert_true(n_pairs && N > 1 ? whole_feasible > 0 : whole_feasible == 0);
        assert_true(experts && N > 1 ? with_ep > 0 : with_ep == 0);
        assert_true(r.c[r.rank[0]].pred.step_s == best);
        for (int k = 1; k < r.n_feasible; k++)
            assert_true(r.c[r.rank[k - 1]].pred.step_s <= r.c[r.rank[k]].pred.step_s);
        dl_plan_result_free(&r);
    }
    free(split.layers);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

static void search_ranks_every_layout(void **state)
{
    (void)state;
    static const int pairs[2][2] = {{1, 3}, {5, 7}};
    check_search(small_cnn, 0, NULL);
    check_search(free_mlp, 2, pairs);
    check_search(tiny_moe, 0, NULL);
}

/* One rank: the layer times; dp = 4: a quarter of them plus the allreduce of every gradient. */
static void step_time_formulas(void **state)
{
    (void)state;
    struct dl_net net;
    load(&net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 2e9);
    struct dl_machine m;
    machine(&m, 4);
    double sum = 0;
    long params = 0;
    for (int i = 0; i < g->n; i++) {
        sum += t.fwd[i] + t.bwd[i];
        for (int j = 0; j < g->layers[i].n_params; j++)
            params += g->layers[i].param[j].trainable ? g->layers[i].param[j].count : 0;
    }
    struct dl_tp_view v;
    assert_int_equal(dl_tp_view_make(g, 1, 4, &m, &v, NULL), DL_OK);
    struct dl_plan_layout one = {.dims = {1, 1, 1}, .chunks = 1, .schedule = DL_SCHED_1F1B, .first = {0, g->n}};
    struct dl_layout_prediction p;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &one, 32, &p, NULL), DL_OK);
    assert_true(fabs(p.step_s - 32 * sum) <= 1e-12 * p.step_s);
    assert_true(p.dp_s == 0 && p.tp_s == 0 && p.bubble == 0);
    struct dl_plan_layout four = one;
    four.dims.dp = 4;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &four, 32, &p, NULL), DL_OK);
    double ar = dl_machine_allreduce(&m, 4, 0, 4.0 * (double)params);
    assert_true(ar > 0);
    assert_true(fabs(p.step_s - (8 * sum + ar)) <= 1e-12 * p.step_s);
    assert_true(fabs(p.dp_s - ar) <= 1e-15);
    /* Buckets of 1200 floats overlap backward (one chunk): fc2 (68
     * parameters) alone, fc1 (1168) alone, conv2 + conv1 (584 + 224), each
     * reduced when backward has passed its lowest layer, one after another. */
    four.bucket_bytes = 1200 * 4;
    m.node.beta = 1e-6; /* slow enough that the allreduces queue */
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &four, 32, &p, NULL), DL_OK);
    double B[10], F = 0, Btot = 0;
    for (int i = 0; i < g->n; i++) {
        B[i] = t.bwd[i] * 8;
        F += t.fwd[i] * 8;
        Btot += B[i];
    }
    double a1 = dl_machine_allreduce(&m, 4, 0, 68 * 4.0), a2 = dl_machine_allreduce(&m, 4, 0, 1168 * 4.0);
    double a3 = dl_machine_allreduce(&m, 4, 0, 808 * 4.0);
    double e1 = B[9] + B[8] + a1, r2 = B[9] + B[8] + B[7] + B[6];
    double e2 = fmax(r2, e1) + a2, e3 = fmax(Btot, e2) + a3;
    assert_true(e3 > Btot);
    assert_true(fabs(p.dp_s - (a1 + a2 + a3)) <= 1e-12 * p.dp_s);
    assert_true(fabs(p.dp_exposed_s - (e3 - Btot)) <= 1e-12 * p.dp_exposed_s);
    assert_true(fabs(p.step_s - (F + Btot + e3 - Btot)) <= 1e-12 * p.step_s);
    assert_true(p.dp_exposed_s < p.dp_s);
    /* with chunks the trainer does not overlap: all of it after backward */
    four.chunks = 2;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &four, 32, &p, NULL), DL_OK);
    ar = dl_machine_allreduce(&m, 4, 0, 4.0 * (double)params);
    assert_true(fabs(p.dp_exposed_s - ar) <= 1e-15 && fabs(p.step_s - (F + Btot + ar)) <= 1e-9 * p.step_s);
    four.chunks = 1;
    four.bucket_bytes = 0;
    m.node.beta = 1e-9;
    /* across nodes of 2 ranks: the ring over the link */
    m.ranks_per_node = 2;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &four, 32, &p, NULL), DL_OK);
    double bytes = 4.0 * (double)params, piece = bytes / 4;
    double ring = 3 * (m.link_alpha + piece * m.link_beta + piece * dl_cost_gamma(&m.node, 4, 4, bytes)) +
                  3 * (m.link_alpha + piece * m.link_beta);
    assert_true(fabs(p.dp_s - ring) <= 1e-12 * ring);
    dl_tp_view_free(&v);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

/* Expert ranks on the mixture of experts: dl_machine_alltoall's formula;
 * the all-to-alls of dp=4 x ep=2 (4 samples a rank, 2 rows of 16 floats a
 * sample) in the step; the gradient sums split in buckets as grad_sync
 * cuts them, the experts' half over their 2 replicas. */
static void experts_step_time(void **state)
{
    (void)state;
    struct dl_net net;
    load_text(tiny_moe, &net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 2e9);
    struct dl_machine m;
    machine(&m, 4);
    assert_true(dl_machine_alltoall(&m, 1, 0, 1e6) == 0);
    assert_true(fabs(dl_machine_alltoall(&m, 4, 0, 1e6) - (3 * 2e-6 + 0.75e6 * 1e-9)) <= 1e-18);
    assert_true(fabs(dl_machine_alltoall(&m, 4, 1, 1e6) - (3 * 5e-6 + 0.75e6 * 8e-11)) <= 1e-18);
    struct dl_tp_view v;
    assert_int_equal(dl_tp_view_make(g, 1, 4, &m, &v, NULL), DL_OK);
    assert_true(v.expert_params[1] == 1536 && v.params[1] == 1600 && v.routed_bytes[1] == 2 * 16 * 4);
    assert_true(v.expert_params[2] == 0 && v.routed_bytes[2] == 0);
    struct dl_plan_layout l = {.dims = {4, 1, 1, 0, 2}, .chunks = 1, .schedule = DL_SCHED_1F1B, .first = {0, g->n}};
    struct dl_layout_prediction p, plain;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
    double X = 4 * 128.0;
    double a2a = 2 * dl_machine_alltoall(&m, 2, 0, X) + dl_machine_alltoall(&m, 2, 0, 2 * X) +
                 dl_machine_alltoall(&m, 2, 0, X);
    assert_true(fabs(p.ep_s - a2a) <= 1e-15);
    /* buckets from the last layer: the fc's 68, the experts' half (768, over
     * 2 replicas), the router's 64 */
    double sums = dl_machine_allreduce(&m, 4, 0, 68 * 4.0) + dl_machine_allreduce(&m, 2, 0, 768 * 4.0) +
                  dl_machine_allreduce(&m, 4, 0, 64 * 4.0);
    assert_true(fabs(p.dp_s - sums) <= 1e-15);
    struct dl_plan_layout dp4 = l;
    dp4.dims.ep = 0;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &dp4, 16, &plain, NULL), DL_OK);
    assert_true(plain.ep_s == 0);
    /* the same compute: the step differs by the all-to-alls and the exposed sums */
    assert_true(fabs((p.step_s - p.ep_s - p.dp_exposed_s) - (plain.step_s - plain.dp_exposed_s)) <= 1e-12);
    /* with 2 chunks (no overlap): the dense weights in one sum over 4, the
     * experts' over 2; the all-to-alls twice, of half the rows */
    l.chunks = 2;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
    sums = dl_machine_allreduce(&m, 4, 0, 132 * 4.0) + dl_machine_allreduce(&m, 2, 0, 768 * 4.0);
    a2a = 2 * (2 * dl_machine_alltoall(&m, 2, 0, X / 2) + dl_machine_alltoall(&m, 2, 0, X) +
               dl_machine_alltoall(&m, 2, 0, X / 2));
    assert_true(fabs(p.dp_s - sums) <= 1e-15 && fabs(p.ep_s - a2a) <= 1e-15);
    /* ep=4: no replicas, the experts' sums none; groups across nodes of 2 ranks pay the link */
    l.chunks = 1;
    l.dims.ep = 4;
    m.ranks_per_node = 2;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
    a2a = 2 * dl_machine_alltoall(&m, 4, 1, X) + dl_machine_alltoall(&m, 4, 1, 2 * X) +
          dl_machine_alltoall(&m, 4, 1, X);
    assert_true(fabs(p.ep_s - a2a) <= 1e-15);
    sums = dl_machine_allreduce(&m, 4, 1, 68 * 4.0) + dl_machine_allreduce(&m, 4, 1, 64 * 4.0);
    assert_true(fabs(p.dp_s - sums) <= 1e-15);
    assert_true(dl_layout_rank_params(&v, &l.dims, 1) == 64 + 384);
    dl_tp_view_free(&v);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

/* A search hook handing out the whole layers' times times `scale` as if
 * measured on a tensor rank, counting its calls. */
struct fake_tensor_times {
    const struct dl_layer_times *whole;
    double scale;
    int calls[9];
};

static int fake_tensor_hook(void *ctx, const struct dl_graph *g, int T, struct dl_layer_times *out,
                            struct dl_error *err)
{
    struct fake_tensor_times *f = ctx;
    f->calls[T]++;
    int rc = dl_layer_times_alloc(out, g->n, err);
    for (int i = 0; !rc && i < g->n; i++) {
        out->fwd[i] = f->whole->fwd[i] * f->scale, out->bwd[i] = f->whole->bwd[i] * f->scale;
        out->wgt[i] = f->whole->wgt[i] * f->scale, out->fwd0[i] = 3e-6, out->bwd0[i] = 5e-6;
        out->source[i] = DL_TIME_MEASURED;
    }
    return rc;
}

/* Fixed seconds per call are paid once per chunk, whatever its samples;
 * measured tensor-rank times replace a split layer's share of the whole
 * layer's, and the search asks for them once per tensor group size. */
static void fixed_and_tensor_times(void **state)
{
    (void)state;
    struct dl_net net;
    load(&net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 2e9);
    double per = 0, fixed = 0;
    for (int i = 0; i < g->n; i++) {
        t.fwd0[i] = 1e-6 * (i + 1), t.bwd0[i] = 2e-6 * (i + 1);
        per += t.fwd[i] + t.bwd[i], fixed += t.fwd0[i] + t.bwd0[i];
    }
    struct dl_machine m;
    machine(&m, 2);
    struct dl_tp_view v;
    assert_int_equal(dl_tp_view_make(g, 1, 2, &m, &v, NULL), DL_OK);
    struct dl_plan_layout one = {.dims = {1, 1, 1}, .chunks = 1, .schedule = DL_SCHED_GPIPE, .first = {0, g->n}};
    struct dl_layout_prediction p;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &one, 32, &p, NULL), DL_OK);
    assert_true(fabs(p.step_s - (fixed + 32 * per)) <= 1e-12 * p.step_s);
    one.chunks = 4; /* one stage, four calls of 8 samples per layer */
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &one, 32, &p, NULL), DL_OK);
    assert_true(fabs(p.step_s - (4 * fixed + 32 * per)) <= 1e-12 * p.step_s);
    /* the optimizer: every parameter of the rank, once per step; on a
     * 2-stage pipeline the rank holding more of them sets it */
    long params = 0, head = 0;
    for (int i = 0; i < g->n; i++)
        params += v.params[i], head += i < 3 ? v.params[i] : 0;
    t.optim_per_param = 1e-8;
    one.chunks = 1;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &one, 32, &p, NULL), DL_OK);
    assert_true(fabs(p.optim_s - 1e-8 * (double)params) <= 1e-15);
    assert_true(fabs(p.step_s - (fixed + 32 * per + p.optim_s)) <= 1e-12 * p.step_s);
    struct dl_plan_layout two = {.dims = {1, 1, 2}, .chunks = 2, .schedule = DL_SCHED_GPIPE, .first = {0, 3, g->n}};
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &two, 32, &p, NULL), DL_OK);
    assert_true(head > 0 && params - head > 0);
    assert_true(fabs(p.optim_s - 1e-8 * (double)(head > params - head ? head : params - head)) <= 1e-15);
    t.optim_per_param = 0;
    dl_tp_view_free(&v);

    /* tp = 2: the split layers' times are the hook's, the others' the whole layers' */
    struct fake_tensor_times f = {.whole = &t, .scale = 0.75};
    struct dl_layer_times tt;
    assert_int_equal(fake_tensor_hook(&f, g, 2, &tt, NULL), DL_OK);
    assert_int_equal(dl_tp_view_make(g, 2, 2, &m, &v, NULL), DL_OK);
    struct dl_plan_layout tp2 = {.dims = {1, 2, 1}, .chunks = 1, .schedule = DL_SCHED_GPIPE, .first = {0, g->n}};
    struct dl_layout_prediction shares, measured;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &tp2, 32, &shares, NULL), DL_OK);
    v.times = &tt;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &tp2, 32, &measured, NULL), DL_OK);
    double want_shares = 0, want_measured = 0;
    int split = 0;
    for (int i = 0; i < g->n; i++) {
        want_shares += t.fwd0[i] + t.bwd0[i] + (t.fwd[i] + t.bwd[i]) * v.share[i] * 32;
        if (v.share[i] < 1)
            want_measured += tt.fwd0[i] + tt.bwd0[i] + (tt.fwd[i] + tt.bwd[i]) * 32, split++;
        else
            want_measured += t.fwd0[i] + t.bwd0[i] + (t.fwd[i] + t.bwd[i]) * v.share[i] * 32;
    }
    assert_true(split > 0);
    assert_true(fabs(shares.tp_s - measured.tp_s) <= 1e-15);
    assert_true(fabs(shares.step_s - shares.tp_s - want_shares) <= 1e-12 * shares.step_s);
    assert_true(fabs(measured.step_s - measured.tp_s - want_measured) <= 1e-12 * measured.step_s);
    assert_true(fabs(measured.step_s - shares.step_s) > 1e-9);
    dl_tp_view_free(&v);
    dl_layer_times_free(&tt);

    /* the search: once per T > 1, and its tp=2 prediction is the measured one */
    struct dl_plan_request req = {.g = g, .times = &t, .machine = &m, .ranks = 2, .batch = 32, .skip_memory = 1,
                                  .tensor_times = fake_tensor_hook, .tensor_ctx = &f};
    struct dl_plan_result r;
    assert_int_equal(dl_plan_search(&req, &r, NULL), DL_OK);
    assert_int_equal(f.calls[1], 0);
    assert_int_equal(f.calls[2], 2); /* the one above and the search's */
    int found = 0;
    for (int i = 0; i < r.n; i++)
        if (r.c[i].layout.dims.tp == 2 && r.c[i].layout.n_whole == 0 && !r.c[i].layout.by_samples) {
            assert_true(fabs(r.c[i].pred.step_s - measured.step_s) <= 1e-12 * measured.step_s);
            found++;
        }
    assert_int_equal(found, 1);
    dl_plan_result_free(&r);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

/* A node's ranks times threads above its cores slow compute by the
 * ratio, and only compute: the tensor collectives stay. */
static void ranks_sharing_cores(void **state)
{
    (void)state;
    struct dl_machine m;
    machine(&m, 4);
    dl_machine_share_cores(&m, 4, 1, 2, 0);
    assert_true(m.compute_scale == 2);
    dl_machine_share_cores(&m, 2, 1, 2, 0);
    assert_true(m.compute_scale == 1);
    dl_machine_share_cores(&m, 4, 3, 8, 0); /* 12 threads on 8 cores */
    assert_true(m.compute_scale == 1.5);
    m.ranks_per_node = 2;
    dl_machine_share_cores(&m, 64, 1, 2, 0); /* 2 of the 64 on each node */
    assert_true(m.compute_scale == 1 && !m.comm_shares_cores);
    dl_machine_share_cores(&m, 64, 1, 2, 1); /* and their communication threads: 4 on 2 cores */
    assert_true(m.compute_scale == 1 && m.comm_shares_cores);
    dl_machine_share_cores(&m, 64, 1, 4, 1);
    assert_true(!m.comm_shares_cores);
    dl_machine_share_cores(&m, 64, 1, 0, 1); /* cores unknown */
    assert_true(!m.comm_shares_cores);
    struct dl_net net;
    load(&net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 2e9);
    struct dl_tp_view v;
    machine(&m, 2);
    assert_int_equal(dl_tp_view_make(g, 2, 2, &m, &v, NULL), DL_OK);
    struct dl_plan_layout tp2 = {.dims = {1, 2, 1}, .chunks = 1, .schedule = DL_SCHED_GPIPE, .first = {0, g->n}};
    struct dl_layout_prediction alone, shared;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &tp2, 32, &alone, NULL), DL_OK);
    dl_machine_share_cores(&m, 2, 2, 2, 0);
    assert_true(m.compute_scale == 2);
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &tp2, 32, &shared, NULL), DL_OK);
    assert_true(alone.tp_s > 0 && fabs(shared.tp_s - alone.tp_s) <= 1e-15);
    assert_true(fabs((shared.step_s - shared.tp_s) - 2 * (alone.step_s - alone.tp_s)) <= 1e-12 * shared.step_s);
    dl_tp_view_free(&v);
    /* dp = 2 in buckets of 64 floats: partly hidden behind backward, unless
     * the communication threads share the cores with compute */
    machine(&m, 2);
    m.node.beta = 1e-7; /* slow enough to outlast the backward of a bucket */
    assert_int_equal(dl_tp_view_make(g, 1, 2, &m, &v, NULL), DL_OK);
    struct dl_plan_layout dp2 = {.dims = {2, 1, 1}, .chunks = 1, .schedule = DL_SCHED_GPIPE, .first = {0, g->n},
                                 .bucket_bytes = 64 * 4};
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &dp2, 32, &alone, NULL), DL_OK);
    assert_true(alone.dp_exposed_s > 0 && alone.dp_exposed_s < alone.dp_s);
    m.comm_shares_cores = 1;
    assert_int_equal(dl_layout_predict(g, &t, &v, &m, &dp2, 32, &shared, NULL), DL_OK);
    assert_true(fabs(shared.dp_exposed_s - shared.dp_s) <= 1e-15);
    assert_true(fabs(shared.step_s - shared.makespan_s - shared.dp_s) <= 1e-12 * shared.step_s);
    dl_tp_view_free(&v);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

/* The planner's memory of every pipeline rank against the executors dl_pipeline_init makes. */
static void memory_equals_executors(void **state)
{
    (void)state;
    struct dl_net nets[3];
    load(&nets[0]);
    load_text(free_mlp, &nets[1]);
    load_text(tiny_moe, &nets[2]);
    static const struct {
        int dp, tp, pp, chunks;
        enum dl_pipe_schedule kind;
        int V;
        int cut[3]; /* first layers of stages 1.. */
        int mlp;    /* 1: the free MLP with fc1 and fc2 whole (split: none), fc3 and fc4 split */
        int ep;     /* > 1: the mixture of experts on ep expert ranks */
    } cases[] = {{2, 1, 1, 1, DL_SCHED_1F1B, 1, {0}, 0, 2}, {4, 1, 1, 1, DL_SCHED_1F1B, 1, {0}, 0, 4},
                 {2, 1, 2, 2, DL_SCHED_GPIPE, 1, {2}, 0, 2}, {2, 2, 1, 1, DL_SCHED_1F1B, 1, {0}, 0, 2},
                 {1, 2, 1, 1, DL_SCHED_1F1B, 1, {0}, 1}, {1, 2, 2, 4, DL_SCHED_GPIPE, 1, {4}, 1},
                 {2, 2, 2, 2, DL_SCHED_ZB_H1, 1, {6}, 1},
                 {1, 1, 1, 1, DL_SCHED_1F1B, 1, {0}, 0}, {2, 1, 1, 1, DL_SCHED_1F1B, 1, {0}, 0},
                 {1, 1, 2, 4, DL_SCHED_1F1B, 1, {3}, 0}, {1, 1, 2, 4, DL_SCHED_GPIPE, 1, {6}, 0},
                 {2, 1, 2, 2, DL_SCHED_1F1B, 1, {2}, 0}, {1, 2, 1, 1, DL_SCHED_1F1B, 1, {0}, 0},
                 {1, 2, 2, 4, DL_SCHED_GPIPE, 1, {5}, 0}, {1, 1, 2, 4, DL_SCHED_ZB_H1, 1, {3}, 0},
                 {2, 1, 2, 2, DL_SCHED_ZB_H1, 1, {6}, 0}, {1, 2, 2, 4, DL_SCHED_ZB_H1, 1, {5}, 0},
                 {1, 1, 2, 4, DL_SCHED_INTERLEAVED, 2, {2, 5, 7}, 0},
                 {2, 1, 2, 2, DL_SCHED_INTERLEAVED, 2, {3, 6, 8}, 0},
                 {1, 2, 2, 8, DL_SCHED_INTERLEAVED, 2, {1, 4, 6}, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const struct dl_graph *g = &nets[cases[k].ep ? 2 : cases[k].mlp].graph;
        struct dl_plan_layout l = {.dims = {cases[k].dp, cases[k].tp, cases[k].pp, 0, cases[k].ep},
                                   .chunks = cases[k].chunks,
                                   .schedule = cases[k].kind, .V = cases[k].V, .n_whole = cases[k].mlp ? 2 : 0,
                                   .whole = {1, 3}};
        const int S = cases[k].pp * cases[k].V;
        l.first[0] = 0;
        for (int s = 1; s < S; s++)
            l.first[s] = cases[k].cut[s - 1];
        l.first[S] = g->n;
        const int batch = 16;
        size_t most, per_rank[2], adam_most, adam_per_rank[2];
        struct dl_error err = {0};
        int rc = dl_layout_memory(g, &l, batch, NULL, NULL, &most, per_rank, &err);
        /* Adam keeps two vectors per weight where SGD with momentum keeps one */
        struct dl_optim_spec adam = {.kind = DL_OPTIM_ADAM};
        if (!rc)
            rc = dl_layout_memory(g, &l, batch, NULL, &adam, &adam_most, adam_per_rank, &err);
        if (rc)
            print_message("# %s\n", err.msg);
        assert_int_equal(rc, DL_OK);
        struct dl_graph staged;
        assert_int_equal(dl_layout_staged_graph(g, &l, &staged, NULL), DL_OK);
        for (int i = 0; i < g->n; i++) /* the MLP's fc1 and fc2 whole, the rest as the file has them */
            assert_int_equal(staged.layers[i].split, cases[k].mlp && (i == 1 || i == 3) ? DL_SPLIT_NONE
                                                                                        : g->layers[i].split);
        size_t want_most = 0;
        for (int p = 0; p < l.dims.pp; p++) {
            struct dl_shard s;
            int rank = dl_grid_rank(&l.dims, (struct dl_grid_pos){0, 0, p});
            assert_int_equal(dl_shard_make(&staged, &l.dims, cases[k].V, rank, NULL, &s, NULL), DL_OK);
            struct dl_comm tensor = {.size = l.dims.tp}, pipeline = {.size = l.dims.pp, .rank = p};
            struct dl_comm experts = {.size = dl_grid_ep(&l.dims)};
            struct dl_exec_options o = {.shard = &s, .tensor_comm = l.dims.tp > 1 ? &tensor : NULL,
                                        .pipeline_comm = l.dims.pp > 1 ? &pipeline : NULL,
                                        .experts_comm = cases[k].ep ? &experts : NULL};
            struct dl_pipeline pl;
            int local = (batch + l.dims.dp - 1) / l.dims.dp;
            rc = dl_pipeline_init(&pl, &staged, &o, local, l.chunks, l.schedule, cases[k].V, 1, &err);
            if (rc)
                print_message("# %s\n", err.msg);
            assert_int_equal(rc, DL_OK);
            size_t held = (size_t)(3 * pl.slot[0].n_weights + pl.slot[0].n_state) * sizeof(float);
            for (int i = 0; i < pl.slots; i++)
                held += pl.slot[i].stats.arena_bytes;
            assert_int_equal(per_rank[p], held);
            assert_int_equal(adam_per_rank[p], held + (size_t)pl.slot[0].n_weights * sizeof(float));
            want_most = held > want_most ? held : want_most;
            dl_pipeline_free(&pl);
            dl_shard_free(&s);
        }
        assert_int_equal(most, want_most);
        free(staged.layers);
    }
    dl_net_free(&nets[0]);
    dl_net_free(&nets[1]);
    dl_net_free(&nets[2]);
}

/* The collectives of the small CNN's splits on 2 tensor ranks, from
 * shard.h's rules by hand: conv1 splits its outputs reading the network's
 * input (no gradient goes back); conv2 and fc1 gather their split inputs
 * (pool1: 8x6x6, pool2: 8x3x3 floats per sample) and reduce-scatter
 * their gradients; fc2 splits its inputs and allreduces its partial sums
 * (4 floats); relu and pooling follow the blocks. */
static void tp_view_of_small_cnn(void **state)
{
    (void)state;
    struct dl_net net;
    load(&net);
    struct dl_machine m;
    machine(&m, 2);
    struct dl_tp_view v;
    assert_int_equal(dl_tp_view_make(&net.graph, 2, 2, &m, &v, NULL), DL_OK);
    assert_false(v.crosses);
    static const struct {
        int layer, n;
        struct dl_tp_op op[2];
    } want[] = {{0, 0, {{0}}}, {1, 0, {{0}}}, {2, 0, {{0}}},
                {3, 2, {{DL_TP_ALLGATHER, 0, 1152, 0}, {DL_TP_REDUCE_SCATTER, 1, 1152, 0}}}, {4, 0, {{0}}}, {5, 0, {{0}}},
                {6, 2, {{DL_TP_ALLGATHER, 0, 288, 0}, {DL_TP_REDUCE_SCATTER, 1, 288, 0}}}, {7, 0, {{0}}},
                {8, 1, {{DL_TP_ALLREDUCE, 0, 16, 0}}}, {9, 0, {{0}}}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        int i = want[k].layer;
        assert_int_equal(v.n_ops[i], want[k].n);
        for (int j = 0; j < want[k].n; j++) {
            assert_int_equal(v.op[i][j].kind, want[k].op[j].kind);
            assert_int_equal(v.op[i][j].backward, want[k].op[j].backward);
            assert_true(v.op[i][j].bytes == want[k].op[j].bytes);
        }
    }
    for (int i = 0; i < 8; i++) /* split by outputs or following blocks: half the work */
        assert_true(v.share[i] == 0.5);
    assert_true(v.share[8] > 0.5 && v.share[8] < 1); /* half the FLOPs, the whole output */
    assert_true(v.share[9] == 1);
    assert_int_equal(v.params[0], 8 / 2 * 3 * 3 * 3 + 8 / 2);
    assert_true(dl_machine_allgather(&m, 2, 0, 1152) > 0);
    dl_tp_view_free(&v);
    /* three groups of 2 on nodes of 3 ranks: the second crosses */
    machine(&m, 3);
    assert_int_equal(dl_tp_view_make(&net.graph, 2, 6, &m, &v, NULL), DL_OK);
    assert_true(v.crosses);
    dl_tp_view_free(&v);
    /* conv1 by samples (`split: batch`; conv2 keeps its `split: filters`):
     * conv1, relu1 and pool1 on half the samples, conv1's weight gradients
     * (224 floats) summed over the group at each call; conv2 gathers the
     * shares (1152 bytes per sample) and, split by filters, allreduces its
     * partial input gradients, of which each rank keeps its share */
    dl_split_by_samples(&net.graph);
    assert_int_equal(net.graph.layers[0].split, DL_SPLIT_BATCH);
    assert_int_equal(net.graph.layers[3].split, DL_SPLIT_FILTERS);
    machine(&m, 2);
    assert_int_equal(dl_tp_view_make(&net.graph, 2, 2, &m, &v, NULL), DL_OK);
    static const struct {
        int layer, n;
        struct dl_tp_op op[2];
    } by_samples[] = {{0, 1, {{DL_TP_ALLREDUCE, 1, 896, 1}}}, {1, 0, {{0}}}, {2, 0, {{0}}},
                      {3, 2, {{DL_TP_ALLGATHER, 0, 1152, 0}, {DL_TP_ALLREDUCE, 1, 1152, 0}}}};
    for (size_t k = 0; k < sizeof by_samples / sizeof *by_samples; k++) {
        int i = by_samples[k].layer;
        assert_int_equal(v.n_ops[i], by_samples[k].n);
        assert_int_equal(v.by_samples[i], i < 3);
        assert_true(v.share[i] == 0.5);
        for (int j = 0; j < by_samples[k].n; j++) {
            assert_int_equal(v.op[i][j].kind, by_samples[k].op[j].kind);
            assert_int_equal(v.op[i][j].backward, by_samples[k].op[j].backward);
            assert_true(v.op[i][j].bytes == by_samples[k].op[j].bytes);
            assert_int_equal(v.op[i][j].per_call, by_samples[k].op[j].per_call);
        }
    }
    assert_int_equal(v.params[0], 8 * 3 * 3 * 3 + 8); /* whole weights on every rank */
    dl_tp_view_free(&v);
    dl_net_free(&net);
}

static void link_parses(void **state)
{
    (void)state;
    double a, b;
    struct dl_error err = {0};
    assert_int_equal(dl_machine_parse_link("--link", "alpha=5us,bw=12.5GB/s", &a, &b, NULL, &err), DL_OK);
    assert_true(fabs(a - 5e-6) < 1e-18 && fabs(b - 1 / 12.5e9) < 1e-24);
    assert_int_equal(dl_machine_parse_link("--link", "bw=100Gbit/s,alpha=1.5ms", &a, &b, NULL, &err), DL_OK);
    assert_true(fabs(a - 1.5e-3) < 1e-15 && fabs(b - 8 / 100e9) < 1e-24);
    static const char *const bad[] = {"alpha=5us", "bw=1GB/s", "alpha=5,bw=1GB/s", "alpha=5us,bw=1GB",
                                      "alpha=-1us,bw=1GB/s", "alpha=5us,alpha=5us,bw=1GB/s", "beta=1,bw=1GB/s", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dl_machine_parse_link("--link", bad[i], &a, &b, NULL, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "--link"));
    }
    /* add= only where a reduction speed is asked for */
    double g = 7;
    assert_int_equal(dl_machine_parse_link("--link", "alpha=1us,bw=1GB/s,add=2GB/s", &a, &b, NULL, &err), DL_ERR_SPEC);
    assert_int_equal(dl_machine_parse_link("--node-link", "alpha=1us,bw=1GB/s", &a, &b, &g, &err), DL_OK);
    assert_true(g == 7);
    assert_int_equal(dl_machine_parse_link("--node-link", "alpha=1us,bw=1GB/s,add=2GB/s", &a, &b, &g, &err), DL_OK);
    assert_true(fabs(g - 0.5e-9) < 1e-24);
    assert_int_equal(dl_machine_parse_link("--node-link", "alpha=1us,add=2GB/s", &a, &b, &g, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "--node-link"));
    /* the one grammar of links (core/parse.h), which the machine file and --comm-emulate share */
    assert_int_equal(dl_parse_duration("x", "250ns", DL_LINK_MAX_ALPHA, &a, &err), DL_OK);
    assert_true(fabs(a - 250e-9) < 1e-21);
    assert_int_equal(dl_parse_rate("x", "0.8Gbit/s", &a, &err), DL_OK);
    assert_true(fabs(a - 1e8) < 1e-6);
    assert_int_equal(dl_parse_rate("x", "100MiB/s", &a, &err), DL_OK);
    assert_true(a == 100.0 * 1048576);
    static const char *const bad_times[] = {"5", "5 us", "-1ms", "5min", "", "11s"};
    for (size_t i = 0; i < sizeof bad_times / sizeof *bad_times; i++) {
        assert_int_equal(dl_parse_duration("machine.link.alpha", bad_times[i], DL_LINK_MAX_ALPHA, &a, &err),
                         DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "machine.link.alpha: expected a time with its unit"));
    }
    static const char *const bad_rates[] = {"0GB/s", "1GB", "-1MB/s", "1e400B/s", "GB/s", "0Gbit/s", "1Gbits/s"};
    for (size_t i = 0; i < sizeof bad_rates / sizeof *bad_rates; i++) {
        assert_int_equal(dl_parse_rate("machine.link.bw", bad_rates[i], &a, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "machine.link.bw: expected a rate above 0"));
    }
    /* --comm-emulate reads the same spellings: bit rates and MiB/s alike, alpha=0 */
    struct dl_link l;
    assert_int_equal(dl_parse_link("--comm-emulate", "alpha=0,bw=100Gbit/s", 0, DL_LINK_MAX_ALPHA, &l, &err), DL_OK);
    assert_true(l.has_alpha && l.alpha == 0 && l.has_bw && l.bw == 12.5e9 && !l.has_add);
    assert_int_equal(dl_parse_link("--comm-emulate", "bw=100MiB/s", 0, DL_LINK_MAX_ALPHA, &l, &err), DL_OK);
    assert_true(!l.has_alpha && l.bw == 100.0 * 1048576);
    assert_int_equal(dl_parse_link("--comm-emulate", "alpha=1us,add=1GB/s", 0, DL_LINK_MAX_ALPHA, &l, &err),
                     DL_ERR_SPEC);
}

/* The consistency models on nodes of 2 ranks with a slow link, by hand:
 * L and S the seconds of a message of the weight vector (V bytes) across
 * nodes and within one, A = V x gamma the addition of one received vector. */
static void consistency_costs(void **state)
{
    (void)state;
    struct dl_net net;
    load(&net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 1e9);
    struct dl_machine m;
    machine(&m, 2);
    m.link_alpha = 30e-6;
    m.link_beta = 1e-8; /* the link slower than the node's 1e-9 */
    double V = 0;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++)
            V += 4.0 * (double)g->layers[i].param[j].count;
    const double L = m.link_alpha + V * m.link_beta, S = m.node.alpha + V * m.node.beta, A = V * m.node.gamma;
    static const struct {
        const char *model;
        int N;
    } cases[] = {{"sync", 4}, {"gossip:ring", 4}, {"gossip:exp", 8}, {"gossip:one-peer-exp", 8},
                 {"gossip:complete", 4}, {"local-sgd:4", 4}, {"easgd:2", 8}, {"gossip:ring", 2}};
    const double piece4 = V / 4, piece8 = V / 8;
    const double ring4 = 3 * (2 * m.link_alpha + 2 * piece4 * m.link_beta + piece4 * m.node.gamma);
    const double ring8 = 7 * (2 * m.link_alpha + 2 * piece8 * m.link_beta + piece8 * m.node.gamma);
    const double want[] = {
        -1,                  /* sync: the layout's own prediction, below */
        S + L + 2 * A,       /* ring of 4: i+1 and i-1, one on i's node, one not */
        3 * L + 3 * A,       /* exp of 8: the odd ranks' neighbours 1, 2, 4 are all on other nodes */
        L + A,               /* one peer at 1, 2, 4 in turn, each step some rank's peer across */
        S + 2 * L + 3 * A,   /* complete on 4: one neighbour on the node, two across */
        ring4 / 4,           /* local SGD: a ring allreduce across nodes every 4 steps */
        ring8 / 2,           /* EASGD: every 2 steps */
        S + A};              /* ring of 2: one neighbour, on the node */
    const double sent[] = {2.0 * 3 / 4 * V, 2 * V, 3 * V, V, 3 * V, 2.0 * 3 / 4 * V / 4, 2.0 * 7 / 8 * V / 2, V};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct dl_parallel_opts o;
        dl_parallel_opts_defaults(&o);
        assert_int_equal(dl_consistency_parse(cases[k].model, &o, NULL), DL_OK);
        struct dl_consistency_cost c;
        struct dl_error err = {0};
        int rc = dl_plan_consistency(g, &t, &m, &o, cases[k].N, 16, &c, &err);
        if (rc)
            print_message("# %s\n", err.msg);
        assert_int_equal(rc, DL_OK);
        struct dl_tp_view v;
        assert_int_equal(dl_tp_view_make(g, 1, cases[k].N, &m, &v, NULL), DL_OK);
        struct dl_plan_layout l = {.dims = {cases[k].N, 1, 1}, .chunks = 1, .schedule = DL_SCHED_1F1B,
                                   .first = {0, g->n}};
        struct dl_layout_prediction p;
        assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
        dl_tp_view_free(&v);
        double w = want[k] < 0 ? p.dp_exposed_s : want[k];
        print_message("# %-20s N=%d exchange %.9g want %.9g\n", cases[k].model, cases[k].N, c.exchange_s, w);
        assert_true(fabs(c.exchange_s - w) <= 1e-12 * w);
        assert_true(c.compute_s == p.makespan_s && c.step_s == c.compute_s + c.exchange_s);
        assert_true(fabs(c.bytes_sent - sent[k]) <= 1e-9 * sent[k] + 8);
    }
    /* parameter servers are not modelled; gossip needs 2 ranks; dp=N a sample each */
    static const char *const refused[] = {"ssp:1", "async", "easgd-async:2", "gossip:ring"};
    for (int k = 0; k < 4; k++) {
        struct dl_parallel_opts o;
        dl_parallel_opts_defaults(&o);
        assert_int_equal(dl_consistency_parse(refused[k], &o, NULL), DL_OK);
        struct dl_consistency_cost c;
        assert_int_equal(dl_plan_consistency(g, &t, &m, &o, k == 3 ? 1 : 4, 16, &c, NULL), DL_ERR_SPEC);
    }
    struct dl_parallel_opts o;
    dl_parallel_opts_defaults(&o);
    struct dl_consistency_cost c;
    assert_int_equal(dl_plan_consistency(g, &t, &m, &o, 32, 16, &c, NULL), DL_ERR_SPEC);
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

/* Pipeline steps by hand: the simulator run on stage costs summed from the
 * layer times of 4 chunks of 4 samples, each stage's backward split into
 * its input-gradient pass and its weight-gradient pass under zb-h1 (FLOP
 * times: half the backward of a layer with weights), every cut's message
 * occupying its sender (forward: the activation; backward: its gradient)
 * on the link between the two stages' ranks: zb-h1 on 2 stages
 * (conv1..pool2 | fc1..loss) within a node; interleaved:2 on 2 ranks, one
 * per node, with 4 stages (conv1 relu1 | pool1..relu2 | pool2 fc1 | relu3..
 * loss), so every cut, the one from rank 1 back to rank 0 too, crosses
 * the link. */
static void pipeline_step_by_hand(void **state)
{
    (void)state;
    struct dl_net net;
    load(&net);
    const struct dl_graph *g = &net.graph;
    struct dl_layer_times t;
    flop_times(g, &t, 1e9);
    static const struct {
        enum dl_pipe_schedule kind;
        int V, per_node, first[5];
    } cases[] = {{DL_SCHED_ZB_H1, 1, 2, {0, 6, 10}}, {DL_SCHED_INTERLEAVED, 2, 1, {0, 2, 5, 7, 10}}};
    for (int k = 0; k < 2; k++) {
        struct dl_machine m;
        machine(&m, cases[k].per_node);
        const int S = 2 * cases[k].V, split = cases[k].kind == DL_SCHED_ZB_H1;
        const double b = 16.0 / 4;
        double f[4] = {0}, bi[4] = {0}, bw[4] = {0};
        for (int s = 0; s < S; s++)
            for (int i = cases[k].first[s]; i < cases[k].first[s + 1]; i++) {
                int weights = g->layers[i].n_params > 0;
                assert_true(t.wgt[i] == (weights ? t.bwd[i] / 2 : 0));
                f[s] += t.fwd[i] * b;
                bi[s] += (t.bwd[i] - (split ? t.wgt[i] : 0)) * b;
                bw[s] += split ? t.wgt[i] * b : 0;
            }
        double alpha = cases[k].per_node == 1 ? m.link_alpha : m.node.alpha;
        double beta = cases[k].per_node == 1 ? m.link_beta : m.node.beta;
        for (int s = 1; s < S; s++) { /* the layer before each cut feeds only the next (a chain) */
            double x = 4.0 * (double)dl_shape_count(g->layers[cases[k].first[s] - 1].out_shape) * b;
            f[s - 1] += x * beta;
            bi[s] += x * beta;
        }
        struct dl_schedule sched;
        assert_int_equal(dl_schedule_make(cases[k].kind, 2, 4, cases[k].V, &sched, NULL), DL_OK);
        struct dl_sched_costs costs = {.fwd = f, .bwd_in = bi, .bwd_w = bw, .send_latency = alpha};
        double makespan, idle;
        assert_int_equal(dl_schedule_simulate(&sched, &costs, &makespan, NULL, &idle, NULL), DL_OK);
        dl_schedule_free(&sched);
        struct dl_tp_view v;
        assert_int_equal(dl_tp_view_make(g, 1, 2, &m, &v, NULL), DL_OK);
        struct dl_plan_layout l = {.dims = {1, 1, 2}, .chunks = 4, .schedule = cases[k].kind, .V = cases[k].V};
        memcpy(l.first, cases[k].first, sizeof cases[k].first);
        struct dl_layout_prediction p;
        assert_int_equal(dl_layout_predict(g, &t, &v, &m, &l, 16, &p, NULL), DL_OK);
        print_message("# %s: makespan %.9g by hand %.9g, bubble %.4f %.4f\n", dl_schedule_kind_name(cases[k].kind),
                      p.makespan_s, makespan, p.bubble, idle);
        assert_true(fabs(p.makespan_s - makespan) <= 1e-12 * makespan && p.step_s == p.makespan_s);
        assert_true(fabs(p.bubble - idle) <= 1e-12);
        dl_tp_view_free(&v);
    }
    dl_layer_times_free(&t);
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuts_are_optimal),
        cmocka_unit_test(search_ranks_every_layout),
        cmocka_unit_test(experts_step_time),
        cmocka_unit_test(step_time_formulas),
        cmocka_unit_test(fixed_and_tensor_times),
        cmocka_unit_test(ranks_sharing_cores),
        cmocka_unit_test(memory_equals_executors),
        cmocka_unit_test(tp_view_of_small_cnn),
        cmocka_unit_test(link_parses),
        cmocka_unit_test(consistency_costs),
        cmocka_unit_test(pipeline_step_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
