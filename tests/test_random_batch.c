/* test_random_batch.c: the benchmarks' random batch (graph/random_batch.h's
 * dl_graph_random_batch) in the graph input's dtype: token ids of an i32
 * input are int32_t below the vocabulary (id_limit) and cover it; an f32
 * input draws N(0, 1) values; the labels, one per position, lie below the
 * class count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "graph/random_batch.h"
#include "spec/netfile.h"

static const char *TOKENS = "name: ids\n"
                            "input: {shape: [16], dtype: i32, classes: 50}\n"
                            "layers:\n"
                            "  - {name: wte, type: embedding, vocab: 50, dim: 50}\n"
                            "loss: softmax_cross_entropy\n";

static const char *VALUES = "name: values\n"
                            "input: {shape: [3, 5, 5], classes: 7}\n"
                            "layers:\n"
                            "  - {name: fc, type: fc, units: 7}\n"
                            "loss: softmax_cross_entropy\n";

static void check_labels(const struct dl_graph *g, const int *y, int n)
{
    for (long k = 0; k < (long)n * g->positions; k++)
        assert_true(y[k] >= 0 && y[k] < g->classes);
}

static void token_ids_below_the_vocabulary(void **state)
{
    (void)state;
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("ids.yaml", TOKENS, &net, &err), DL_OK);
    const struct dl_graph *g = &net.graph;
    assert_int_equal(g->id_limit, 50);
    void *x = NULL;
    int *y = NULL, n = 32;
    assert_int_equal(dl_graph_random_batch(g, n, &x, &y, &err), DL_OK);
    const int32_t *ids = x;
    long count = n * dl_shape_count(g->input), seen[50] = {0};
    for (long i = 0; i < count; i++) {
        assert_true(ids[i] >= 0 && ids[i] < 50);
        seen[ids[i]]++;
    }
    for (int v = 0; v < 50; v++) /* 512 draws over 50 ids: each about 10 times */
        assert_true(seen[v] > 0);
    assert_int_equal(g->positions, 16);
    check_labels(g, y, n);
    free(x), free(y);
    dl_net_free(&net);
}

static void values_drawn_normal(void **state)
{
    (void)state;
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("values.yaml", VALUES, &net, &err), DL_OK);
    const struct dl_graph *g = &net.graph;
    void *x = NULL;
    int *y = NULL, n = 40;
    assert_int_equal(dl_graph_random_batch(g, n, &x, &y, &err), DL_OK);
    const dl_real *v = x;
    long count = n * dl_shape_count(g->input);
    double sum = 0, squares = 0;
    for (long i = 0; i < count; i++)
        sum += v[i], squares += (double)v[i] * v[i];
    double mean = sum / count, var = squares / count - mean * mean;
    /* 3000 draws: the mean's standard error is 0.018, the variance's 0.026 */
    assert_true(fabs(mean) < 0.1);
    assert_true(fabs(var - 1) < 0.15);
    check_labels(g, y, n);
    free(x), free(y);
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_ids_below_the_vocabulary),
        cmocka_unit_test(values_drawn_normal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
