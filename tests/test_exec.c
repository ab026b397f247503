/* test_exec.c: the executor's backward over a whole graph with branches,
 * fan-out (one tensor feeding three layers), add and concat merges, batch
 * normalisation and dropout, and over a graph whose layers share a weight
 * (share:, both uses' gradients in one tensor), against central finite
 * differences of the mean loss (double-precision build), plus the
 * gradient-ready hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "spec/netfile.h"

static const char *const NET =
    "input: {shape: [2, 6, 5], classes: 4}\n"
    "layers:\n"
    "  - {name: stem, type: conv, filters: 3, kernel: 3, pad: 1}\n"
    "  - {name: act, type: tanh}\n"
    "  - {name: a, type: conv, filters: 3, kernel: 1, inputs: [act]}\n"
    "  - {name: bn, type: batchnorm, inputs: [a]}\n"
    "  - {name: b, type: conv, filters: 3, kernel: 3, pad: 1, inputs: [act]}\n"
    "  - {name: sum, type: add, inputs: [bn, b, act]}\n"
    "  - {name: cat, type: concat, inputs: [sum, input]}\n"
    "  - {name: drop, type: dropout, rate: 0.25}\n"
    "  - {name: pool, type: maxpool, kernel: 2}\n"
    "  - {name: head, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

/* Two layers of one [6, 6] weight (ALBERT's cross-layer sharing), the
 * second reading the first's output through tanh. */
static const char *const TIED =
    "input: {shape: [2, 6, 5], classes: 4}\n"
    "layers:\n"
    "  - {name: stem, type: fc, units: 6}\n"
    "  - {name: act, type: tanh}\n"
    "  - {name: mid, type: fc, units: 6}\n"
    "  - {name: act2, type: tanh}\n"
    "  - {name: mid2, type: fc, units: 6, share: {weight: mid}}\n"
    "  - {name: act3, type: tanh}\n"
    "  - {name: head, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n";

struct fixture {
    struct dl_net net;
    struct dl_exec e;
    dl_real *x;
    int labels[3];
    int hook_calls;
    int hook_order_ok;
    int last_layer;
};

static double mean_loss(struct fixture *f)
{
    dl_exec_forward(&f->e, f->x, f->labels, 3, 1);
    return dl_exec_loss_sum(&f->e) / 3;
}

static void hook(void *ctx, int layer)
{
    struct fixture *f = ctx;
    f->hook_calls++;
    if (layer >= f->last_layer) /* backward visits layers in reverse order */
        f->hook_order_ok = 0;
    f->last_layer = layer;
}

static void check_gradient(const char *net)
{
    struct fixture f;
    memset(&f, 0, sizeof f);
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("exec.yaml", net, &f.net, &err), DL_OK);
    assert_int_equal(dl_exec_init(&f.e, &f.net.graph, 3, 7, NULL, &err), DL_OK);
    long count = 3 * dl_shape_count(f.net.graph.input);
    f.x = calloc((size_t)count, sizeof *f.x);
    struct dl_rng r;
    dl_rng_seed(&r, 3);
    for (long i = 0; i < count; i++)
        f.x[i] = (dl_real)dl_rng_normal(&r);
    for (int n = 0; n < 3; n++)
        f.labels[n] = (int)dl_rng_below(&r, 4);

    mean_loss(&f);
    dl_exec_zero_grad(&f.e);
    f.hook_order_ok = 1;
    f.last_layer = f.net.graph.n;
    f.e.hooks.grad_hook = hook;
    f.e.hooks.grad_hook_ctx = &f;
    dl_exec_backward(&f.e);
    assert_int_equal(f.hook_calls, f.net.graph.n);
    assert_true(f.hook_order_ok);
    assert_int_equal(f.e.flat.weight_begin[f.net.graph.n], f.e.n_weights);
    assert_int_equal(f.e.n_weights, dl_graph_param_count(&f.net.graph));

    dl_real *analytic = calloc((size_t)f.e.n_weights, sizeof *analytic);
    memcpy(analytic, f.e.dweights, sizeof *analytic * (size_t)f.e.n_weights);
    const double h = 1e-6;
    for (long i = 0; i < f.e.n_weights; i++) {
        dl_real keep = f.e.weights[i];
        f.e.weights[i] = keep + h;
        double lp = mean_loss(&f);
        f.e.weights[i] = keep - h;
        double lm = mean_loss(&f);
        f.e.weights[i] = keep;
        double numeric = (lp - lm) / (2 * h);
        if (fabs(numeric - analytic[i]) > 1e-6 + 1e-5 * fabs(numeric)) {
            print_error("weight %ld: analytic %.10g, numeric %.10g\n", i, (double)analytic[i], numeric);
            fail();
        }
    }
    free(analytic);
    free(f.x);
    dl_exec_free(&f.e);
    dl_net_free(&f.net);
}

