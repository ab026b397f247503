/* test_netfile.c: the network-file parser.  Every broken file must give an
 * error that starts with file:line:col of the offending spot and says what
 * was expected and what was found; good files must give the expected DAG
 * (default chaining, named inputs, blocks with composed instance names). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "spec/netfile.h"

#define HEAD "input: {shape: [1, 8, 8], classes: 3}\n"

/* Loads text as "bad.yaml" and asserts failure with a message containing
 * every one of the given fragments. */
static void expect_error(const char *text, const char *const *fragments)
{
    struct dl_net net;
    struct dl_error err = {0};
    int rc = dl_net_load_string("bad.yaml", text, &net, &err);
    if (rc == DL_OK) {
        dl_net_free(&net);
        print_error("expected an error, the file loaded:\n%s\n", text);
        fail();
    }
    assert_int_equal(rc, DL_ERR_SPEC);
    for (int i = 0; fragments[i]; i++)
        if (!strstr(err.msg, fragments[i])) {
            print_error("message: %s\nmissing: %s\n", err.msg, fragments[i]);
            fail();
        }
}

#define EXPECT(text, ...)                                        \
    do {                                                         \
        static const char *const frag[] = {__VA_ARGS__, NULL};   \
        expect_error(text, frag);                                \
    } while (0)

static void load_good(const char *text, struct dl_net *net)
{
    struct dl_error err = {0};
    int rc = dl_net_load_string("good.yaml", text, net, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, DL_OK);
}

static void unknown_layer_type(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: c1, type: convv, filters: 4, kernel: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:22:", "unknown layer type 'convv'", "known types: conv");
}

static void unknown_key(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: c1, type: conv, filter: 4, kernel: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:28:", "layer 'c1' (conv)", "unknown key 'filter'", "filters");
}

static void unknown_top_level_key(void **s)
{
    EXPECT(HEAD "layer:\n  - {type: relu}\n", "bad.yaml:2:1:", "unknown key 'layer'");
}

static void wrong_type(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: c1, type: conv, filters: abc, kernel: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:37:", "key 'filters'", "expected an integer", "found 'abc'");
    EXPECT(HEAD "layers:\n  - {name: c1, type: conv, filters: [4], kernel: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:37:", "expected an integer", "found a list");
}

static void bad_number(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: c1, type: conv, filters: -3, kernel: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:37:", "key 'filters'", "found -3");
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n"
                "train: {batch: 0}\n",
           "bad.yaml:5:16:", "train.batch", "found 0");
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n"
                "train: {optimizer: {lr: 1e999}}\n",
           "bad.yaml:5:25:", "train.optimizer.lr", "finite number");
}

static void missing_input(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: a, type: relu}\n  - {name: b, type: add, inputs: [a, nope]}\n"
                "  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:4:38:", "layer 'b' (add)", "input 'nope' is not the name of any layer");
}

static void cycle(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: a, type: relu, inputs: [c]}\n  - {name: b, type: relu, inputs: [a]}\n"
                "  - {name: c, type: relu, inputs: [b]}\n  - {type: fc, units: 3, inputs: [c]}\n"
                "loss: softmax_cross_entropy\n",
           "cycle in the layer graph", "a <- c <- b <- a");
}

static void shape_mismatch(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: a, type: conv, filters: 4, kernel: 3, pad: 1}\n"
                "  - {name: b, type: conv, filters: 5, kernel: 3, pad: 1, inputs: [input]}\n"
                "  - {name: s, type: add, inputs: [a, b]}\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:5:5:", "layer 's' (add)", "4x8x8", "5x8x8");
    EXPECT(HEAD "layers:\n  - {name: c, type: conv, filters: 4, kernel: 9}\n  - {type: fc, units: 3}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:3:5:", "layer 'c' (conv)");
    EXPECT(HEAD "layers:\n  - {name: f, type: fc, units: 4}\nloss: softmax_cross_entropy\n",
           "bad.yaml:4:7:", "has 4 values per sample but input.classes is 3");
}

