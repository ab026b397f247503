/* test_stages.c: pipeline stage cuts.  The balanced cut's costliest stage
 * equals the best of every possible cut (brute force) on random layer
 * costs, stages are contiguous, non-empty and keep the loss last; the
 * network file's `stage:` keys and `parallel.stages` list are followed,
 * and wrong ones are refused with messages naming the layer and the rule;
 * P ranks of V virtual stages cut P*V stages, stage s on rank s % P. */
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
#include "plan/stages.h"
#include "spec/netfile.h"

#define LAYERS 9

/* An MLP of LAYERS fc layers (and the loss), stage keys from keys[] (-1: none). */
static void load_chain(struct dl_net *net, const int *keys)
{
    char text[4096];
    int at = snprintf(text, sizeof text, "input: {shape: [4, 1, 1], classes: 4}\nlayers:\n");
    for (int i = 0; i < LAYERS; i++) {
        char st[32] = "";
        if (keys && keys[i] >= 0)
            snprintf(st, sizeof st, ", stage: %d", keys[i]);
        at += snprintf(text + at, sizeof text - (size_t)at, "  - {name: f%d, type: fc, units: 4%s}\n", i, st);
    }
    snprintf(text + at, sizeof text - (size_t)at, "loss: softmax_cross_entropy\n");
    struct dl_error err = {0};
    int rc = dl_net_load_string("chain.yaml", text, net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

/* The best largest-stage cost over every way to cut n costs into P runs. */
static double brute(const double *c, int n, int P, int start, double worst)
{
    if (P == 1) {
        double s = 0;
        for (int i = start; i < n; i++)
            s += c[i];
        return fmax(worst, s);
    }
    double best = INFINITY, s = 0;
    for (int end = start + 1; end <= n - (P - 1); end++) {
        s += c[end - 1];
        best = fmin(best, brute(c, n, P - 1, end, fmax(worst, s)));
    }
    return best;
}

static void balanced_cut_is_optimal(void **state)
{
    struct dl_net net;
    load_chain(&net, NULL);
    const struct dl_graph *g = &net.graph;
    struct dl_rng r;
    dl_rng_seed(&r, 5);
    double cost[LAYERS + 1];
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i <= LAYERS; i++)
            cost[i] = trial % 3 == 0 ? 1.0 : floor(1 + 20 * dl_rng_uniform(&r)); /* ties too */
        double merged[LAYERS];
        memcpy(merged, cost, sizeof merged);
        merged[LAYERS - 1] += cost[LAYERS]; /* the loss goes with the last layer */
        for (int P = 1; P <= LAYERS; P++) {
            struct dl_stages s;
            struct dl_error err = {0};
            assert_int_equal(dl_stages_cut(g, P, 1, cost, &s, &err), DL_OK);
            double worst = 0, total = 0;
            assert_int_equal(s.first[0], 0);
            assert_int_equal(s.first[P], g->n);
            for (int k = 0; k < P; k++) {
                assert_true(s.first[k] < s.first[k + 1]); /* non-empty, in order */
                worst = fmax(worst, s.cost[k]);
                total += s.cost[k];
            }
            assert_int_equal(dl_stages_of(&s, g->loss), P - 1);
            assert_true(fabs(total - brute(merged, LAYERS, 1, 0, 0)) < 1e-9);
            assert_true(fabs(worst - brute(merged, LAYERS, P, 0, 0)) < 1e-9);
            dl_stages_free(&s);
        }
    }
    dl_net_free(&net);
}

static void default_costs_split_the_work(void **state)
{
    struct dl_net net;
    struct dl_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/nets/lenet5.yaml", getenv("top_srcdir") ? getenv("top_srcdir") : ".");
    assert_int_equal(dl_net_load(path, &net, &err), DL_OK);
    struct dl_stages s;
    assert_int_equal(dl_stages_cut(&net.graph, 2, 1, NULL, &s, &err), DL_OK);
    print_message("# lenet5 in 2 stages: layers [0, %d) and [%d, %d), costs %.3g and %.3g\n", s.first[1], s.first[1],
                  s.first[2], s.cost[0], s.cost[1]);
    assert_true(s.cost[0] > 0 && s.cost[1] > 0);
    assert_true(fmax(s.cost[0], s.cost[1]) < 0.9 * (s.cost[0] + s.cost[1])); /* neither holds (nearly) everything */
    dl_stages_free(&s);
    dl_net_free(&net);
}

static void cut_from_keys(const int *keys, int P, const int *want_first)
{
    struct dl_net net;
    load_chain(&net, keys);
    struct dl_stages s;
    struct dl_error err = {0};
    int rc = dl_stages_cut(&net.graph, P, 1, NULL, &s, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    assert_true(s.from_file);
    for (int k = 0; k < P; k++)
        assert_int_equal(s.first[k], want_first[k]);
    dl_stages_free(&s);
    dl_net_free(&net);
}

static void refused(const int *keys, int P, const char *says)
{
    struct dl_net net;
    load_chain(&net, keys);
    struct dl_stages s;
    struct dl_error err = {0};
    assert_int_equal(dl_stages_cut(&net.graph, P, 1, NULL, &s, &err), DL_ERR_SPEC);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, says));
    dl_net_free(&net);
}

