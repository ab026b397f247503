/* test_tune_net.c: the tuner and micro-batched execution on small networks.
 * LeNet-5 and a small ResNet trained with a forced micro-batched plan (odd
 * sizes, two GEMM libraries inside one layer, other splits per direction)
 * and undivided, in lockstep, give each step the same loss and gradients
 * within the rounding bound of re-associated sums (see same_training); so
 * does the plan the tuner picks.  A warm database measures nothing and
 * gives the same plan; the tuned plan is never slower than the best
 * undivided one; under the tightest workspace limit the kernels of this
 * machine allow (one byte less fails, naming what the layer needs) the
 * ILP's total is at most the DP's under the DP plan's total workspace;
 * plans a kernel cannot follow are rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "core/threads.h"
#include "decisions.h"
#include "exec/exec.h"
#include "spec/netfile.h"
#include "train_steps.h"
#include "tune/tune.h"

#define STEPS 20
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

/* Everything a case allocates, freed by its teardown even when an assertion
 * fails half-way (cmocka leaves the case by longjmp). */
static struct fixture {
    struct dl_net net;
    int have_net;
    struct dl_mbplan plan[2];
    struct dl_tune_report report[2];
    struct dl_exec exec[2];
    float *x;
    int *y;
    double *grad;
} fx;

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

static int case_setup(void **state)
{
    memset(&fx, 0, sizeof fx);
    return 0;
}

static int case_teardown(void **state)
{
    for (int i = 0; i < 2; i++) {
        dl_exec_free(&fx.exec[i]);
        dl_mbplan_free(&fx.plan[i]);
        dl_tune_report_free(&fx.report[i]);
    }
    if (fx.have_net)
        dl_net_free(&fx.net);
    free(fx.x);
    free(fx.y);
    free(fx.grad);
    memset(&fx, 0, sizeof fx);
    return 0;
}