static void duplicate_name(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: a, type: relu}\n  - {name: a, type: relu}\n  - {type: fc, units: 3}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:4:5:", "duplicate layer name 'a'", "bad.yaml:3:5");
    EXPECT(HEAD "layers:\n  - {name: a, type: relu, name: b}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:27:", "duplicate key 'name'");
}

static void missing_sections(void **s)
{
    EXPECT("layers:\n  - {type: relu}\n", "bad.yaml:1:1:", "missing required key 'input'");
    EXPECT(HEAD "loss: softmax_cross_entropy\n", "bad.yaml:1:1:", "missing required key 'layers'");
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3}\n", "missing required key 'loss'");
    EXPECT(HEAD "layers:\n  - {type: fc}\nloss: softmax_cross_entropy\n", "bad.yaml:3:5:",
           "missing required key 'units'");
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3}\nloss: relu\n", "bad.yaml:4:7:", "not a loss");
}

static void yaml_syntax(void **s)
{
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3\nloss: softmax_cross_entropy\n", "bad.yaml:", "YAML syntax error");
    EXPECT("- just\n- a list\n", "bad.yaml:1:1:", "expected a mapping");
    EXPECT("", "expected a mapping");
    char deep[600] = "input: ";
    for (int i = 0; i < 100; i++)
        strcat(deep, "[");
    strcat(deep, "1");
    for (int i = 0; i < 100; i++)
        strcat(deep, "]");
    EXPECT(deep, "nesting deeper than");
}

/* Anchors, aliases and tags (any: !!str, !!int, !name, a lone !) are
 * refused where they stand, on scalars, lists, mappings and keys; a tag in
 * quotes is text.  description takes any value. */
#define FC(x) HEAD "layers:\n  - {type: fc, " x "}\nloss: softmax_cross_entropy\n"
static void anchors_aliases_tags(void **s)
{
    EXPECT(FC("units: &u 3"), "bad.yaml:3:23:", "found the YAML anchor &u", "not accepted");
    EXPECT(HEAD "layers: &x\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n", "bad.yaml:2:9:",
           "anchor &x");
    EXPECT(FC("units: *u"), "bad.yaml:3:23:", "found the YAML alias *u", "not accepted");
    EXPECT(FC("units: !!str 7"), "bad.yaml:3:23:", "found the YAML tag !!str", "tags are not accepted");
    EXPECT(FC("units: !!int 7"), "bad.yaml:3:23:", "found the YAML tag !!int");
    EXPECT(FC("units: !foo 7"), "bad.yaml:3:23:", "found the YAML tag !foo");
    EXPECT(FC("units: ! 7"), "bad.yaml:3:23:", "found the YAML tag !");
    EXPECT(FC("!!str units: 7"), "bad.yaml:3:16:", "found the YAML tag !!str");
    EXPECT(HEAD "layers: !!seq\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n", "bad.yaml:2:9:",
           "found the YAML tag !!seq");
    EXPECT(HEAD "layers:\n  - !!map {type: fc, units: 3}\nloss: softmax_cross_entropy\n", "bad.yaml:3:5:",
           "found the YAML tag !!map");
    EXPECT(FC("units: \"!!str 7\""), "bad.yaml:3:23:", "expected an integer", "found '!!str 7'");
    struct dl_net net;
    load_good("description: [a list, {of: things}]\n" FC("units: 3"), &net);
    dl_net_free(&net);
    load_good("description: {what: a mapping, items: [1, 2]}\n" FC("units: 3"), &net);
    dl_net_free(&net);
}

static void bad_inputs_count(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: a, type: add}\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:5:", "layer 'a' (add)", "expected 2 to 16 inputs, found 1");
    EXPECT(HEAD "layers:\n  - {name: a, type: relu, inputs: [input, input]}\n  - {type: fc, units: 3}\n"
                "loss: softmax_cross_entropy\n",
           "expected 1 input, found 2");
}

static void unused_output(void **s)
{
    EXPECT(HEAD "layers:\n  - {name: dead, type: relu}\n  - {type: fc, units: 3, inputs: [input]}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:3:5:", "layer 'dead'", "never used");
}