static void stage_keys(void **state)
{
    cut_from_keys((const int[]){-1, -1, 1, -1, -1, -1, 2, -1, -1}, 3, (const int[]){0, 2, 6});
    cut_from_keys((const int[]){0, 0, 1, 1, 1, 1, 1, 1, 1}, 2, (const int[]){0, 2});
    refused((const int[]){-1, -1, 3, -1, -1, -1, -1, -1, -1}, 3, "layer 'f2': stage 3, but the pipeline has 3 stages");
    refused((const int[]){-1, -1, 1, -1, 2, -1, 1, -1, -1}, 3, "must follow the topological order");
    refused((const int[]){-1, -1, 2, -1, -1, -1, -1, -1, -1}, 3, "so stage 1 has no layers");
    refused((const int[]){1, -1, -1, -1, -1, -1, -1, -1, -1}, 2, "so stage 0 has no layers");
    refused((const int[]){-1, -1, 1, -1, -1, -1, -1, -1, -1}, 3, "stage 2 has no layers");
    refused(NULL, LAYERS + 1, "at most 9 stages");
}

/* The chain with a `parallel: {stages: LIST}` line (and a stage key on f5
 * when key5 >= 0): the load's status and message. */
static int load_with_list(const char *list, int key5, struct dl_net *net, struct dl_error *err)
{
    char text[4096];
    int at = snprintf(text, sizeof text, "input: {shape: [4, 1, 1], classes: 4}\nparallel: {stages: %s}\nlayers:\n",
                      list);
    for (int i = 0; i < LAYERS; i++)
        at += snprintf(text + at, sizeof text - (size_t)at, "  - {name: f%d, type: fc, units: 4%s}\n", i,
                       i == 5 && key5 >= 0 ? ", stage: 1" : "");
    snprintf(text + at, sizeof text - (size_t)at, "loss: softmax_cross_entropy\n");
    return dl_net_load_string("list.yaml", text, net, err);
}

/* parallel.stages names the layers that begin stages 1, 2, ...: the same
 * cuts as stage keys on those layers; unknown names, a layer with its own
 * key and a non-list are refused at file:line:col. */
static void stage_list(void **state)
{
    (void)state;
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(load_with_list("[f2, f6]", -1, &net, &err), DL_OK);
    struct dl_stages s;
    assert_int_equal(dl_stages_cut(&net.graph, 3, 1, NULL, &s, &err), DL_OK);
    assert_true(s.from_file);
    assert_int_equal(s.first[1], 2);
    assert_int_equal(s.first[2], 6);
    dl_stages_free(&s);
    assert_int_equal(dl_stages_cut(&net.graph, 2, 1, NULL, &s, &err), DL_ERR_SPEC); /* the list makes 3 stages */
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "layer 'f6': stage 2, but the pipeline has 2 stages"));
    dl_net_free(&net);
    static const struct {
        const char *list;
        int key5;
        const char *says;
    } bad[] = {
        {"[f2, nope]", -1, "list.yaml:2:25: parallel.stages: no layer is named 'nope'"},
        {"[f2, f5]", 1, "layer 'f5' already has a 'stage:' key"},
        {"f2", -1, "list.yaml:2:20: parallel.stages: expected a list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(load_with_list(bad[i].list, bad[i].key5, &net, &err), DL_ERR_SPEC);
        print_message("# %s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i].says));
    }
}

/* P ranks of V stages: the same balanced cut as P*V stages, stage s on
 * rank s % P; stage keys number the P*V stages; too many stages refused
 * naming the ranks, V and the largest V that fits. */
static void virtual_stages(void **state)
{
    struct dl_net net;
    load_chain(&net, NULL);
    struct dl_stages a, b;
    struct dl_error err = {0};
    assert_int_equal(dl_stages_cut(&net.graph, 2, 2, NULL, &a, &err), DL_OK);
    assert_int_equal(dl_stages_cut(&net.graph, 4, 1, NULL, &b, &err), DL_OK);
    assert_int_equal(a.S, 4);
    assert_int_equal(a.V, 2);
    for (int k = 0; k <= 4; k++)
        assert_int_equal(a.first[k], b.first[k]);
    for (int k = 0; k < 4; k++)
        assert_int_equal(dl_stages_rank(&a, k), k % 2);
    dl_stages_free(&a);
    dl_stages_free(&b);
    assert_int_equal(dl_stages_cut(&net.graph, 3, 4, NULL, &a, &err), DL_ERR_SPEC);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "3 pipeline ranks x 4 virtual stages (interleaved:4) = 12 stages"));
    assert_non_null(strstr(err.msg, "V <= 3"));
    dl_net_free(&net);
    int keys[LAYERS] = {-1, -1, 1, -1, 2, -1, 3, -1, -1};
    load_chain(&net, keys);
    assert_int_equal(dl_stages_cut(&net.graph, 2, 2, NULL, &a, &err), DL_OK);
    assert_true(a.from_file);
    assert_true(a.first[1] == 2 && a.first[2] == 4 && a.first[3] == 6);
    dl_stages_free(&a);
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(balanced_cut_is_optimal),
        cmocka_unit_test(default_costs_split_the_work),
        cmocka_unit_test(stage_keys),
        cmocka_unit_test(stage_list),
        cmocka_unit_test(virtual_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
