/* test_attr.c: the kernels' attribute accessors (backends/attr.h).  They
 * return the values the network file gave, through each kind's table; a key
 * the layer's kind does not declare, a key read as the wrong type and an
 * element index out of range each stop the program with a message naming
 * the layer, its kind and the key (a death test: the read runs in a forked
 * child, which must die of SIGABRT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/attr.h"
#include "spec/netfile.h"

static const char net_text[] =
    "input: {shape: [4, 12, 10], classes: 3}\n"
    "layers:\n"
    "  - {type: conv, name: c, filters: 4, kernel: [3, 5], stride: 2, groups: 2, bias: false}\n"
    "  - {type: leaky_relu, name: lr, slope: 0.25}\n"
    "  - {type: relu, name: r}\n"
    "  - {type: batchnorm, name: bn, momentum: 0.3}\n"
    "  - {type: avgpool, name: ap, kernel: 2, pad: 1, count_include_pad: false}\n"
    "  - {type: maxpool, name: mp, kernel: [1, 2]}\n"
    "  - {type: global_avgpool, name: gap}\n"
    "  - {type: fc, units: 3}\n"
    "loss: softmax_cross_entropy\n";

static struct dl_net net;

static int setup(void **state)
{
    struct dl_error err = {0};
    int rc = dl_net_load_string("attr.yaml", net_text, &net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    return rc;
}

static int teardown(void **state)
{
    dl_net_free(&net);
    return 0;
}

static const struct dl_layer *layer(const char *name)
{
    int i = dl_graph_find(&net.graph, name);
    assert_true(i >= 0);
    return &net.graph.layers[i];
}

static void reads_declared_values(void **state)
{
    const struct dl_layer *c = layer("c");
    assert_int_equal(dl_attr_int(c, "kernel", 0), 3);
    assert_int_equal(dl_attr_int(c, "kernel", 1), 5);
    assert_int_equal(dl_attr_int(c, "stride", 1), 2);
    assert_int_equal(dl_attr_int(c, "pad", 0), 0);   /* the table's default */
    assert_int_equal(dl_attr_int(c, "groups", 0), 2);
    assert_int_equal(dl_attr_int(c, "bias", 0), 0);  /* a bool */
    assert_true(dl_attr_float(layer("lr"), "slope") == 0.25);
    assert_true(dl_attr_float(layer("bn"), "momentum") == 0.3);
    assert_true(dl_attr_float(layer("bn"), "eps") == 1e-5);
    struct dl_conv_geom g = dl_conv_geom(c);
    assert_int_equal(g.S, 5);
    assert_int_equal(g.sh, 2);
    assert_int_equal(g.dw, 1);
    assert_int_equal(g.G, 2);
    assert_int_equal(g.bias, 0);
    struct dl_pool_geom pg;
    assert_true(dl_avgpool_geom(layer("ap"), &pg));
    assert_int_equal(pg.kh, 2);
    assert_int_equal(pg.sw, 2); /* stride 0: the kernel */
    assert_int_equal(pg.pw, 1);
    assert_int_equal(pg.exclude_pad, 1);
    assert_int_equal(pg.max, 0);
    assert_true(dl_maxpool_geom(layer("mp"), &pg));
    assert_int_equal(pg.kh, 1);
    assert_int_equal(pg.kw, 2);
    assert_int_equal(pg.max, 1);
    assert_true(dl_global_avgpool_geom(layer("gap"), &pg));
    struct dl_shape in = layer("gap")->in_shape[0];
    assert_int_equal(pg.kh, in.h);
    assert_int_equal(pg.kw, in.w);
}

/* One read a kernel must never make. */
struct misuse {
    const char *layer, *key;
    int i;           /* element index of an int read */
    int as_float;    /* 1: dl_attr_float, 0: dl_attr_int */
    const char *why; /* part of the message */
};

static const struct misuse misuses[] = {
    {"c", "kernal", 0, 0, "declares no such attribute"},       /* a renamed or misspelt key */
    {"r", "slope", 0, 1, "declares no such attribute"},        /* another kind's key */
    {"gap", "kernel", 0, 0, "declares no such attribute"},     /* a kind without attributes */
    {"c", "kernel", 0, 1, "declared as int[2], read as a float"},
    {"lr", "slope", 0, 0, "declared as float, read as an int"},
    {"c", "groups", 1, 0, "element index of a scalar"},
    {"c", "kernel", 2, 0, "element index out of [0, 1]"},
    {"c", "stride", -1, 0, "element index out of [0, 1]"},
};

/* Runs the read in a child with stderr on a pipe; the child must die of
 * SIGABRT after saying which layer, kind and key. */
static void expect_abort(const struct misuse *m)
{
    const struct dl_layer *l = layer(m->layer);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        signal(SIGABRT, SIG_DFL);
        if (m->as_float)
            printf("# read %g\n", dl_attr_float(l, m->key));
        else
            printf("# read %d\n", dl_attr_int(l, m->key, m->i));
        fflush(stdout);
        _exit(0);
    }
    close(fd[1]);
    char msg[1024];
    size_t n = 0;
    for (ssize_t got; n < sizeof msg - 1 && (got = read(fd[0], msg + n, sizeof msg - 1 - n)) > 0;)
        n += (size_t)got;
    msg[n] = 0;
    close(fd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    print_message("# %s.%s[%d] as %s: %s", m->layer, m->key, m->i, m->as_float ? "float" : "int", msg);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    char key[64], where[96];
    snprintf(key, sizeof key, "'%s'", m->key);
    snprintf(where, sizeof where, "layer '%s' (%s)", m->layer, l->kind->name);
    assert_non_null(strstr(msg, key));
    assert_non_null(strstr(msg, where));
    assert_non_null(strstr(msg, m->why));
}

static void misuse_aborts(void **state)
{
    for (size_t i = 0; i < sizeof misuses / sizeof misuses[0]; i++)
        expect_abort(&misuses[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_declared_values),
        cmocka_unit_test(misuse_aborts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