static void block_errors(void **s)
{
    EXPECT(HEAD "blocks:\n  b: {args: {w: 4}, layers: [{type: conv, filters: $w, kernel: 1}]}\n"
                "layers:\n  - {name: x, block: b, args: {width: 4}}\n  - {type: fc, units: 3}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:5:32:", "arguments of block 'b'", "unknown key 'width'");
    EXPECT(HEAD "blocks:\n  b: {args: {w: 4}, layers: [{type: conv, filters: $v, kernel: 1}]}\n"
                "layers:\n  - {name: x, block: b}\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:52:", "layer 'x.conv1' (conv)", "found '$v'");
    EXPECT(HEAD "layers:\n  - {name: x, block: nope}\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:22:", "unknown block 'nope'");
    EXPECT(HEAD "blocks:\n  b: {layers: [{name: y, block: b}]}\nlayers:\n  - {name: x, block: b}\n"
                "  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "blocks nested deeper");
    EXPECT(HEAD "blocks:\n  b: {args: [1, 2], layers: [{type: fc, units: 3}]}\n"
                "layers:\n  - {name: x, block: b}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:13:", "block 'b': args", "expected a mapping", "found a list");
}

static void good_dag_and_blocks(void **s)
{
    const char *text =
        HEAD "blocks:\n"
             "  res:\n"
             "    args: {ch: 1, act: relu}\n"
             "    layers:\n"
             "      - {name: conv1, type: conv, filters: $ch, kernel: 3, pad: 1}\n"
             "      - {name: act, type: $act}\n"
             "      - {name: sum, type: add, inputs: [act, input]}\n"
             "layers:\n"
             "  - {name: stem, type: conv, filters: 2, kernel: 1}\n"
             "  - {name: layer1, block: res, repeat: 2, args: {ch: 2}, first: {args: {act: tanh}}}\n"
             "  - {name: cat, type: concat, inputs: [layer1.1.sum, stem]}\n"
             "  - {name: head, type: fc, units: 3}\n"
             "loss: softmax_cross_entropy\n";
    struct dl_net net;
    load_good(text, &net);
    const struct dl_graph *g = &net.graph;
    assert_int_equal(g->n, 10);
    int i0 = dl_graph_find(g, "layer1.0.act"), i1 = dl_graph_find(g, "layer1.1.act");
    assert_true(i0 >= 0 && i1 >= 0);
    assert_string_equal(g->layers[i0].kind->name, "tanh");
    assert_string_equal(g->layers[i1].kind->name, "relu");
    int sum0 = dl_graph_find(g, "layer1.0.sum"), conv1 = dl_graph_find(g, "layer1.1.conv1");
    assert_int_equal(g->layers[conv1].in[0], sum0);               /* repeat chains instances */
    assert_int_equal(g->layers[sum0].in[1], dl_graph_find(g, "stem")); /* block input */
    int cat = dl_graph_find(g, "cat");
    assert_int_equal(g->layers[cat].out_shape.c, 4);
    assert_int_equal(g->layers[cat].out_shape.h, 8);
    assert_int_equal(g->loss, g->n - 1);
    assert_string_equal(g->layers[g->loss].name, "loss");
    assert_int_equal(g->logits, dl_graph_find(g, "head"));
    /* parameters: stem 2*1+2, two convs 2*2*9+2, head 4*64*3+3 */
    assert_int_equal(dl_graph_param_count(g), 4 + 2 * 38 + 771);
    dl_net_free(&net);
}

static void sections_parsed(void **s)
{
    const char *text = HEAD "layers:\n  - {type: fc, units: 3}\nloss: {type: softmax_cross_entropy}\n"
                            "data: {dataset: synthetic, train_samples: 100, test_samples: 10, normalize: false}\n"
                            "train: {batch: 8, epochs: 2, seed: 9, optimizer: {type: adamw, lr: 0.002, "
                            "weight_decay: 0.01}, schedule: {type: cosine, warmup_epochs: 1}}\n"
                            "parallel: {strategy: hybrid, dp: 2, tp: 1, pp: 2, micro_batches: 4}\n";
    struct dl_net net;
    load_good(text, &net);
    assert_int_equal(net.data.kind, DL_DATASET_SYNTHETIC);
    assert_int_equal(net.data.synthetic_train, 100);
    assert_int_equal(net.data.normalize, 0);
    assert_int_equal(net.train.batch, 8);
    assert_int_equal(net.train.epochs, 2);
    assert_int_equal(net.train.seed, 9);
    assert_int_equal(net.train.optim.kind, DL_OPTIM_ADAMW);
    assert_true(net.train.optim.lr == 0.002);
    assert_int_equal(net.train.sched.kind, DL_SCHED_COSINE);
    assert_int_equal(net.parallel.kind, DL_PAR_HYBRID);
    assert_int_equal(net.parallel.pp, 2);
    assert_int_equal(net.parallel.micro_batches, 4);
    dl_net_free(&net);
}

/* The placement keys every layer takes: stage and split, kept on the layer
 * for parallel/ (inside blocks too), with errors naming layer and key. */
static void stage_and_split_keys(void **s)
{
    const char *text = HEAD "blocks:\n"
                            "  b: {layers: [{name: c, type: conv, filters: 2, kernel: 1, split: channels}]}\n"
                            "layers:\n"
                            "  - {name: stem, type: conv, filters: 2, kernel: 1, split: filters}\n"
                            "  - {name: blk, block: b}\n"
                            "  - {name: head, type: fc, units: 3, stage: 1, split: row}\n"
                            "loss: softmax_cross_entropy\n";
    struct dl_net net;
    load_good(text, &net);
    const struct dl_graph *g = &net.graph;
    const struct dl_layer *stem = &g->layers[dl_graph_find(g, "stem")], *c = &g->layers[dl_graph_find(g, "blk.c")],
                          *head = &g->layers[dl_graph_find(g, "head")];
    assert_true(stem->stage == -1 && stem->split == DL_SPLIT_FILTERS);
    assert_true(c->stage == -1 && c->split == DL_SPLIT_CHANNELS);
    assert_true(head->stage == 1 && head->split == DL_SPLIT_ROW);
    assert_int_equal(g->layers[g->loss].split, DL_SPLIT_AUTO);
    dl_net_free(&net);
    expect_error(HEAD "layers:\n  - {type: fc, units: 3, split: diagonal}\nloss: softmax_cross_entropy\n",
                 (const char *const[]){"bad.yaml:3:", "layer 'fc1', key 'split'", "column", "'diagonal'", NULL});
    expect_error(HEAD "layers:\n  - {type: fc, units: 3, stage: -2}\nloss: softmax_cross_entropy\n",
                 (const char *const[]){"bad.yaml:3:", "layer 'fc1', key 'stage'", "-2", NULL});
}

/* share: names a layer of the same list (inside a block: of the same
 * instance); a chain of shares ends at the stored parameter; an error
 * elsewhere in the file frees the shares parsed so far (ASan). */
static void share_key(void **s)
{
    const char *text = HEAD "blocks:\n"
                            "  b: {layers: [{name: p, type: conv, filters: 1, kernel: 1},\n"
                            "               {name: q, type: conv, filters: 1, kernel: 1, share: {weight: p}}]}\n"
                            "layers:\n"
                            "  - {name: b1, block: b}\n"
                            "  - {name: b2, block: b}\n"
                            "  - {name: r, type: conv, filters: 1, kernel: 1, share: {weight: b2.q}}\n"
                            "  - {name: head, type: fc, units: 3}\n"
                            "loss: softmax_cross_entropy\n";
    struct dl_net net;
    load_good(text, &net);
    const struct dl_graph *g = &net.graph;
    const struct dl_layer *q1 = &g->layers[dl_graph_find(g, "b1.q")], *r = &g->layers[dl_graph_find(g, "r")];
    assert_true(q1->param[0].shares && q1->param[0].share_layer == dl_graph_find(g, "b1.p"));
    assert_true(r->param[0].shares && r->param[0].share_layer == dl_graph_find(g, "b2.p")); /* through b2.q */
    assert_int_equal(q1->param[0].share_param, 0);
    assert_false(q1->param[1].shares);
    /* p, q1, p2, q2 and r: 5 biases, 2 weights */
    assert_int_equal(dl_graph_param_count(g), 5 + 2 + 3 * 64 + 3);
    dl_net_free(&net);
    EXPECT(HEAD "layers:\n  - {name: a, type: fc, units: 3}\n  - {name: b, type: fc, units: 3, share: {weight: a}}\n"
                "  - {name: c, type: relu, colour: red}\nloss: softmax_cross_entropy\n",
           "bad.yaml:5:", "'colour'");
    EXPECT(HEAD "layers:\n  - {name: a, type: fc, units: 3}\n  - {name: b, type: fc, units: 3, share: {weight: [a]}}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:4:", "share");
}

/* The file's args: in every section but blocks (a block's $width stays its
 * own argument), products of integers and arguments; init_std checked and
 * refused where there is no weight matrix. */
static void file_args_and_products(void **s)
{
    const char *text = "args: {width: 6, n: 2, classes: 3}\n"
                       "input: {shape: [4], dtype: i32, classes: $classes}\n"
                       "blocks:\n"
                       "  mlp:\n"
                       "    args: {width: 2}\n"
                       "    layers: [{name: up, type: fc, units: $width*4}, {name: down, type: fc, units: 2*$width}]\n"
                       "layers:\n"
                       "  - {name: wte, type: embedding, vocab: $classes, dim: $width*$n, init_std: 0.02}\n"
                       "  - {name: b, block: mlp, repeat: $n, args: {width: 5}}\n"
                       "  - {name: head, type: fc, units: $classes}\n"
                       "loss: softmax_cross_entropy\n";
    struct dl_net net;
    load_good(text, &net);
    const struct dl_graph *g = &net.graph;
    assert_int_equal(g->classes, 3);
    assert_int_equal(g->layers[dl_graph_find(g, "wte")].out_shape.c, 12);
    /* the block's $width is its own argument (5), not the file's (6) */
    assert_int_equal(g->layers[dl_graph_find(g, "b.0.up")].out_shape.c, 20);
    assert_int_equal(g->layers[dl_graph_find(g, "b.1.down")].out_shape.c, 10);
    const struct dl_layer *wte = &g->layers[dl_graph_find(g, "wte")];
    assert_true(wte->param[0].init == DL_INIT_NORMAL && wte->param[0].std == 0.02);
    dl_net_free(&net);
    EXPECT("args: [1, 2]\n" HEAD "layers:\n  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
           "bad.yaml:1:7:", "args: expected a mapping");
    EXPECT("args: {w: 3}\n" HEAD "layers:\n  - {type: fc, units: $w*x}\nloss: softmax_cross_entropy\n",
           "bad.yaml:4:", "units", "'$w*x'");
    EXPECT(HEAD "layers:\n  - {name: ln, type: batchnorm, init_std: 0.1}\n  - {type: fc, units: 3}\n"
                "loss: softmax_cross_entropy\n",
           "bad.yaml:3:", "layer 'ln' (batchnorm): init_std: it has no weight matrix");
    EXPECT(HEAD "layers:\n  - {type: fc, units: 3, init_std: -1}\nloss: softmax_cross_entropy\n",
           "bad.yaml:3:", "init_std", "-1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_layer_type), cmocka_unit_test(unknown_key),
        cmocka_unit_test(unknown_top_level_key), cmocka_unit_test(wrong_type),
        cmocka_unit_test(bad_number), cmocka_unit_test(missing_input),
        cmocka_unit_test(cycle), cmocka_unit_test(shape_mismatch),
        cmocka_unit_test(duplicate_name), cmocka_unit_test(missing_sections),
        cmocka_unit_test(yaml_syntax), cmocka_unit_test(bad_inputs_count),
        cmocka_unit_test(unused_output), cmocka_unit_test(block_errors),
        cmocka_unit_test(good_dag_and_blocks), cmocka_unit_test(sections_parsed),
        cmocka_unit_test(stage_and_split_keys), cmocka_unit_test(share_key),
        cmocka_unit_test(file_args_and_products), cmocka_unit_test(anchors_aliases_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
