/* test_tune_net.c: the tuner and micro-batched execution on small networks.
 * Training LeNet-5 and a small ResNet for 20 SGD steps with a forced
 * micro-batched plan (odd sizes, two GEMM libraries inside one layer, other
 * splits per direction) gives the losses and weights of undivided training
 * within 1e-5 relative; so does the plan the tuner picks.  A warm database
 * measures nothing and gives the same plan; the tuned plan is never slower
 * than the best undivided one; the ILP's total is at most the DP's under the
 * DP plan's total workspace; plans a kernel cannot follow are rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "core/threads.h"
#include "exec/exec.h"
#include "spec/netfile.h"
#include "train_steps.h"
#include "tune/tune.h"

#define STEPS 20
/* Steps for plans whose kernels the tuner picks by time.  Two kernels of
 * one layer differ in rounding (1e-7); after enough steps some ReLU or
 * max-pooling winner decided by that much flips and the runs part for
 * good: LeNet-5 with fc1 on the reference kernel instead of dnnl-gemm
 * agrees to 1e-7 for 18 steps, then its conv2 weight gradients differ by
 * 1e-3.  Forced plans keep the default kernels (and STEPS). */
#define TUNED_STEPS 10
#define BATCH 8

/* A small ResNet unlike the kernels test's: leaky ReLU, average pooling, a
 * projection shortcut, tanh, two residual additions, batch norm (never
 * split) between tuned layers. */
static const char *const RESNET =
    "input: {shape: [3, 16, 16], classes: 5}\n"
    "layers:\n"
    "  - {name: stem, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}\n"
    "  - {name: stem_bn, type: batchnorm}\n"
    "  - {name: stem_act, type: leaky_relu}\n"
    "  - {name: a1, type: conv, filters: 8, kernel: 3, pad: 1}\n"
    "  - {name: a1_act, type: relu}\n"
    "  - {name: a2, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}\n"
    "  - {name: a2_bn, type: batchnorm}\n"
    "  - {name: a_add, type: add, inputs: [a2_bn, stem_act]}\n"
    "  - {name: a_act, type: relu}\n"
    "  - {name: down, type: avgpool, kernel: 2, stride: 2}\n"
    "  - {name: b1, type: conv, filters: 16, kernel: 3, pad: 1}\n"
    "  - {name: b1_act, type: tanh}\n"
    "  - {name: b2, type: conv, filters: 16, kernel: 3, pad: 1}\n"
    "  - {name: proj, type: conv, filters: 16, kernel: 1, inputs: [down]}\n"
    "  - {name: b_add, type: add, inputs: [b2, proj]}\n"
    "  - {name: b_act, type: relu}\n"
    "  - {name: gap, type: global_avgpool}\n"
    "  - {name: head, type: fc, units: 5}\n"
    "loss: softmax_cross_entropy\n";

static char db_path[64];

static int setup(void **state)
{
    snprintf(db_path, sizeof db_path, "/tmp/dltrain-test-tune-net-%d.sqlite", (int)getpid());
    dl_threads_set(1); /* one thread: no waiting on a loaded machine's scheduler at every parallel loop */
    return 0;
}

static int teardown(void **state)
{
    char p[96];
    const char *suffix[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", db_path, suffix[i]);
        unlink(p);
    }
    return 0;
}