static void whole_graph_gradient(void **state)
{
    check_gradient(NET);
}

/* The tied weight is stored once: both layers read the one tensor, and its
 * gradient (finite differences move both uses) is the sum of theirs. */
static void tied_weight_gradient(void **state)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("tied.yaml", TIED, &net, &err), DL_OK);
    const struct dl_graph *g = &net.graph;
    int mid = dl_graph_find(g, "mid"), mid2 = dl_graph_find(g, "mid2");
    assert_true(g->layers[mid2].param[0].shares && !g->layers[mid2].param[1].shares);
    assert_int_equal(g->layers[mid2].param[0].share_layer, mid);
    assert_int_equal(dl_graph_param_count(g), 6 * 60 + 6 + 6 * 6 + 6 + 6 + 4 * 6 + 4);
    struct dl_exec e;
    assert_int_equal(dl_exec_init(&e, g, 2, 5, NULL, &err), DL_OK);
    assert_ptr_equal(e.param[mid2][0], e.param[mid][0]);
    assert_ptr_equal(e.dparam[mid2][0], e.dparam[mid][0]);
    assert_ptr_not_equal(e.param[mid2][1], e.param[mid][1]);
    dl_exec_free(&e);
    dl_net_free(&net);
    check_gradient(TIED);
}

/* init_std: the weight matrices from N(0, init_std), the biases 0; the
 * layer norm keeps ones and zeros. */
static void init_std_draws(void **state)
{
    static const char *const net = "input: {shape: [8], dtype: i32, classes: 32}\n"
                                   "layers:\n"
                                   "  - {name: wte, type: embedding, vocab: 32, dim: 64, init_std: 0.02}\n"
                                   "  - {name: ln, type: layernorm}\n"
                                   "  - {name: fc, type: fc, units: 64, init_std: 0.005}\n"
                                   "  - {name: head, type: fc, units: 32}\n"
                                   "loss: softmax_cross_entropy\n";
    struct dl_net f;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("init.yaml", net, &f, &err), DL_OK);
    struct dl_exec e;
    assert_int_equal(dl_exec_init(&e, &f.graph, 2, 3, NULL, &err), DL_OK);
    const struct dl_graph *g = &f.graph;
    const struct { const char *layer; long n; double std; } w[] = {{"wte", 32 * 64, 0.02}, {"fc", 64 * 64, 0.005}};
    for (int k = 0; k < 2; k++) {
        int i = dl_graph_find(g, w[k].layer);
        double ss = 0;
        for (long j = 0; j < w[k].n; j++)
            ss += (double)e.param[i][0][j] * (double)e.param[i][0][j];
        double std = sqrt(ss / (double)w[k].n); /* within 5%: 2000-4000 draws give about 1.5% */
        if (fabs(std / w[k].std - 1) > 0.05) {
            print_error("%s: standard deviation %g, expected %g\n", w[k].layer, std, w[k].std);
            fail();
        }
    }
    int fc = dl_graph_find(g, "fc"), ln = dl_graph_find(g, "ln"), head = dl_graph_find(g, "head");
    for (int j = 0; j < 64; j++)
        assert_true(e.param[fc][1][j] == 0 && e.param[ln][0][j] == 1 && e.param[ln][1][j] == 0);
    double most = 0; /* the head keeps PyTorch's U(-1/sqrt(64), 1/sqrt(64)) */
    for (int j = 0; j < 32 * 64; j++)
        most = fmax(most, fabs((double)e.param[head][0][j]));
    assert_true(most > 0.1 && most <= 0.125);
    dl_exec_free(&e);
    dl_net_free(&f);
}

static void same_seed_same_weights(void **state)
{
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("exec.yaml", NET, &net, &err), DL_OK);
    struct dl_exec a, b, c;
    assert_int_equal(dl_exec_init(&a, &net.graph, 2, 5, NULL, &err), DL_OK);
    assert_int_equal(dl_exec_init(&b, &net.graph, 2, 5, NULL, &err), DL_OK);
    assert_int_equal(dl_exec_init(&c, &net.graph, 2, 6, NULL, &err), DL_OK);
    assert_memory_equal(a.weights, b.weights, sizeof(dl_real) * (size_t)a.n_weights);
    assert_true(memcmp(a.weights, c.weights, sizeof(dl_real) * (size_t)a.n_weights) != 0);
    /* batch-norm running variance starts at 1, running mean at 0 */
    assert_int_equal(a.n_state, 6);
    assert_true(a.state[0] == 0 && a.state[3] == 1);
    dl_exec_free(&a);
    dl_exec_free(&b);
    dl_exec_free(&c);
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_graph_gradient),
        cmocka_unit_test(tied_weight_gradient),
        cmocka_unit_test(init_std_draws),
        cmocka_unit_test(same_seed_same_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
