/* test_optim.c: optimizers and schedules against numbers computed by
 * PyTorch 1.13's torch.optim (tests/optim_reference.py prints them): a
 * 3-element weight vector, the fixed gradient sequence g_t = (0.5, -1.0, 2.0)
 * * (t + 1) / 2, five steps each; each optimizer also with every term of
 * its rule large enough to show (weight decay, eps, betas).  LARS's and
 * LAMB's first step (no PyTorch has them; test_layerwise.sh compares 20
 * steps with the papers' rules) against numbers worked by hand: a ratio per
 * tensor, 1 for a tensor of zero weights and for one no_decay leaves out;
 * a tensor cut by a ZeRO block refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "optim/optim.h"
#include "optim/schedule.h"

#include "optim_reference.h"

static void run(const struct dl_optim_spec *spec, const double expected[3])
{
    struct dl_optim o;
    struct dl_error err = {0};
    assert_int_equal(dl_optim_init(&o, spec, 3, &err), DL_OK);
    float w[3] = {1.0f, -2.0f, 0.5f};
    for (int t = 0; t < 5; t++) {
        float g[3] = {0.5f * (t + 1) / 2, -1.0f * (t + 1) / 2, 2.0f * (t + 1) / 2};
        dl_optim_step(&o, spec->lr, w, g);
    }
    for (int i = 0; i < 3; i++)
        if (fabs(w[i] - expected[i]) > 1e-5 * (1 + fabs(expected[i]))) {
            print_error("%s: w[%d] = %.8f, PyTorch %.8f\n", o.algo->name, i, w[i], expected[i]);
            fail();
        }
    dl_optim_free(&o);
}

static struct dl_optim_spec base(enum dl_optim_kind k, double lr)
{
    struct dl_optim_spec s;
    memset(&s, 0, sizeof s);
    s.kind = k;
    s.lr = lr;
    s.beta1 = 0.9;
    s.beta2 = 0.999;
    s.alpha = 0.99;
    s.eps = 1e-8;
    return s;
}

static void sgd_plain(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_SGD, 0.1);
    run(&s, REF_SGD);
}

static void sgd_momentum_wd(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_SGD, 0.1);
    s.momentum = 0.9;
    s.weight_decay = 0.01;
    run(&s, REF_SGD_MOMENTUM_WD);
}

static void sgd_nesterov(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_SGD, 0.1);
    s.momentum = 0.9;
    s.nesterov = 1;
    run(&s, REF_SGD_NESTEROV);
    s.weight_decay = 0.1;
    run(&s, REF_SGD_NESTEROV_WD);
}

static void adagrad(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_ADAGRAD, 0.1);
    s.eps = 1e-10;
    run(&s, REF_ADAGRAD);
    s.eps = 0.5;
    s.weight_decay = 0.1;
    run(&s, REF_ADAGRAD_WD_EPS);
}

static void rmsprop(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_RMSPROP, 0.01);
    run(&s, REF_RMSPROP);
    s.momentum = 0.9;
    run(&s, REF_RMSPROP_MOMENTUM);
    s.alpha = 0.9;
    s.eps = 0.5;
    s.weight_decay = 0.1;
    run(&s, REF_RMSPROP_MOMENTUM_WD_EPS);
}

static void adam(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_ADAM, 0.01);
    s.weight_decay = 0.1;
    run(&s, REF_ADAM_WD);
    s.beta1 = 0.8;
    s.beta2 = 0.9;
    s.eps = 0.5;
    run(&s, REF_ADAM_EPS);
}

static void adamw(void **st)
{
    struct dl_optim_spec s = base(DL_OPTIM_ADAMW, 0.01);
    s.weight_decay = 0.1;
    run(&s, REF_ADAMW);
    s.beta1 = 0.8;
    s.beta2 = 0.9;
    s.eps = 0.5;
    run(&s, REF_ADAMW_EPS);
}

/* One step of spec on w = [3, 4 | 0, 0 | 1] (three tensors, the last left
 * out by no_decay) with g = [0.6, -0.8 | 1, 2 | 2]. */
static void layerwise_step(const struct dl_optim_spec *spec, const double want[5])
{
    struct dl_optim o;
    struct dl_error err = {0};
    assert_int_equal(dl_optim_init(&o, spec, 5, &err), DL_OK);
    struct dl_optim_span tensors[3] = {{4, 5}, {0, 2}, {2, 4}}, left_out = {4, 5};
    assert_int_equal(dl_optim_set_tensors(&o, tensors, 3, &err), DL_OK);
    assert_int_equal(dl_optim_set_no_decay(&o, &left_out, 1, &err), DL_OK);
    assert_int_equal(dl_optim_tensors_left_out(&o), 1);
    float w[5] = {3, 4, 0, 0, 1}, g[5] = {0.6f, -0.8f, 1, 2, 2};
    dl_optim_step(&o, spec->lr, w, g);
    for (int i = 0; i < 5; i++)
        if (fabs(w[i] - want[i]) > 1e-6 * (1 + fabs(want[i]))) {
            print_error("%s: w[%d] = %.8f, by hand %.8f\n", o.algo->name, i, w[i], want[i]);
            fail();
        }
    dl_optim_free(&o);
}

