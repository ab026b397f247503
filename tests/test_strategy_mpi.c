/* test_strategy_mpi.c: the consistency strategies of src/parallel driven
 * directly, on a small real network (conv, batch norm, relu, fc) and real MPI
 * processes (test_strategy_mpi.sh runs it at several rank counts), each
 * against its exact serial counterpart:
 *   sync         after every step, the weights equal one serial optimizer
 *                step on the sum of the ranks' gradients, each scaled by its
 *                share of the global batch (uneven local batches); also with
 *                tiny buckets and no overlap, and with momentum correction
 *                through a codec that loses nothing (topk:1);
 *   local-sgd:K  between averages every rank steps as a serial optimizer on
 *                its own gradients would; every K steps and at the end the
 *                weights and batch-norm statistics are the ranks' mean;
 *   ssp:S/async  (one and two servers, a slowed worker) every server's
 *                weights equal a serial replay of the gradients the workers
 *                sent, in the order the server applied them, through the
 *                same optimizer; every answer a worker got is a state of that
 *                replay at or after its own update; rank 0 ends with the
 *                replayed weights and the first worker's statistics; and,
 *                from the workers' own clocks, no worker ever received its
 *                step-c answer before every other worker had sent step c-S;
 *   gossip:TOPO  (ring, exp, one-peer-exp, complete; also overlapped) every
 *                step each rank holds the mix, by the topology's definition
 *                written out here, of every rank's vector after its local
 *                step, and the mean at the end;
 *   easgd:TAU    local steps as the serial optimizer; every TAU steps each
 *                rank moves toward a center replayed here, which moves by
 *                alpha x the sum of the ranks' distances to it.
 *   easgd-async (one and two servers) every worker's local steps as the
 *                serial optimizer, and each server's rounds, replayed in its
 *                order on a center kept here: the worker after each round
 *                and the server's center at the end, bit for bit.
 * With the argument "decentralized" only the last three run.
 * Rank 0 prints "ok - ..." lines (tests/mpi_report.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/allreduce.h"
#include "core/rng.h"
#include "core/threads.h"
#include "exec/exec.h"
#include "mpi_report.h"
#include "parallel/strategy.h"
#include "spec/netfile.h"

#define CLASSES 4

/* An optimizer: a short name for the messages, and the network file's text. */
struct optimizer {
    const char *name, *yaml;
};

static const struct optimizer SGD = {"sgd with momentum", "{type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.01}"};
static const struct optimizer NESTEROV = {"nesterov",
                                          "{type: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.01}"};
static const struct optimizer ADAM = {"adam", "{type: adam, lr: 0.01, weight_decay: 0.01}"};
#define FEPS 5.9604644775390625e-8 /* float rounding unit, 2^-24 */

static struct dl_comm *world;

static const char *const NET_TEMPLATE =
    "input: {shape: [2, 6, 6], classes: 4}\n"
    "layers:\n"
    "  - {name: conv, type: conv, filters: 3, kernel: 3, pad: 1}\n"
    "  - {name: bn, type: batchnorm}\n"
    "  - {type: relu}\n"
    "  - {name: fc, type: fc, units: 4}\n"
    "loss: softmax_cross_entropy\n"
    "train: {batch: 16, seed: 5, optimizer: %s}\n";

/* One rank's model: the network, its executor (weights from seed 5, the
 * same on every rank) and an optimizer. */
struct model {
    struct dl_net net;
    struct dl_exec e;
    struct dl_optim opt;
    float *x;
    int *y;
};

static int model_open(struct model *m, const struct optimizer *optimizer, char *detail, size_t dlen)
{
    char text[1024];
    snprintf(text, sizeof text, NET_TEMPLATE, optimizer->yaml);
    struct dl_error err = {0};
    memset(m, 0, sizeof *m);
    int rc = dl_net_load_string("strategy.yaml", text, &m->net, &err);
    if (!rc)
        rc = dl_exec_init(&m->e, &m->net.graph, m->net.train.batch, m->net.train.seed, NULL, &err);
    if (!rc)
        rc = dl_optim_init(&m->opt, &m->net.train.optim, m->e.n_weights, &err);
    m->x = malloc(sizeof *m->x * (size_t)m->net.train.batch * 72);
    m->y = malloc(sizeof *m->y * (size_t)m->net.train.batch);
    if (rc)
        snprintf(detail, dlen, "set-up: %s", err.msg);
    return rc;
}

static void model_close(struct model *m)
{
    dl_optim_free(&m->opt);
    dl_exec_free(&m->e);
    dl_net_free(&m->net);
    free(m->x);
    free(m->y);
}

/* Forward and backward of b samples that only (who, step) decide; the
 * strategy's begin must come first (sync hands buckets over during
 * backward). */
static void forward_backward(struct model *m, int who, long step, int b)
{
    struct dl_rng r;
    dl_rng_seed(&r, 1000003u * (uint64_t)(who + 1) + (uint64_t)step);
    for (int i = 0; i < b * 72; i++)
        m->x[i] = (float)dl_rng_normal(&r);
    for (int i = 0; i < b; i++)
        m->y[i] = (int)dl_rng_below(&r, CLASSES);
    dl_exec_forward(&m->e, m->x, m->y, b, 1);
    dl_exec_backward(&m->e);
}

static float *copy_of(const float *v, long n)
{
    float *c = malloc(sizeof *c * (size_t)(n > 0 ? n : 1));
    memcpy(c, v, sizeof *c * (size_t)n);
    return c;
}