/* text NULL: the shipped LeNet-5 (nets/lenet5.yaml), into fx.net. */
static void load(const char *text)
{
    struct dl_error err = {0};
    char path[1024];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/nets/lenet5.yaml", src ? src : ".");
    int rc = text ? dl_net_load_string("net.yaml", text, &fx.net, &err) : dl_net_load(path, &fx.net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
    fx.have_net = 1;
}

static void init_exec(struct dl_exec *e, const struct dl_mbplan *plan)
{
    struct dl_error err = {0};
    int rc = dl_exec_init(e, &fx.net.graph, BATCH, 3, &(struct dl_exec_options){.plan = plan, .keep_outputs = 1}, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* The longest sum of one step of g on batch samples: a weight gradient sums
 * batch x output positions products, a forward output fan-in ones. */
static long longest_sum(const struct dl_graph *g, int batch)
{
    long n = 1;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        long positions = (long)batch * l->out_shape.h * l->out_shape.w;
        for (int j = 0; j < l->n_params; j++) {
            n = positions > n ? positions : n;
            n = l->param[j].fan_in > n ? l->param[j].fan_in : n;
        }
    }
    return n;
}

/* ||a - b|| / ||a|| over n values (0 when both are zero). */
static double rel_diff(const float *a, const float *b, long n)
{
    double num = 0, den = 0;
    for (long i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return num == 0 ? 0 : den == 0 ? INFINITY : sqrt(num / den);
}

/* Trains `steps` plain SGD steps (train_steps.h's data) with the undivided
 * executor and the one running plan in lockstep: each step both start from
 * the same weights and see the same batch, so a difference is that step's
 * rounding alone and cannot compound.  Micro-batching re-associates sums
 * (a weight gradient's over the samples, and any kernel's whose blocking
 * follows the batch size); a sum of n terms re-associated moves by at most
 * gamma_n = n u / (1 - n u) times the sum of its terms' magnitudes (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 4.2).  Each step's loss
 * and each parameter tensor's gradient (as a norm) must agree within twice
 * gamma_n of the step's longest sum.  The gradient is compared only when
 * both runs made the same ReLU and max-pooling choices (decisions.h): a
 * value within rounding of a kink switches a gradient path on or off.
 * Returns 1 when some gradient differed at all (evidence the parts ran). */
static int same_training(const struct dl_mbplan *plan, int steps)
{
    const struct dl_graph *g = &fx.net.graph;
    struct dl_exec *a = &fx.exec[0], *b = &fx.exec[1];
    init_exec(a, NULL);
    init_exec(b, plan);
    const double u = FLT_EPSILON / 2, n = (double)longest_sum(g, BATCH);
    const double tol = 2 * n * u / (1 - n * u);
    long count = BATCH * dl_shape_count(g->input);
    fx.x = malloc(sizeof *fx.x * (size_t)count);
    fx.y = malloc(sizeof *fx.y * BATCH);
    assert_true(fx.x && fx.y);
    struct dl_rng r;
    dl_rng_seed(&r, 9);
    double worst_loss = 0, worst_grad = 0;
    int differ = 0, compared = 0;
    for (int s = 0; s < steps; s++) {
        int batch = s == steps - 1 ? BATCH - 3 : BATCH; /* a smaller last batch runs undivided */
        for (long i = 0; i < count; i++)
            fx.x[i] = (float)dl_rng_normal(&r);
        for (int k = 0; k < BATCH; k++)
            fx.y[k] = (int)dl_rng_below(&r, (uint64_t)g->classes);
        memcpy(b->weights, a->weights, sizeof *a->weights * (size_t)a->n_weights);
        memcpy(b->state, a->state, sizeof *a->state * (size_t)a->n_state);
        for (int e = 0; e < 2; e++) {
            dl_exec_zero_grad(&fx.exec[e]);
            dl_exec_forward(&fx.exec[e], fx.x, fx.y, batch, 1);
        }
        long kinks = forward_decisions_differ(a, b);
        double la = dl_exec_loss_sum(a), lb = dl_exec_loss_sum(b);
        worst_loss = fmax(worst_loss, fabs(la - lb) / fabs(la));
        dl_exec_backward(a);
        dl_exec_backward(b);
        assert_int_equal(a->status, 0);
        assert_int_equal(b->status, 0);
        differ |= memcmp(a->dweights, b->dweights, sizeof *a->dweights * (size_t)a->n_weights) != 0;
        if (kinks) /* one value at a kink: the step's gradients are not comparable by a rounding bound */
            print_message("# step %d: %ld ReLU or max-pooling choices differ; gradients not compared\n", s, kinks);
        for (int i = 0; !kinks && i < g->n; i++)
            for (int j = 0; j < g->layers[i].n_params; j++) {
                if (!a->dparam[i][j])
                    continue;
                double d = rel_diff(a->dparam[i][j], b->dparam[i][j], g->layers[i].param[j].count);
                if (d > tol)
                    print_message("# step %d: layer '%s' %s gradient differs by %.2e\n", s, g->layers[i].name,
                                  g->layers[i].param[j].name, d);
                worst_grad = fmax(worst_grad, d);
            }
        compared += !kinks;
        assert_true(kinks <= 2); /* more is no rounding: the forward computed something else */
        for (long i = 0; i < a->n_weights; i++)
            a->weights[i] -= 0.05f * a->dweights[i];
    }
    print_message("# %d steps in lockstep (%d with gradients compared): largest relative difference of a loss "
                  "%.1e, of a gradient %.1e; bound 2 gamma_%.0f = %.1e\n",
                  steps, compared, worst_loss, worst_grad, n, tol);
    assert_true(worst_loss <= tol);
    assert_true(worst_grad <= tol);
    assert_true(compared >= steps - 2);
    dl_exec_free(a);
    dl_exec_free(b);
    free(fx.x), free(fx.y);
    fx.x = NULL, fx.y = NULL;
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
    assert_int_equal(dl_kernel_create(k, l, &cfg, &inst, &err), 0);
    size_t saved = dl_kernel_saved_bytes(k, inst);
    k->destroy(inst);
    return dl_kernel_couples(k, saved, l->n_params > 0);
}

/* Forward 4+3+1 (fc: dnnl-gemm, openblas, dnnl-gemm), backward data 5+3,
 * backward weights 2+2+2+2; the workspace of each direction exactly what
 * its largest part needs. */
static void forced_plan(struct dl_mbplan *p)
{
    const struct dl_graph *g = &fx.net.graph;
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
    load(text);
    forced_plan(&fx.plan[0]);
    assert_true(same_training(&fx.plan[0], STEPS)); /* equal within rounding, yet the parts did run */
}

static void lenet5_forced(void **state)
{
    forced_micro_batches(NULL);
}

static void resnet_forced(void **state)
{
    forced_micro_batches(RESNET);
}

static void rejected(const struct dl_mbplan *p, const char *what)
{
    struct dl_error err = {0};
    assert_int_equal(dl_exec_init(&fx.exec[0], &fx.net.graph, BATCH, 3, &(struct dl_exec_options){.plan = p}, &err), DL_ERR_SPEC);
    print_message("# rejected: %s\n", err.msg);
    assert_non_null(strstr(err.msg, what));
}

/* The first layer and direction of p whose first part needs workspace
 * (-1: none); *d gets the direction. */
static int needs_workspace(const struct dl_mbplan *p, int *d)
{
    for (int i = 0; i < fx.net.graph.n; i++)
        for (*d = 0; *d < DL_N_DIRS; (*d)++) {
            const struct dl_mbplan_dir *pd = &p->layer[i].dir[*d];
            if (pd->n && part_ws(pd->part[0].kernel, &fx.net.graph.layers[i], pd->part[0].mb, *d) > 0)
                return i;
        }
    return -1;
}

static void bad_plans(void **state)
{
    load(NULL);
    struct dl_mbplan *plan = &fx.plan[0];
    int fc1 = dl_graph_find(&fx.net.graph, "fc1"), pool = 2, d;
    forced_plan(plan);
    plan->layer[fc1].dir[DL_DIR_FORWARD].part[0].count = 2; /* 8 + 3 + 1 samples */
    rejected(plan, "covers 12 samples");
    dl_mbplan_free(plan);
    forced_plan(plan);
    int ws_layer = needs_workspace(plan, &d); /* LeNet's conv1 runs the direct kernel on padded planes */
    assert_true(ws_layer >= 0);
    plan->layer[ws_layer].dir[d].ws_bytes = 0;
    rejected(plan, "workspace");
    dl_mbplan_free(plan);
    forced_plan(plan);
    assert_true(keeps_state(dl_kernel_select(&fx.net.graph.layers[pool], NULL), &fx.net.graph.layers[pool]));
    plan->layer[pool].dir[DL_DIR_BACKWARD_DATA] = plan->layer[pool].dir[DL_DIR_FORWARD];
    plan->layer[pool].dir[DL_DIR_BACKWARD_DATA].part[0].mb = 2;
    plan->layer[pool].dir[DL_DIR_BACKWARD_DATA].part[0].count = 2;
    rejected(plan, "split the batch as the forward does");
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

static void tune(const struct dl_tune_options *o, int which)
{
    struct dl_error err = {0};
    int rc = dl_tune_net(&fx.net.graph, BATCH, o, &fx.plan[which], &fx.report[which], &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void warm_database_and_tuned_training(void **state)
{
    load(NULL);
    struct dl_tune_options o;
    tune_opts(&o, DL_TUNE_ALL);
    tune(&o, 0);
    tune(&o, 1);
    const struct dl_tune_report *r1 = &fx.report[0], *r2 = &fx.report[1];
    print_message("# cold: %ld measured in %.2f s; warm: %ld measured, %ld cached, %.3f s\n", r1->measured,
                  r1->total_seconds, r2->measured, r2->cached, r2->total_seconds);
    assert_true(r1->measured > 0);
    assert_int_equal(r2->measured, 0);
    assert_int_equal(r2->cached, r1->measured + r1->cached);
    for (int i = 0; i < fx.net.graph.n; i++) {
        assert_int_equal(fx.plan[0].layer[i].tuned, fx.plan[1].layer[i].tuned);
        for (int d = 0; d < DL_N_DIRS; d++)
            assert_true(dl_mbplan_dir_same(&fx.plan[0].layer[i].dir[d], &fx.plan[1].layer[i].dir[d]));
        if (r1->layer[i].tuned) /* the undivided plan is a candidate: never faster */
            assert_true(r1->layer[i].time_s <= r1->layer[i].undivided_s * (1 + 1e-12));
    }
    same_training(&fx.plan[0], STEPS);
}

/* The tightest per-layer limit under which every layer still has a plan:
 * the largest of the layers' least workspaces, as the kernels of this
 * machine report them (an unlimited tuning run measures them all). */
static size_t tightest_limit(const struct dl_tune_options *base)
{
    struct dl_tune_options o = *base;
    o.workspace_limit = 0;
    tune(&o, 0);
    size_t limit = 1; /* 0 would mean no limit */
    for (int i = 0; i < fx.net.graph.n; i++)
        if (fx.report[0].layer[i].tuned) {
            assert_true(fx.report[0].layer[i].least_ws != SIZE_MAX);
            limit = fx.report[0].layer[i].least_ws > limit ? fx.report[0].layer[i].least_ws : limit;
        }
    dl_mbplan_free(&fx.plan[0]);
    dl_tune_report_free(&fx.report[0]);
    return limit;
}

static void ilp_not_worse_than_dp(void **state)
{
    load(RESNET);
    const struct dl_graph *g = &fx.net.graph;
    struct dl_tune_options o;
    tune_opts(&o, DL_TUNE_POWER_OF_TWO);
    size_t limit = o.workspace_limit = tightest_limit(&o);
    struct dl_error err = {0};
    if (o.workspace_limit > 1) { /* one byte less: some layer has no plan, and the message says what it needs */
        struct dl_tune_options too_tight = o;
        too_tight.workspace_limit--;
        assert_int_equal(dl_tune_net(g, BATCH, &too_tight, &fx.plan[0], NULL, &err), DL_ERR_SPEC);
        print_message("# %s\n", err.msg);
        assert_non_null(strstr(err.msg, "the least it needs is"));
    }
    tune(&o, 0);
    const struct dl_mbplan *dp = &fx.plan[0];
    int split = 0; /* layers the DP divided */
    for (int i = 0; i < g->n; i++)
        for (int d = 0; d < DL_N_DIRS; d++)
            split += dp->layer[i].dir[d].n && dp->layer[i].dir[d].part[0].mb < BATCH;
    /* the DP plan's total workspace, each direction (or state-sharing unit) counted once */
    size_t total = 0;
    for (int i = 0; i < g->n; i++)
        for (int d = 0; d < DL_N_DIRS; d++) {
            const struct dl_mbplan_dir *x = &dp->layer[i].dir[d];
            int dup = d > 0 && dl_mbplan_dir_same(x, &dp->layer[i].dir[0]) && dp->layer[i].dir[d].time_s == 0;
            if (dp->layer[i].tuned && x->n && !dup)
                total += (x->ws_bytes + 1023) / 1024 * 1024;
        }
    o.workspace_total = total ? total : 1024;
    o.workspace_limit = 0;
    o.no_measure = 1;
    tune(&o, 1);
    double td = plan_time(&fx.report[0], g->n), ti = plan_time(&fx.report[1], g->n);
    print_message("# limit %zu bytes (%d directions split); total workspace %zu bytes: DP %.3f ms, ILP %.3f ms "
                  "(ILP plan workspace %zu)\n",
                  limit, split, total, 1e3 * td, 1e3 * ti, fx.plan[1].workspace_bytes);
    assert_true(ti <= td * (1 + 1e-9));
    assert_true(fx.plan[1].workspace_bytes <= total + 64 * 3 * (size_t)g->n);
    same_training(&fx.plan[1], STEPS); /* the divided workspace runs too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lenet5_forced, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(resnet_forced, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(bad_plans, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(warm_database_and_tuned_training, case_setup, case_teardown),
        cmocka_unit_test_setup_teardown(ilp_not_worse_than_dp, case_setup, case_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