static void layerwise(void **st)
{
    /* LARS (lr 0.2, eta 0.5, wd 0.1): the first tensor's ratio 0.5 * 5 / (1 + 0.1 * 5),
     * its step 0.2 ratio (g + 0.1 w); the zero tensor's ratio 1; the left-out one 0.2 g */
    struct dl_optim_spec s = base(DL_OPTIM_LARS, 0.2);
    s.weight_decay = 0.1;
    s.trust_coefficient = 0.5;
    double r = 0.5 * 5 / 1.5;
    const double lars[5] = {3 - 0.2 * r * 0.9, 4 - 0.2 * r * -0.4, -0.2, -0.4, 1 - 0.4};
    layerwise_step(&s, lars);
    /* LAMB's first step (eps ~0): r = sign(g) + wd w; the ratio ||w|| / ||r|| */
    s = base(DL_OPTIM_LAMB, 0.2);
    s.weight_decay = 0.1;
    s.eps = 1e-12;
    double ra = 5 / sqrt(1.3 * 1.3 + 0.6 * 0.6);
    const double lamb[5] = {3 - 0.2 * ra * 1.3, 4 - 0.2 * ra * -0.6, -0.2, -0.2, 1 - 0.2};
    layerwise_step(&s, lamb);
    /* a tensor of which a ZeRO block holds a part */
    struct dl_optim o;
    struct dl_error err = {0};
    assert_int_equal(dl_optim_init(&o, &s, 4, &err), DL_OK);
    o.offset = 1;
    struct dl_optim_span cut = {0, 2};
    assert_int_equal(dl_optim_set_tensors(&o, &cut, 1, &err), DL_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "whole tensor"));
    dl_optim_free(&o);
}

static void schedules(void **st)
{
    struct dl_sched_spec s;
    memset(&s, 0, sizeof s);
    s.kind = DL_SCHED_CONSTANT;
    assert_true(dl_schedule_lr(&s, 0.1, 57, 10, 100) == 0.1);
    s.kind = DL_SCHED_STEP;
    s.step_epochs = 2;
    s.gamma = 0.5;
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 19, 10, 100) - 0.1) < 1e-12);  /* epoch 1.9 */
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 20, 10, 100) - 0.05) < 1e-12); /* epoch 2 */
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 45, 10, 100) - 0.025) < 1e-12);
    s.kind = DL_SCHED_COSINE;
    s.min_lr = 0.001;
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 0, 10, 100) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 50, 10, 100) - 0.0505) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 100, 10, 100) - 0.001) < 1e-12);
    s.warmup_epochs = 1; /* 10 warm-up steps, then cosine over the remaining 90 */
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 0, 10, 100) - 0.01) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 4, 10, 100) - 0.05) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 10, 10, 100) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 55, 10, 100) - 0.0505) < 1e-12);
    /* a run of 5 steps, shorter than its 10 warm-up steps, still ramps up */
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 0, 10, 5) - 0.01) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 4, 10, 5) - 0.05) < 1e-12);
    /* wsd: 10 warm-up steps, stable until step 80 of 100, then linearly down over the last 20 */
    s.kind = DL_SCHED_WSD;
    s.decay_fraction = 0.2;
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 4, 10, 100) - 0.05) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 10, 10, 100) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 79, 10, 100) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 80, 10, 100) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 90, 10, 100) - 0.0505) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 99, 10, 100) - (0.1 - 0.099 * 19 / 20)) < 1e-12);
    /* a run of 12 steps: 20% is 3 (rounded up), after its 10 warm-up steps only 2 remain */
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 10, 10, 12) - 0.1) < 1e-12);
    assert_true(fabs(dl_schedule_lr(&s, 0.1, 11, 10, 12) - 0.0505) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_plain), cmocka_unit_test(sgd_momentum_wd), cmocka_unit_test(sgd_nesterov),
        cmocka_unit_test(adagrad),   cmocka_unit_test(rmsprop),         cmocka_unit_test(adam),
        cmocka_unit_test(adamw),     cmocka_unit_test(layerwise),       cmocka_unit_test(schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