/* Every rank's n floats, rank after rank (malloc'ed), or NULL on failure. */
static float *gather(const float *v, long n)
{
    struct dl_error err;
    float *all = malloc(sizeof *all * (size_t)(n > 0 ? n : 1) * (size_t)world->size);
    if (all && world->ops->allgather(world, v, all, sizeof *v * (size_t)n, &err) != DL_OK) {
        free(all);
        return NULL;
    }
    return all;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The model, the strategy of po on it, and a serial optimizer of the same
 * kind for the counterpart; returns a status (detail says what failed). */
static int strategy_open(struct model *m, const struct optimizer *optimizer, const struct dl_parallel_opts *po,
                         struct dl_strategy **s, struct dl_optim *serial, char *detail, size_t dlen)
{
    struct dl_error err = {0};
    int rc = model_open(m, optimizer, detail, dlen);
    if (!rc)
        rc = dl_strategy_create(world, &m->e, &m->opt, po, 5, NULL, NULL, s, &err);
    if (!rc)
        rc = dl_optim_init(serial, &m->net.train.optim, m->e.n_weights, &err);
    if (rc && !*detail)
        snprintf(detail, dlen, "%s", err.msg);
    return rc;
}

static double lr_at_step(long step)
{
    return 0.05 / (1.0 + 0.1 * (double)step);
}

/* ------------------------------------------------------------------ sync */

static int local_batch(int rank)
{
    return 2 + rank % 3;
}

/* T steps of the sync strategy under po, each compared with the serial
 * optimizer step on the batch-weighted sum of every rank's gradient. */
static void check_sync(const char *title, const struct optimizer *optimizer, struct dl_parallel_opts po)
{
    enum { T = 6 };
    int p = world->size, me = world->rank, global = 0;
    for (int r = 0; r < p; r++)
        global += local_batch(r);
    char detail[1200] = "", what[300];
    struct model m;
    struct dl_error err = {0};
    struct dl_strategy *s = NULL;
    struct dl_optim serial = {0};
    int rc = strategy_open(&m, optimizer, &po, &s, &serial, detail, sizeof detail);
    long n = m.e.n_weights;
    float *ws = rc ? NULL : copy_of(m.e.weights, n), *sum = malloc(sizeof *sum * (size_t)(n > 0 ? n : 1));
    double worst = 0, worst_loss = 0;
    int same = 1;
    for (long step = 1; step <= T && !rc; step++) {
        int b = local_batch(me);
        /* This rank's gradient, first without the strategy: with overlap,
         * its buckets are summed in place while backward goes on. */
        dl_exec_zero_grad(&m.e);
        forward_backward(&m, me, step, b);
        float *g = gather(m.e.dweights, n), loss = (float)dl_exec_loss_sum(&m.e), *losses = gather(&loss, 1);
        dl_exec_zero_grad(&m.e);
        rc = dl_strategy_begin(s, b, global, &err);
        forward_backward(&m, me, step, b);
        struct dl_step_metrics metrics = {.loss_sum = dl_exec_loss_sum(&m.e), .correct = dl_exec_correct(&m.e)};
        struct dl_step_stats st = {0};
        if (!rc)
            rc = dl_strategy_finish(s, step, lr_at_step(step), &metrics, &st, &err);
        if (rc || !g || !losses) {
            snprintf(detail, sizeof detail, "step %ld: %s", step, rc ? err.msg : "allgather failed");
            rc = rc ? rc : DL_ERR_COMM;
        }
        /* the serial step on sum_r (b_r / B) g_r, summed in double */
        for (long i = 0; !rc && i < n; i++) {
            double acc = 0;
            for (int r = 0; r < p; r++)
                acc += (double)local_batch(r) / global * g[(size_t)r * (size_t)n + (size_t)i];
            sum[i] = (float)acc;
        }
        double want_loss = 0;
        for (int r = 0; !rc && r < p; r++)
            want_loss += losses[r];
        if (!rc) {
            dl_optim_step(&serial, lr_at_step(step), ws, sum);
            double d = 0, scale = 1e-30;
            for (long i = 0; i < n; i++) {
                d = fmax(d, fabs((double)m.e.weights[i] - ws[i]));
                scale = fmax(scale, fabs((double)ws[i]));
            }
            worst = fmax(worst, d / scale);
            worst_loss = fmax(worst_loss, fabs(metrics.loss_sum - want_loss) / fabs(want_loss));
            float *all = gather(m.e.weights, n);
            for (int r = 0; all && r < p; r++)
                same = same && memcmp(all + (size_t)r * (size_t)n, m.e.weights, sizeof *all * (size_t)n) == 0;
            same = same && all;
            free(all);
        }
        free(g);
        free(losses);
    }
    if (!rc)
        rc = dl_strategy_end(s, &err);
    /* The serial step is summed in double and the strategy in float over
     * the ranks' order: 1e-5 of the largest weight over 6 steps (measured
     * up to 1e-7); a gradient scaled by 1/p instead of b/B, a lost bucket or
     * a wrong momentum is 1e-3 or more. */
    int ok = !rc && same && worst <= 1e-5 && worst_loss <= 1e-6;
    if (!rc && !same)
        snprintf(detail, sizeof detail, "the ranks hold different weights");
    else if (!rc && !ok)
        snprintf(detail, sizeof detail, "weights %.3g (of the largest) from the serial step, loss sum %.3g", worst,
                 worst_loss);
    snprintf(what, sizeof what, "sync, %s, %s: %d steps equal the serial optimizer on the summed gradient "
             "(within %.2g), same weights on every rank, summed metrics", title, optimizer->name, T, worst);
    mpi_report(world, ok, what, detail);
    free(ws);
    free(sum);
    dl_optim_free(&serial);
    dl_strategy_free(s);
    model_close(&m);
}

/* ------------------------------------------------------------- local SGD */

/* |got - mean of the ranks' values| within the rounding of a float sum over
 * p ranks and a scaling by 1/p; returns the worst ratio to that bound. */
static double mean_error(const float *got, const float *all, long n, int p)
{
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double mean = 0, mag = 0;
        for (int r = 0; r < p; r++) {
            mean += all[(size_t)r * (size_t)n + (size_t)i];
            mag += fabs(all[(size_t)r * (size_t)n + (size_t)i]);
        }
        mean /= p;
        double bound = ((double)p * p + 2) * FEPS * mag / p + 1e-30;
        worst = fmax(worst, fabs(got[i] - mean) / bound);
    }
    return worst;
}

static int same_floats(const float *a, const float *b, long n)
{
    return n == 0 || memcmp(a, b, sizeof *a * (size_t)n) == 0;
}

static int check_consensus(struct dl_strategy *s, const struct model *m, long step, int every, double *worst,
                           char *detail, size_t dlen);