/* text NULL: the shipped LeNet-5 (nets/lenet5.yaml). */
static void load(const char *text, struct dl_net *net)
{
    struct dl_error err = {0};
    char path[1024];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/nets/lenet5.yaml", src ? src : ".");
    int rc = text ? dl_net_load_string("net.yaml", text, net, &err) : dl_net_load(path, net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* Losses of `steps` SGD steps on random data (the last on a smaller batch,
 * which runs undivided) and the final weights. */
static void train(const struct dl_net *net, const struct dl_mbplan *plan, int steps, double *loss, float **w,
                  long *n)
{
    struct dl_error err = {0};
    struct dl_exec e;
    int rc = dl_exec_init_plan(&e, &net->graph, BATCH, 3, NULL, plan, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
    train_steps(&e, net->graph.classes, BATCH, steps, loss, w, n);
    dl_exec_free(&e);
}

/* Trains `steps` steps with and without plan; returns 1 when the weights differ at all
 * (evidence that the parts ran). */
static int same_training(const struct dl_net *net, const struct dl_mbplan *plan, int steps)
{
    double a[STEPS], b[STEPS];
    float *wa, *wb;
    long n;
    train(net, NULL, steps, a, &wa, &n);
    train(net, plan, steps, b, &wb, &n);
    double worst = 0;
    for (int s = 0; s < steps; s++)
        worst = fmax(worst, fabs(a[s] - b[s]) / fabs(a[s]));
    double num = 0, den = 1e-30;
    int differ = 0;
    for (long i = 0; i < n; i++) {
        num = fmax(num, fabs((double)wa[i] - wb[i]));
        den = fmax(den, fabs((double)wa[i]));
        differ |= wa[i] != wb[i];
    }
    print_message("# %d steps: largest relative loss difference %.1e (last loss %.5f), weights %.1e\n", steps,
                  worst, b[steps - 1], num / den);
    assert_true(worst <= 1e-5);
    assert_true(num / den <= 1e-5);
    free(wa);
    free(wb);
    return differ;
}

static size_t part_ws(const struct dl_kernel *k, const struct dl_layer *l, int mb, int d)
{
    size_t ws[DL_N_DIRS];
    struct dl_error err = {0};
    assert_int_equal(dl_kernel_workspace(k, l, mb, ws, &err), 0);
    return ws[d];
}

/* Kernel state from forward to backward, or weight gradients computed in
 * backward-data: then every direction must split like the forward. */
static int keeps_state(const struct dl_kernel *k, const struct dl_layer *l)
{
    struct dl_kernel_config cfg = {.mb = 1};
    enum dl_layout offered[DL_MAX_INPUTS] = {DL_LAYOUT_PLAIN};
    dl_kernel_layouts(k, l, offered, cfg.in, &cfg.out);
    void *inst;
    struct dl_error err = {0};
    assert_int_equal(k->create(l, &cfg, &inst, &err), 0);
    size_t saved = k->saved_bytes ? k->saved_bytes(inst) : 0;
    k->destroy(inst);
    return saved > 0 || (l->n_params && !k->backward_weights);
}

/* Forward 4+3+1 (fc: dnnl-gemm, openblas, dnnl-gemm), backward data 5+3,
 * backward weights 2+2+2+2; the workspace of each direction exactly what
 * its largest part needs. */
static void forced_plan(const struct dl_net *net, struct dl_mbplan *p)
{
    const struct dl_graph *g = &net->graph;
    struct dl_error err = {0};
    assert_int_equal(dl_mbplan_alloc(p, g->n, BATCH, &err), 0);
    static const int split[DL_N_DIRS][4] = {{4, 3, 1, 0}, {5, 3, 0, 0}, {2, 2, 2, 2}};
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        const struct dl_kernel *k = dl_kernel_select(l, NULL);
        if (!dl_tune_layer_tunable(l) || k->whole_batch)
            continue;
        const struct dl_kernel *alt = dl_kernel_find(l->kind, "openblas");
        if (!alt || k->layouts || alt->layouts || (alt->supports && !alt->supports(l)))
            alt = k;
        int coupled = keeps_state(k, l) || keeps_state(alt, l);
        p->layer[i].tuned = 1;
        for (int d = 0; d < DL_N_DIRS; d++) {
            struct dl_mbplan_dir *pd = &p->layer[i].dir[d];
            const int *sp = split[coupled ? 0 : d];
            if (d == DL_DIR_BACKWARD_WEIGHTS && !l->n_params)
                continue;
            for (int j = 0; j < 4 && sp[j]; j++) {
                const struct dl_kernel *kk = j == 1 ? alt : k;
                assert_int_equal(dl_mbplan_dir_add(pd, kk, sp[j], 1, &err), 0);
                size_t w = part_ws(kk, l, sp[j], d);
                pd->ws_bytes = w > pd->ws_bytes ? w : pd->ws_bytes;
            }
        }
    }
    dl_mbplan_finish(p);
}

static void forced_micro_batches(const char *text)
{
    struct dl_net net;
    struct dl_mbplan plan;
    load(text, &net);
    forced_plan(&net, &plan);
    assert_true(same_training(&net, &plan, STEPS)); /* equal within 1e-5, yet the parts did run */
    dl_mbplan_free(&plan);
    dl_net_free(&net);
}

static void lenet5_forced(void **state)
{
    forced_micro_batches(NULL);
}

static void resnet_forced(void **state)
{
    forced_micro_batches(RESNET);
}

static void rejected(const struct dl_net *net, const struct dl_mbplan *p, const char *what)
{
    struct dl_exec e;
    struct dl_error err = {0};
    assert_int_equal(dl_exec_init_plan(&e, &net->graph, BATCH, 3, NULL, p, &err), DL_ERR_SPEC);
    print_message("# rejected: %s\n", err.msg);
    assert_non_null(strstr(err.msg, what));
}

static void bad_plans(void **state)
{
    struct dl_net net;
    struct dl_mbplan plan;
    load(NULL, &net);
    int fc1 = dl_graph_find(&net.graph, "fc1"), pool = 2;
    forced_plan(&net, &plan);
    plan.layer[fc1].dir[DL_DIR_FORWARD].part[0].count = 2; /* 8 + 3 + 1 samples */
    rejected(&net, &plan, "covers 12 samples");
    dl_mbplan_free(&plan);
    forced_plan(&net, &plan);
    plan.layer[fc1].dir[DL_DIR_FORWARD].ws_bytes = 0;
    if (part_ws(plan.layer[fc1].dir[0].part[0].kernel, &net.graph.layers[fc1], 4, 0) > 0)
        rejected(&net, &plan, "workspace");
    dl_mbplan_free(&plan);
    forced_plan(&net, &plan);
    if (keeps_state(dl_kernel_select(&net.graph.layers[pool], NULL), &net.graph.layers[pool])) {
        plan.layer[pool].dir[DL_DIR_BACKWARD_DATA] = plan.layer[pool].dir[DL_DIR_FORWARD];
        plan.layer[pool].dir[DL_DIR_BACKWARD_DATA].part[0].mb = 2;
        plan.layer[pool].dir[DL_DIR_BACKWARD_DATA].part[0].count = 2;
        rejected(&net, &plan, "split the batch as the forward does");
    }
    dl_mbplan_free(&plan);
    dl_net_free(&net);
}

static void tune_opts(struct dl_tune_options *o, enum dl_tune_policy p)
{
    dl_tune_options_default(o);
    o->policy = p;
    o->db_path = db_path;
    o->warmup = 0;
    o->repeats = 1;
}

static double plan_time(const struct dl_tune_report *r, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++)
        t += r->layer[i].time_s;
    return t;
}

static void warm_database_and_tuned_training(void **state)
{
    struct dl_net net;
    load(NULL, &net);
    struct dl_tune_options o;
    tune_opts(&o, DL_TUNE_ALL);
    struct dl_mbplan p1, p2;
    struct dl_tune_report r1, r2;
    struct dl_error err = {0};
    assert_int_equal(dl_tune_net(&net.graph, BATCH, &o, &p1, &r1, &err), 0);
    assert_true(r1.measured > 0);
    assert_int_equal(dl_tune_net(&net.graph, BATCH, &o, &p2, &r2, &err), 0);
    print_message("# cold: %ld measured in %.2f s; warm: %ld measured, %ld cached, %.3f s\n", r1.measured,
                  r1.total_seconds, r2.measured, r2.cached, r2.total_seconds);
    assert_int_equal(r2.measured, 0);
    assert_int_equal(r2.cached, r1.measured + r1.cached);
    for (int i = 0; i < net.graph.n; i++) {
        assert_int_equal(p1.layer[i].tuned, p2.layer[i].tuned);
        for (int d = 0; d < DL_N_DIRS; d++)
            assert_true(dl_mbplan_dir_same(&p1.layer[i].dir[d], &p2.layer[i].dir[d]));
        if (r1.layer[i].tuned) /* the undivided plan is a candidate: never faster */
            assert_true(r1.layer[i].time_s <= r1.layer[i].undivided_s * (1 + 1e-12));
    }
    same_training(&net, &p1, TUNED_STEPS);
    dl_mbplan_free(&p1), dl_mbplan_free(&p2);
    dl_tune_report_free(&r1), dl_tune_report_free(&r2);
    dl_net_free(&net);
}

static void ilp_not_worse_than_dp(void **state)
{
    struct dl_net net;
    load(RESNET, &net);
    struct dl_tune_options o;
    tune_opts(&o, DL_TUNE_POWER_OF_TWO);
    o.workspace_limit = 48 << 10; /* tight: the DP must split some layers */
    struct dl_mbplan dp, ilp;
    struct dl_tune_report rd, ri;
    struct dl_error err = {0};
    assert_int_equal(dl_tune_net(&net.graph, BATCH, &o, &dp, &rd, &err), 0);
    /* the DP plan's total workspace, each direction (or state-sharing unit) counted once */
    size_t total = 0;
    for (int i = 0; i < net.graph.n; i++)
        for (int d = 0; d < DL_N_DIRS; d++) {
            const struct dl_mbplan_dir *x = &dp.layer[i].dir[d];
            int dup = d > 0 && dl_mbplan_dir_same(x, &dp.layer[i].dir[0]) && dp.layer[i].dir[d].time_s == 0;
            if (dp.layer[i].tuned && x->n && !dup)
                total += (x->ws_bytes + 1023) / 1024 * 1024;
        }
    o.workspace_total = total ? total : 1024;
    o.workspace_limit = 0;
    o.no_measure = 1;
    int rc = dl_tune_net(&net.graph, BATCH, &o, &ilp, &ri, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
    double td = plan_time(&rd, net.graph.n), ti = plan_time(&ri, net.graph.n);
    print_message("# tuned in %.2f s; total workspace %zu bytes: DP %.3f ms, ILP %.3f ms (ILP plan workspace %zu)\n",
                  rd.total_seconds, total, 1e3 * td, 1e3 * ti, ilp.workspace_bytes);
    assert_true(ti <= td * (1 + 1e-9));
    assert_true(ilp.workspace_bytes <= total + 64 * 3 * (size_t)net.graph.n);
    same_training(&net, &ilp, TUNED_STEPS); /* the divided workspace runs too */
    dl_mbplan_free(&dp), dl_mbplan_free(&ilp);
    dl_tune_report_free(&rd), dl_tune_report_free(&ri);
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lenet5_forced),
        cmocka_unit_test(resnet_forced),
        cmocka_unit_test(bad_plans),
        cmocka_unit_test(warm_database_and_tuned_training),
        cmocka_unit_test(ilp_not_worse_than_dp),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