/* local-sgd:k over 2k+1 steps (the last, partial round is averaged by end). */
static void check_local_sgd(int k, const struct optimizer *optimizer)
{
    int p = world->size, me = world->rank;
    long steps = 2L * k + 1;
    char detail[1200] = "", what[300];
    struct model m;
    struct dl_error err = {0};
    struct dl_strategy *s = NULL;
    struct dl_optim serial = {0};
    struct dl_parallel_opts po = {.consistency = DL_CONS_LOCAL_SGD, .local_steps = k, .allreduce = "auto",
                                  .consensus_every = 1};
    int rc = strategy_open(&m, optimizer, &po, &s, &serial, detail, sizeof detail);
    long n = m.e.n_weights, ns = m.e.n_state;
    float *ws = rc ? NULL : copy_of(m.e.weights, n), *state = NULL;
    double worst = 0, worst_consensus = 0;
    int local_ok = 1, metrics_ok = 1, averages = 0;
    for (long step = 1; step <= steps + 1 && !rc; step++) {
        int last = step == steps + 1; /* end(), not a step */
        struct dl_step_metrics metrics = {0};
        if (!last) {
            dl_exec_zero_grad(&m.e);
            rc = dl_strategy_begin(s, 4, 4 * p, &err);
            forward_backward(&m, me, step, 4);
            free(state);
            state = copy_of(m.e.state, ns); /* this rank's statistics before any average */
            dl_optim_step(&serial, lr_at_step(step), ws, m.e.dweights);
            metrics.loss_sum = dl_exec_loss_sum(&m.e);
            metrics.stop_requested = me == p - 1;
            struct dl_step_stats st = {0};
            float loss = (float)metrics.loss_sum, *losses = gather(&loss, 1);
            if (!rc)
                rc = dl_strategy_finish(s, step, lr_at_step(step), &metrics, &st, &err);
            double want = 0;
            for (int r = 0; losses && r < p; r++)
                want += losses[r];
            metrics_ok = metrics_ok && losses && fabs(metrics.loss_sum - want) <= 1e-6 * fabs(want) && metrics.stop_requested;
            free(losses);
        } else {
            rc = dl_strategy_end(s, &err);
        }
        if (rc) {
            snprintf(detail, sizeof detail, "step %ld: %s", step, err.msg);
            break;
        }
        if (!last && check_consensus(s, &m, step, 1, &worst_consensus, detail, sizeof detail)) {
            rc = DL_ERR_COMM;
            break;
        }
        int averaged = last ? steps % k != 0 : step % k == 0;
        if (!averaged) {
            local_ok = local_ok && same_floats(m.e.weights, ws, n) && same_floats(m.e.state, state, ns);
            continue;
        }
        averages++;
        float *all_w = gather(ws, n), *all_s = gather(state, ns);
        if (!all_w || !all_s) {
            rc = DL_ERR_COMM;
            snprintf(detail, sizeof detail, "allgather failed");
        } else {
            worst = fmax(worst, mean_error(m.e.weights, all_w, n, p));
            worst = fmax(worst, mean_error(m.e.state, all_s, ns, p));
        }
        /* the serial replay goes on from the average */
        memcpy(ws, m.e.weights, sizeof *ws * (size_t)n);
        memcpy(state, m.e.state, sizeof *state * (size_t)ns);
        free(all_w);
        free(all_s);
    }
    int want_averages = (int)(steps / k) + (steps % k != 0);
    int ok = !rc && local_ok && metrics_ok && worst <= 1 && averages == want_averages && worst_consensus <= 1;
    if (!rc && !ok)
        snprintf(detail, sizeof detail, "%s%s%d averages (expected %d), %.3g of the rounding bound from the mean, "
                 "consensus distance %.3g of its bound", local_ok ? "" : "local steps differ from the serial optimizer; ",
                 metrics_ok ? "" : "metrics not summed over the ranks; ", averages, want_averages, worst,
                 worst_consensus);
    snprintf(what, sizeof what, "local-sgd:%d, %s: local steps equal the serial optimizer, weights and batch-norm "
             "statistics are the ranks' mean at every average (%.2f of the rounding bound), the consensus distance "
             "every step", k, optimizer->name, worst);
    mpi_report(world, ok, what, detail);
    free(ws);
    free(state);
    dl_optim_free(&serial);
    dl_strategy_free(s);
    model_close(&m);
}

/* ------------------------------------------------------ parameter server */

enum { PS_STEPS = 10, PS_BATCH = 4, PS_SLOW_MS = 15 };
enum { TAG_GRADS = 9301, TAG_ANSWERS, TAG_LOSSES, TAG_TIMES, TAG_STATE, TAG_SHARD };

struct ps_log {
    long count;
    struct dl_served_update u[64 * PS_STEPS];
};

static void ps_record(void *ctx, const struct dl_served_update *u)
{
    struct ps_log *log = ctx;
    if (log->count < (long)(sizeof log->u / sizeof log->u[0]))
        log->u[log->count] = *u;
    log->count++;
}

/* The schedule's rate at a 0-based global step (a server's update u, of W
 * workers, gets ps_lr(u / W) / W). */
static double ps_lr(void *ctx, long update)
{
    return 0.05 / (1.0 + 0.05 * (double)update);
}

/* What every worker recorded: its gradients and the weights it got back
 * per step (PS_STEPS x n floats each), its losses, and when it sent and got
 * each step (CLOCK_MONOTONIC, common to the processes of one machine). */
struct ps_worker_log {
    float *grads, *answers;
    double loss[PS_STEPS], sent[PS_STEPS], got[PS_STEPS];
};

/* Server side of the check: replays the updates of log on this server's
 * shard of w0 and compares with what the server holds and what every
 * worker got.  Returns 1 when everything matches. */
static int ps_replay(const struct model *m, const float *w0, const struct ps_log *log, int servers,
                     struct ps_worker_log *wl, int workers, float *replayed, char *detail, size_t dlen)
{
    long n = m->e.n_weights, lo = (long)dl_block_lo((size_t)n, servers, world->rank),
         hi = (long)dl_block_lo((size_t)n, servers, world->rank + 1), len = hi - lo;
    long updates = (long)workers * PS_STEPS;
    if (log->count != updates) {
        snprintf(detail, dlen, "server %d applied %ld updates, expected %ld", world->rank, log->count, updates);
        return 0;
    }
    long pos[64][PS_STEPS];
    long next[64] = {0};
    for (long u = 0; u < updates; u++) {
        const struct dl_served_update *up = &log->u[u];
        if (up->worker < 0 || up->worker >= workers || up->step != next[up->worker] + 1) {
            snprintf(detail, dlen, "update %ld: worker %d clock %ld out of order", u, up->worker, up->step);
            return 0;
        }
        pos[up->worker][next[up->worker]++] = u;
        double want = wl[up->worker].loss[up->step - 1] / PS_BATCH;
        if (up->batch != PS_BATCH || up->loss != want) {
            snprintf(detail, dlen, "update %ld: loss %.9g batch %d, the worker had %.9g and %d", u, up->loss,
                     up->batch, want, PS_BATCH);
            return 0;
        }
    }
    struct dl_optim opt;
    struct dl_error err;
    if (dl_optim_init(&opt, &m->net.train.optim, len, &err)) {
        snprintf(detail, dlen, "%s", err.msg);
        return 0;
    }
    float *snap = malloc(sizeof *snap * (size_t)(len > 0 ? len : 1) * (size_t)(updates + 1));
    memcpy(replayed, w0 + lo, sizeof *replayed * (size_t)len);
    for (long u = 0; u < updates; u++) {
        const struct dl_served_update *up = &log->u[u];
        const float *g = wl[up->worker].grads + (size_t)(up->step - 1) * (size_t)n + (size_t)lo;
        double lr = ps_lr(NULL, u / workers) / workers;
        if (up->lr != lr) {
            snprintf(detail, dlen, "update %ld: learning rate %.9g, the schedule says %.9g", u, up->lr, lr);
            free(snap);
            dl_optim_free(&opt);
            return 0;
        }
        dl_optim_step(&opt, lr, replayed, g);
        memcpy(snap + (size_t)u * (size_t)len, replayed, sizeof *snap * (size_t)len);
    }
    dl_optim_free(&opt);
    int ok = same_floats(m->e.weights + lo, replayed, len);
    if (!ok)
        snprintf(detail, dlen, "server %d: its weights differ from the serial replay of the %ld updates",
                 world->rank, updates);
    /* Each answer: a replay state at or after the worker's own update,
     * never older than the previous answer's. */
    for (int w = 0; ok && w < workers; w++) {
        long at = 0;
        for (int c = 0; ok && c < PS_STEPS; c++) {
            const float *got = wl[w].answers + (size_t)c * (size_t)n + (size_t)lo;
            long u = pos[w][c] > at ? pos[w][c] : at;
            while (u < updates && !same_floats(snap + (size_t)u * (size_t)len, got, len))
                u++;
            if (u == updates) {
                snprintf(detail, dlen, "server %d: worker %d's step-%d answer is no state of the replay after "
                         "its update %ld", world->rank, w, c + 1, pos[w][c]);
                ok = 0;
            }
            at = u;
        }
    }
    free(snap);
    return ok;
}

/* From the workers' clocks: the largest lead any worker had, c minus the
 * fewest steps another worker had sent when it got its step-c answer. */
static int ps_lead(const struct ps_worker_log *wl, int workers)
{
    int lead = 0;
    for (int i = 0; i < workers; i++)
        for (int c = 1; c <= PS_STEPS; c++)
            for (int j = 0; j < workers; j++) {
                if (j == i)
                    continue;
                int sent = 0;
                while (sent < PS_STEPS && wl[j].sent[sent] < wl[i].got[c - 1])
                    sent++;
                lead = c - sent > lead ? c - sent : lead;
            }
    return lead;
}

static void check_param_server(int servers, int staleness, const struct optimizer *optimizer)
{
    int p = world->size, me = world->rank, workers = p - servers, slow = p - 1;
    char detail[1200] = "", what[300], mode[32];
    if (staleness >= 0)
        snprintf(mode, sizeof mode, "ssp:%d", staleness);
    else
        snprintf(mode, sizeof mode, "async");
    if (workers < 1 || workers > 64)
        return;
    struct model m;
    struct dl_error err = {0};
    int rc = model_open(&m, optimizer, detail, sizeof detail);
    long n = m.e.n_weights;
    float *w0 = rc ? NULL : copy_of(m.e.weights, n);
    struct dl_parallel_opts po = {.consistency = staleness >= 0 ? DL_CONS_SSP : DL_CONS_ASYNC,
                                  .staleness = staleness, .ps_servers = servers};
    struct ps_log *log = calloc(1, sizeof *log);
    struct ps_worker_log mine = {0};
    struct dl_rank_layout layout;
    dl_strategy_layout(&po, p, me, &layout);
    int server = layout.role == DL_ROLE_SERVER;
    if (!rc && server) {
        struct dl_strategy *s = NULL;
        struct dl_serve_hooks hooks = {.ctx = log, .lr_at = ps_lr, .on_update = ps_record};
        struct dl_serve_result res;
        rc = dl_strategy_create(world, &m.e, &m.opt, &po, 5, NULL, NULL, &s, &err);
        if (!rc)
            rc = dl_strategy_serve(s, &hooks, &res, &err);
        if (!rc)
            rc = dl_strategy_end(s, &err);
        dl_strategy_free(s);
    } else if (!rc) {
        struct dl_strategy *s = NULL;
        mine.grads = malloc(sizeof(float) * (size_t)n * PS_STEPS);
        mine.answers = malloc(sizeof(float) * (size_t)n * PS_STEPS);
        rc = dl_strategy_create(world, &m.e, &m.opt, &po, 5, NULL, NULL, &s, &err);
        for (long c = 1; c <= PS_STEPS && !rc; c++) {
            dl_exec_zero_grad(&m.e);
            rc = dl_strategy_begin(s, PS_BATCH, PS_BATCH * workers, &err);
            forward_backward(&m, me, c, PS_BATCH);
            memcpy(mine.grads + (size_t)(c - 1) * (size_t)n, m.e.dweights, sizeof(float) * (size_t)n);
            mine.loss[c - 1] = dl_exec_loss_sum(&m.e);
            if (me == slow && workers > 1)
                nanosleep(&(struct timespec){0, PS_SLOW_MS * 1000000L}, NULL);
            struct dl_step_metrics metrics = {.loss_sum = mine.loss[c - 1], .correct = dl_exec_correct(&m.e),
                                              .samples = PS_BATCH};
            struct dl_step_stats st = {0};
            mine.sent[c - 1] = now_s();
            if (!rc)
                rc = dl_strategy_finish(s, c, 0.0, &metrics, &st, &err);
            mine.got[c - 1] = now_s();
            memcpy(mine.answers + (size_t)(c - 1) * (size_t)n, m.e.weights, sizeof(float) * (size_t)n);
        }
        if (!rc)
            rc = dl_strategy_end(s, &err);
        dl_strategy_free(s);
    }
    if (rc) {
        snprintf(detail, sizeof detail, "%s", err.msg);
        world->ops->abort(world, 1); /* the others would wait forever */
    }
    /* Every worker hands its record to every server, and its clocks to rank 0. */
    struct ps_worker_log *wl = calloc((size_t)workers, sizeof *wl);
    for (int w = 0; w < workers; w++)
        if (server) {
            wl[w].grads = malloc(sizeof(float) * (size_t)n * PS_STEPS);
            wl[w].answers = malloc(sizeof(float) * (size_t)n * PS_STEPS);
            size_t bytes = sizeof(float) * (size_t)n * PS_STEPS;
            rc = rc ? rc : world->ops->recv(world, wl[w].grads, bytes, servers + w, TAG_GRADS, &err);
            rc = rc ? rc : world->ops->recv(world, wl[w].answers, bytes, servers + w, TAG_ANSWERS, &err);
            rc = rc ? rc : world->ops->recv(world, wl[w].loss, sizeof wl[w].loss, servers + w, TAG_LOSSES, &err);
            if (me == 0) {
                rc = rc ? rc : world->ops->recv(world, wl[w].sent, sizeof wl[w].sent, servers + w, TAG_TIMES, &err);
                rc = rc ? rc : world->ops->recv(world, wl[w].got, sizeof wl[w].got, servers + w, TAG_TIMES, &err);
            }
        } else if (me == servers + w) {
            size_t bytes = sizeof(float) * (size_t)n * PS_STEPS;
            for (int sv = 0; sv < servers && !rc; sv++) {
                rc = world->ops->send(world, mine.grads, bytes, sv, TAG_GRADS, &err);
                rc = rc ? rc : world->ops->send(world, mine.answers, bytes, sv, TAG_ANSWERS, &err);
                rc = rc ? rc : world->ops->send(world, mine.loss, sizeof mine.loss, sv, TAG_LOSSES, &err);
            }
            rc = rc ? rc : world->ops->send(world, mine.sent, sizeof mine.sent, 0, TAG_TIMES, &err);
            rc = rc ? rc : world->ops->send(world, mine.got, sizeof mine.got, 0, TAG_TIMES, &err);
        }
    /* The first worker's batch-norm statistics are the ones rank 0 ends with. */
    long ns = m.e.n_state;
    float *first_state = malloc(sizeof(float) * (size_t)(ns > 0 ? ns : 1));
    if (!rc && me == servers)
        rc = world->ops->send(world, m.e.state, sizeof(float) * (size_t)ns, 0, TAG_STATE, &err);
    if (!rc && me == 0)
        rc = world->ops->recv(world, first_state, sizeof(float) * (size_t)ns, servers, TAG_STATE, &err);
    int ok = !rc;
    if (rc)
        snprintf(detail, sizeof detail, "exchanging the records: %s", err.msg);
    float *replayed = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (ok && server)
        ok = ps_replay(&m, w0, log, servers, wl, workers, replayed, detail, sizeof detail);
    /* Rank 0 holds every server's replayed shard at the end. */
    for (int sv = 1; sv < servers; sv++) {
        long lo = (long)dl_block_lo((size_t)n, servers, sv), hi = (long)dl_block_lo((size_t)n, servers, sv + 1);
        if (me == sv)
            rc = world->ops->send(world, replayed, sizeof(float) * (size_t)(hi - lo), 0, TAG_SHARD, &err);
        if (me == 0) {
            float *shard = malloc(sizeof(float) * (size_t)(hi - lo > 0 ? hi - lo : 1));
            rc = world->ops->recv(world, shard, sizeof(float) * (size_t)(hi - lo), sv, TAG_SHARD, &err);
            if (ok && (rc || !same_floats(m.e.weights + lo, shard, hi - lo))) {
                ok = 0;
                snprintf(detail, sizeof detail, "rank 0's final weights lack server %d's replayed shard", sv);
            }
            free(shard);
        }
    }
    if (ok && me == 0 && !same_floats(m.e.state, first_state, ns)) {
        ok = 0;
        snprintf(detail, sizeof detail, "rank 0's final batch-norm statistics are not the first worker's");
    }
    int lead = me == 0 && workers > 1 ? ps_lead(wl, workers) : 0;
    if (ok && me == 0 && workers > 1) {
        /* ssp:S lets the fast workers run exactly S steps ahead of the
         * slowed one (it sleeps PS_SLOW_MS per step, ages for a worker
         * that waits on nothing), and never more; async lets them run away. */
        if (staleness >= 0 ? lead != staleness : lead < 3) {
            ok = 0;
            snprintf(detail, sizeof detail, "largest lead seen by the workers' clocks: %d", lead);
        }
    }
    snprintf(what, sizeof what, "%s, %d server%s, %d worker%s, %s: the servers' weights are the serial replay of "
             "the workers' gradients, every answer a replay state after the worker's update%s (largest lead %d)",
             mode, servers, servers > 1 ? "s" : "", workers, workers > 1 ? "s" : "", optimizer->name,
             workers > 1 ? (staleness >= 0 ? ", the bound holds and is reached" : ", the slowed worker falls behind")
                         : "", lead);
    mpi_report(world, ok, what, detail);
    for (int w = 0; w < workers; w++) {
        free(wl[w].grads);
        free(wl[w].answers);
    }
    free(wl);
    free(mine.grads);
    free(mine.answers);
    free(first_state);
    free(replayed);
    free(log);
    free(w0);
    model_close(&m);
}

/* ------------------------------------------------- gossip and elastic averaging */

/* Rank i's in-neighbours at 0-based step t, from the definitions of issue 21
 * and dltrain(1) (not from parallel/mixing.c): ring, the ranks next to i;
 * exp, i - 2^k for 2^k < p; one-peer-exp, i - 2^(t mod ceil(log2 p));
 * complete, everyone else.  Returns how many, distinct and none of them i. */
static int in_neighbours(enum dl_topology topology, int p, int i, long t, int *out)
{
    int n = 0, rounds = 0;
    switch (topology) {
    case DL_TOPO_RING:
        out[n++] = (i + p - 1) % p;
        if ((i + 1) % p != out[0])
            out[n++] = (i + 1) % p;
        break;
    case DL_TOPO_EXP:
        for (int d = 1; d < p; d *= 2)
            out[n++] = (i + p - d) % p;
        break;
    case DL_TOPO_ONE_PEER_EXP:
        while ((1 << rounds) < p)
            rounds++;
        out[n++] = (i + p - (1 << (t % rounds))) % p;
        break;
    default:
        for (int j = 0; j < p; j++)
            if (j != i)
                out[n++] = j;
        break;
    }
    return n;
}

/* One rank's vector as the strategies treat it: weights, then statistics. */
static void pack_model(const struct model *m, float *x)
{
    memcpy(x, m->e.weights, sizeof *x * (size_t)m->e.n_weights);
    memcpy(x + m->e.n_weights, m->e.state, sizeof *x * (size_t)m->e.n_state);
}

/* |got - want| over the rounding unit times mag, a bound (in rounding units)
 * of the error the float computation may make: the worst ratio so far in
 * *worst. */
static void rounding_ratio(const float *got, const double *want, const double *mag, long n, double *worst)
{
    for (long i = 0; i < n; i++)
        *worst = fmax(*worst, fabs(got[i] - want[i]) / (FEPS * mag[i] + 1e-30));
}

/* sqrt(mean_i ||w_i - w||^2) / ||w|| with w the ranks' mean, from every
 * rank's weights, in double (nan if the allgather fails). */
static double consensus_distance(const float *w, long n)
{
    float *all = gather(w, n);
    if (!all)
        return NAN;
    int p = world->size;
    double apart = 0, size = 0;
    for (long i = 0; i < n; i++) {
        double mean = 0;
        for (int r = 0; r < p; r++)
            mean += all[(size_t)r * (size_t)n + (size_t)i];
        mean /= p;
        size += mean * mean;
        for (int r = 0; r < p; r++)
            apart += (all[(size_t)r * (size_t)n + (size_t)i] - mean) * (all[(size_t)r * (size_t)n + (size_t)i] - mean);
    }
    free(all);
    return sqrt(apart / p / size);
}

/* The strategy's consensus distance after step, measured every `every`
 * steps (NaN between), against consensus_distance: within 1e-4 of it, or
 * 1e-6 where the ranks differ only by roundings (float sums over the ranks
 * against double ones).  *worst: the largest ratio to that bound. */
static int check_consensus(struct dl_strategy *s, const struct model *m, long step, int every, double *worst,
                           char *detail, size_t dlen)
{
    struct dl_error err = {0};
    double cd;
    int rc = dl_strategy_consensus(s, step, &cd, &err);
    if (rc) {
        snprintf(detail, dlen, "consensus: %s", err.msg);
    } else if (step % every != 0) {
        *worst = fmax(*worst, isnan(cd) ? 0 : INFINITY);
    } else {
        double want = consensus_distance(m->e.weights, m->e.n_weights);
        *worst = fmax(*worst, fabs(cd - want) / (1e-4 * want + 1e-6));
    }
    return rc;
}

/* The strategy's end, which must leave every rank's weights and statistics
 * the ranks' mean: *worst, the ratio to the rounding bound (mean_error). */
static int end_average(struct dl_strategy *s, struct model *m, long n, double *worst, char *detail, size_t dlen)
{
    struct dl_error err = {0};
    float *before = malloc(sizeof *before * (size_t)n), *now = malloc(sizeof *now * (size_t)n);
    pack_model(m, before);
    float *all = gather(before, n);
    int rc = dl_strategy_end(s, &err);
    if (rc)
        snprintf(detail, dlen, "end: %s", err.msg);
    pack_model(m, now);
    *worst = all ? mean_error(now, all, n, world->size) : INFINITY;
    free(all);
    free(before);
    free(now);
    return rc;
}

/* gossip:topology (overlapped or not) over T steps: every step each rank's
 * weights and statistics equal the mix, with the topology's weights
 * 1 / (neighbours + 1), of the ranks' vectors after their local optimizer
 * steps (overlapped: the optimizer step applied to the mix of the step's
 * starting vectors, the statistics' local change added), within a few
 * rounding units; bytes_sent is the neighbours' count x the vector; the
 * end leaves every rank the ranks' mean. */
static void check_gossip(enum dl_topology topology, int overlap, const struct optimizer *optimizer)
{
    enum { T = 7 };
    int p = world->size, me = world->rank;
    char detail[1200] = "", what[300];
    struct model m;
    struct dl_error err = {0};
    struct dl_strategy *s = NULL;
    struct dl_optim serial = {0};
    struct dl_parallel_opts po = {.consistency = DL_CONS_GOSSIP, .topology = topology, .gossip_overlap = overlap,
                                  .allreduce = "auto", .consensus_every = 2};
    int rc = strategy_open(&m, optimizer, &po, &s, &serial, detail, sizeof detail);
    long nw = m.e.n_weights, n = nw + m.e.n_state;
    float *x = malloc(sizeof *x * (size_t)n), *start = malloc(sizeof *start * (size_t)n);
    double *want = malloc(sizeof *want * (size_t)n), *mag = malloc(sizeof *mag * (size_t)n);
    int nb[64];
    double worst = 0, worst_consensus = 0;
    int bytes_ok = 1, metrics_ok = 1;
    for (long step = 1; step <= T && !rc; step++) {
        pack_model(&m, start);
        dl_exec_zero_grad(&m.e);
        rc = dl_strategy_begin(s, 4, 4 * p, &err);
        forward_backward(&m, me, step, 4);
        /* the reference: this rank's vector after its local step, or (overlap) its starting one */
        float *ws = copy_of(m.e.weights, nw);
        pack_model(&m, x);
        if (!overlap)
            dl_optim_step(&serial, lr_at_step(step), x, m.e.dweights);
        float *all = gather(overlap ? start : x, n);
        float *after_forward = copy_of(m.e.state, m.e.n_state);
        struct dl_step_metrics metrics = {.loss_sum = dl_exec_loss_sum(&m.e)};
        float loss = (float)metrics.loss_sum, *losses = gather(&loss, 1);
        struct dl_step_stats st = {0};
        if (!rc)
            rc = dl_strategy_finish(s, step, lr_at_step(step), &metrics, &st, &err);
        if (rc || !all || !losses) {
            snprintf(detail, sizeof detail, "step %ld: %s", step, rc ? err.msg : "allgather failed");
            rc = rc ? rc : DL_ERR_COMM;
        }
        int k = rc ? 0 : in_neighbours(topology, p, me, step - 1, nb);
        for (long i = 0; !rc && i < n; i++) {
            double acc = all[(size_t)me * (size_t)n + (size_t)i], sum_abs = fabs(acc);
            for (int j = 0; j < k; j++) {
                acc += all[(size_t)nb[j] * (size_t)n + (size_t)i];
                sum_abs += fabs(all[(size_t)nb[j] * (size_t)n + (size_t)i]);
            }
            want[i] = acc / (k + 1);
            mag[i] = 4 * sum_abs / (k + 1);
            if (overlap && i >= nw) { /* the statistics' own change during this step's forward */
                want[i] += (double)after_forward[i - nw] - start[i];
                mag[i] += 2 * fabs(after_forward[i - nw]) + 2 * fabs(start[i]);
            }
        }
        if (!rc && overlap) { /* the optimizer step on the mixed weights */
            for (long i = 0; i < nw; i++)
                ws[i] = (float)want[i];
            dl_optim_step(&serial, lr_at_step(step), ws, m.e.dweights);
            for (long i = 0; i < nw; i++) {
                mag[i] += 4 * fabs(ws[i]);
                want[i] = ws[i];
            }
        }
        if (!rc) {
            pack_model(&m, x);
            rounding_ratio(x, want, mag, n, &worst);
            bytes_ok = bytes_ok && st.bytes_sent == (size_t)k * sizeof(float) * (size_t)n;
            double sum = 0;
            for (int r = 0; r < p; r++)
                sum += losses[r];
            metrics_ok = metrics_ok && fabs(metrics.loss_sum - sum) <= 1e-6 * fabs(sum) && metrics.samples == 4 * p;
            /* the serial optimizer goes on from the strategy's weights (its momentum already matches) */
            rc = check_consensus(s, &m, step, 2, &worst_consensus, detail, sizeof detail);
        }
        free(ws);
        free(all);
        free(after_forward);
        free(losses);
    }
    double end_worst = INFINITY;
    if (!rc)
        rc = end_average(s, &m, n, &end_worst, detail, sizeof detail);
    int ok = !rc && worst <= 1 && bytes_ok && metrics_ok && end_worst <= 1 && worst_consensus <= 1;
    if (!rc && !ok)
        snprintf(detail, sizeof detail, "%.3g rounding units from the mix%s%s, end %.3g of the mean's bound, "
                 "consensus distance %.3g of its bound", worst, bytes_ok ? "" : ", wrong bytes_sent",
                 metrics_ok ? "" : ", metrics not summed", end_worst, worst_consensus);
    snprintf(what, sizeof what, "gossip:%s%s, %s: %d steps each equal the mix of the ranks' vectors by the "
             "topology's definition (%.2f rounding units), bytes_sent, summed metrics, the consensus distance "
             "every 2 steps (%.2g of its bound), the mean at the end", dl_topology_names[topology],
             overlap ? " --gossip-overlap" : "", optimizer->name, T, worst, worst_consensus);
    mpi_report(world, ok, what, detail);
    free(x);
    free(start);
    free(want);
    free(mag);
    dl_optim_free(&serial);
    dl_strategy_free(s);
    model_close(&m);
}

/* easgd:tau,alpha over 3 tau + 1 steps: between rounds the local steps of a
 * serial optimizer; at each round, with the center c kept here (from the
 * common initial vector), x_i - alpha (x_i - c) on every rank and c +
 * alpha sum_j (x_j - c) for the next round, within the rounding of the
 * float sum over the ranks; the end leaves every rank the ranks' mean. */
static void check_easgd(int tau, double alpha_opt, const struct optimizer *optimizer)
{
    int p = world->size, me = world->rank;
    long steps = 3L * tau + 1;
    char detail[1200] = "", what[300];
    struct model m;
    struct dl_error err = {0};
    struct dl_strategy *s = NULL;
    struct dl_optim serial = {0};
    struct dl_parallel_opts po = {.consistency = DL_CONS_EASGD, .easgd_tau = tau, .easgd_alpha = alpha_opt,
                                  .allreduce = "auto"};
    double alpha = alpha_opt > 0 ? alpha_opt : 0.9 / p;
    int rc = strategy_open(&m, optimizer, &po, &s, &serial, detail, sizeof detail);
    long nw = m.e.n_weights, n = nw + m.e.n_state;
    float *x = malloc(sizeof *x * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    double *center = malloc(sizeof *center * (size_t)n), *want = malloc(sizeof *want * (size_t)n),
           *mag = malloc(sizeof *mag * (size_t)n), *drift = calloc((size_t)n, sizeof *drift);
    pack_model(&m, x);
    for (long i = 0; i < n; i++)
        center[i] = x[i];
    double worst = 0;
    int local_ok = 1, rounds = 0;
    for (long step = 1; step <= steps && !rc; step++) {
        dl_exec_zero_grad(&m.e);
        rc = dl_strategy_begin(s, 4, 4 * p, &err);
        forward_backward(&m, me, step, 4);
        pack_model(&m, x);
        dl_optim_step(&serial, lr_at_step(step), x, m.e.dweights);
        struct dl_step_metrics metrics = {.loss_sum = dl_exec_loss_sum(&m.e)};
        struct dl_step_stats st = {0};
        float *all = gather(x, n);
        if (!rc)
            rc = dl_strategy_finish(s, step, lr_at_step(step), &metrics, &st, &err);
        if (rc || !all) {
            snprintf(detail, sizeof detail, "step %ld: %s", step, rc ? err.msg : "allgather failed");
            rc = rc ? rc : DL_ERR_COMM;
        }
        pack_model(&m, got);
        if (!rc && step % tau != 0) {
            local_ok = local_ok && memcmp(got, x, sizeof *x * (size_t)n) == 0 && st.bytes_sent == 0;
        } else if (!rc) {
            rounds++;
            for (long i = 0; i < n; i++) {
                double sum = 0, sum_abs = 0;
                for (int r = 0; r < p; r++) {
                    double d = all[(size_t)r * (size_t)n + (size_t)i] - center[i];
                    sum += d;
                    sum_abs += fabs(d);
                }
                double mine = x[i];
                want[i] = mine - alpha * (mine - center[i]);
                mag[i] = 4 * (fabs(mine) + fabs(center[i])) + alpha * drift[i];
                center[i] += alpha * sum;
                /* the strategy's float center drifts from this one by its
                 * roundings: the differences, their float sum over the ranks
                 * and the update, on top of the drift it had */
                drift[i] = drift[i] * (1 + alpha * p) + alpha * (p + 2) * sum_abs + 2 * fabs(center[i]);
            }
            rounding_ratio(got, want, mag, n, &worst);
        }
        free(all);
    }
    double end_worst = INFINITY;
    if (!rc)
        rc = end_average(s, &m, n, &end_worst, detail, sizeof detail);
    int ok = !rc && local_ok && worst <= 1 && rounds == (int)(steps / tau) && end_worst <= 1;
    if (!rc && !ok)
        snprintf(detail, sizeof detail, "%s%d rounds, %.3g rounding units from the elastic update, end %.3g of the "
                 "mean's bound", local_ok ? "" : "local steps differ from the serial optimizer; ", rounds, worst,
                 end_worst);
    snprintf(what, sizeof what, "easgd:%d,%g, %s: local steps equal the serial optimizer, every round pulls each rank "
             "and the center toward each other by alpha (%.2f rounding units), the mean at the end", tau, alpha,
             optimizer->name, worst);
    mpi_report(world, ok, what, detail);
    free(x);
    free(got);
    free(center);
    free(drift);
    free(want);
    free(mag);
    dl_optim_free(&serial);
    dl_strategy_free(s);
    model_close(&m);
}

/* easgd-async:tau with `servers` server ranks over T steps.  Every worker
 * records, per round, the weights it sent (after its local step, which must
 * equal a serial optimizer's) and the weights it holds after the round;
 * every server replays the rounds it applied, in its order, on its shard of
 * a center that starts at the initial weights: the worker's weights after
 * the round must be x - alpha (x - c) with the replayed c, bit for bit, and
 * the server ends holding the replayed center. */
enum { EA_TAG_SENT = 9501, EA_TAG_AFTER };

static void check_easgd_async(int servers, int tau)
{
    enum { T = 7 };
    int p = world->size, me = world->rank, workers = p - servers, rounds = (T + tau - 1) / tau;
    if (workers < 1 || workers > 64)
        return;
    char detail[1200] = "", what[300];
    struct model m;
    struct dl_error err = {0};
    int rc = model_open(&m, &SGD, detail, sizeof detail);
    long n = m.e.n_weights;
    float *w0 = rc ? NULL : copy_of(m.e.weights, n);
    struct dl_parallel_opts po = {.consistency = DL_CONS_EASGD_ASYNC, .easgd_tau = tau, .ps_servers = servers};
    float alpha = (float)dl_easgd_alpha(&po, workers);
    struct ps_log *log = calloc(1, sizeof *log);
    struct dl_rank_layout layout;
    dl_strategy_layout(&po, p, me, &layout);
    int server = layout.role == DL_ROLE_SERVER, local_ok = 1;
    size_t bytes = sizeof(float) * (size_t)n * (size_t)rounds;
    float *sent = malloc(bytes * (server ? (size_t)workers : 1)), *after = malloc(bytes * (server ? (size_t)workers : 1));
    struct dl_strategy *s = NULL;
    if (!rc)
        rc = dl_strategy_create(world, &m.e, &m.opt, &po, 5, NULL, NULL, &s, &err);
    if (!rc && server) {
        struct dl_serve_hooks hooks = {.ctx = log, .lr_at = ps_lr, .on_update = ps_record};
        struct dl_serve_result res;
        rc = dl_strategy_serve(s, &hooks, &res, &err);
    } else if (!rc) {
        struct dl_optim serial = {0};
        rc = dl_optim_init(&serial, &m.net.train.optim, n, &err);
        float *ws = malloc(sizeof *ws * (size_t)n);
        int r = 0;
        for (long step = 1; step <= T && !rc; step++) {
            dl_exec_zero_grad(&m.e);
            rc = dl_strategy_begin(s, 4, 4 * workers, &err);
            forward_backward(&m, me, step, 4);
            memcpy(ws, m.e.weights, sizeof *ws * (size_t)n);
            dl_optim_step(&serial, lr_at_step(step), ws, m.e.dweights);
            struct dl_step_metrics metrics = {.loss_sum = dl_exec_loss_sum(&m.e), .samples = 4};
            struct dl_step_stats st = {0};
            if (!rc)
                rc = dl_strategy_finish(s, step, lr_at_step(step), &metrics, &st, &err);
            if (!rc && step % tau == 0) {
                memcpy(sent + (size_t)r * (size_t)n, ws, sizeof *ws * (size_t)n);
                memcpy(after + (size_t)r * (size_t)n, m.e.weights, sizeof *ws * (size_t)n);
                r++;
            } else if (!rc) {
                local_ok = local_ok && same_floats(m.e.weights, ws, n);
            }
        }
        if (!rc && T % tau != 0) /* end's partial round */
            memcpy(sent + (size_t)r * (size_t)n, m.e.weights, sizeof *ws * (size_t)n);
        if (!rc)
            rc = dl_strategy_end(s, &err);
        if (!rc && T % tau != 0)
            memcpy(after + (size_t)r * (size_t)n, m.e.weights, sizeof *ws * (size_t)n);
        free(ws);
        dl_optim_free(&serial);
    }
    if (!rc && server)
        rc = dl_strategy_end(s, &err);
    dl_strategy_free(s);
    if (rc) {
        snprintf(detail, sizeof detail, "%s", err.msg);
        world->ops->abort(world, 1); /* the others would wait forever */
    }
    /* Every worker hands its record to every server. */
    for (int w = 0; w < workers && !rc; w++)
        if (server) {
            rc = world->ops->recv(world, sent + (size_t)w * (size_t)n * (size_t)rounds, bytes, servers + w,
                                  EA_TAG_SENT, &err);
            rc = rc ? rc : world->ops->recv(world, after + (size_t)w * (size_t)n * (size_t)rounds, bytes,
                                            servers + w, EA_TAG_AFTER, &err);
        } else if (me == servers + w) {
            for (int sv = 0; sv < servers && !rc; sv++) {
                rc = world->ops->send(world, sent, bytes, sv, EA_TAG_SENT, &err);
                rc = rc ? rc : world->ops->send(world, after, bytes, sv, EA_TAG_AFTER, &err);
            }
        }
    int ok = !rc && local_ok;
    if (rc)
        snprintf(detail, sizeof detail, "exchanging the records: %s", err.msg);
    else if (!local_ok)
        snprintf(detail, sizeof detail, "a worker's local step differs from the serial optimizer");
    if (ok && server) {
        long lo = (long)dl_block_lo((size_t)n, servers, me), hi = (long)dl_block_lo((size_t)n, servers, me + 1);
        float *c = copy_of(w0 + lo, hi - lo);
        int next[64] = {0};
        if (log->count != (long)workers * rounds) {
            ok = 0;
            snprintf(detail, sizeof detail, "server %d applied %ld rounds, expected %d", me, log->count,
                     workers * rounds);
        }
        for (long u = 0; ok && u < log->count; u++) {
            int w = log->u[u].worker, r = next[w]++;
            const float *x = sent + ((size_t)w * (size_t)rounds + (size_t)r) * (size_t)n + (size_t)lo,
                        *got = after + ((size_t)w * (size_t)rounds + (size_t)r) * (size_t)n + (size_t)lo;
            for (long i = 0; ok && i < hi - lo; i++) {
                float d = alpha * (x[i] - c[i]);
                if (got[i] != x[i] - d) {
                    ok = 0;
                    snprintf(detail, sizeof detail, "server %d, update %ld (worker %d, round %d), weight %ld: the "
                             "worker holds %.9g, x - alpha (x - c) is %.9g", me, u, w, r, lo + i, got[i], x[i] - d);
                }
                c[i] += d;
            }
        }
        if (ok && !same_floats(m.e.weights + lo, c, hi - lo)) {
            ok = 0;
            snprintf(detail, sizeof detail, "server %d's center differs from the replayed one", me);
        }
        free(c);
    }
    snprintf(what, sizeof what, "easgd-async:%d, %d server%s, %d worker%s: local steps equal the serial optimizer, "
             "every round moves the worker and the center by alpha (x - c) of the replayed center, bit for bit",
             tau, servers, servers > 1 ? "s" : "", workers, workers > 1 ? "s" : "");
    mpi_report(world, ok, what, detail);
    free(sent);
    free(after);
    free(log);
    free(w0);
    model_close(&m);
}

int main(int argc, char **argv)
{
    struct dl_error err = {0};
    if (dl_comm_open("mpi", &argc, &argv, &world, &err) != DL_OK) {
        printf("not ok - open mpi: %s\n", err.msg);
        return 1;
    }
    dl_threads_set(1);
    int decentralized_only = argc > 1 && strcmp(argv[1], "decentralized") == 0;
    if (world->size > 1) {
        for (int t = 0; t < DL_TOPO_COUNT; t++)
            check_gossip((enum dl_topology)t, 0, t % 2 ? &ADAM : &SGD);
        check_gossip(DL_TOPO_RING, 1, &SGD);
        check_gossip(DL_TOPO_ONE_PEER_EXP, 1, &NESTEROV);
        check_easgd(2, 0, &SGD);
        check_easgd(1, 0.5 / world->size, &ADAM);
        check_easgd_async(1, 2);
        check_easgd_async(2, 3);
    }
    if (world->size > 1 && !decentralized_only) {
        struct dl_parallel_opts plain = {.consistency = DL_CONS_SYNC, .allreduce = "ring", .overlap = 1,
                                         .bucket_bytes = 25u << 20, .stall_warning_s = 60, .stall_timeout_s = 600};
        check_sync("one bucket, overlapped", &SGD, plain);
        struct dl_parallel_opts small = plain;
        small.allreduce = "recursive_doubling";
        small.bucket_bytes = 256;
        small.overlap = 0;
        check_sync("256-byte buckets, no overlap", &ADAM, small);
        struct dl_parallel_opts corrected = plain;
        corrected.bucket_bytes = 512;
        if (dl_codec_parse("topk:1", &corrected.codec, &err) != DL_OK)
            printf("not ok - topk:1: %s\n", err.msg);
        check_sync("momentum correction through topk:1", &NESTEROV, corrected);
        check_local_sgd(3, &SGD);
        check_local_sgd(1, &ADAM);
        check_param_server(1, 0, &NESTEROV);
        check_param_server(1, 2, &SGD);
        check_param_server(1, -1, &ADAM);
        check_param_server(2, 1, &SGD);
        check_param_server(2, -1, &NESTEROV);
    }
    dl_comm_close(world);
    return 0;
}
