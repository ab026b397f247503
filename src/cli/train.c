/* train.c: `dltrain [train] --net FILE [options]`: loads the network, trains
 * it, prints progress and the final test accuracy, and optionally writes
 * metrics as JSON lines. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "core/threads.h"
#include "data/dataset.h"
#include "io/metrics.h"
#include "train/trainer.h"

enum { OPT_METRICS = DL_OPT_FIRST_LOCAL, OPT_LOG_EVERY, OPT_QUIET };

struct printer {
    const char *net_path;
    long log_every;
    int quiet;
    struct dl_metrics metrics;
};

static void fmt_time(double s, char *buf, size_t n)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void on_start(void *ctx, const struct dl_net *net, long train_n, long test_n, long steps)
{
    struct printer *p = ctx;
    if (p->quiet)
        return;
    const struct dl_train_spec *t = &net->train;
    printf("dltrain: training %s (%s) on %s: %ld training / %ld test samples\n", net->name, p->net_path,
           dl_dataset_kind_name(net->data.kind), train_n, test_n);
    printf("  %d layers, %ld parameters, batch %d, %ld steps/epoch, %d epoch%s, %s lr %g, %d thread%s, seed %llu\n",
           net->graph.n, dl_graph_param_count(&net->graph), t->batch, steps, t->epochs, t->epochs == 1 ? "" : "s",
           dl_optim_names[t->optim.kind], t->optim.lr, dl_threads_get(), dl_threads_get() == 1 ? "" : "s",
           (unsigned long long)t->seed);
    fflush(stdout);
}

static void on_step(void *ctx, const struct dl_step_report *r)
{
    struct printer *p = ctx;
    static const char *const keys[] = {"epoch", "step", "global_step", "loss", "accuracy", "lr", "samples_per_s"};
    double vals[] = {r->epoch, (double)r->step, (double)r->global_step, r->loss, r->accuracy, r->lr,
                     r->samples_per_s};
    dl_metrics_write(&p->metrics, "step", 7, keys, vals);
    if (p->quiet || (r->step % p->log_every != 0 && r->step != r->steps_per_epoch))
        return;
    char eta[32];
    fmt_time(r->eta_s, eta, sizeof eta);
    printf("epoch %d/%d  step %5ld/%ld  loss %.6f  acc %6.2f%%  lr %.4g  %8.0f samples/s  ETA %s\n", r->epoch,
           r->epochs, r->step, r->steps_per_epoch, r->loss, 100 * r->accuracy, r->lr, r->samples_per_s, eta);
    fflush(stdout);
}

static void on_epoch(void *ctx, const struct dl_epoch_report *r)
{
    struct printer *p = ctx;
    static const char *const keys[] = {"epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy",
                                       "seconds", "samples_per_s"};
    double vals[] = {r->epoch, r->train_loss, r->train_accuracy, r->test_loss, r->test_accuracy, r->seconds,
                     r->samples_per_s};
    dl_metrics_write(&p->metrics, "epoch", 7, keys, vals);
    if (p->quiet)
        return;
    printf("epoch %d/%d done: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s, %.0f samples/s\n",
           r->epoch, r->epochs, r->train_loss, 100 * r->train_accuracy, r->test_loss, 100 * r->test_accuracy,
           r->seconds, r->samples_per_s);
    fflush(stdout);
}

static void help(void)
{
    fputs("Usage: dltrain [train] --net FILE [options]\n"
          "Trains the network described by FILE and prints the test accuracy after every epoch.\n\n",
          stdout);
    dl_net_options_help(stdout);
    fputs("\nOutput options:\n"
          "  --metrics FILE        also write every step and epoch as JSON lines to FILE\n"
          "  --log-every N         print a progress line every N steps (default 100)\n"
          "  --quiet               print only the final result\n\n"
          "Exit status: 0 success, 1 run-time failure, 2 bad network file or option.\n",
          stdout);
}

int dl_cli_train(int argc, char **argv)
{
    static const struct option long_opts[] = {
        DL_NET_OPTIONS,
        {"metrics", required_argument, 0, OPT_METRICS},
        {"log-every", required_argument, 0, OPT_LOG_EVERY},
        {"quiet", no_argument, 0, OPT_QUIET},
        {0, 0, 0, 0}};
    struct dl_net_options no = {0};
    struct printer p = {.log_every = 100};
    const char *metrics_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        int r = dl_net_option(&no, opt, optarg, "dltrain");
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case DL_OPT_HELP: help(); return 0;
        case DL_OPT_VERSION: dl_print_version("dltrain"); return 0;
        case OPT_METRICS: metrics_path = optarg; break;
        case OPT_LOG_EVERY: {
            char *end;
            p.log_every = strtol(optarg, &end, 10);
            if (*end || p.log_every < 1) {
                fprintf(stderr, "dltrain: --log-every: expected a positive integer, found '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_QUIET: p.quiet = 1; break;
        default: fprintf(stderr, "Try 'dltrain train --help'.\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dltrain: unexpected argument '%s' (try --help)\n", argv[optind]);
        return 2;
    }
    struct dl_net net;
    int status = dl_net_options_load(&no, &net, "dltrain");
    if (status)
        return status;
    p.net_path = no.net_path;
    struct dl_error err = {0};
    if (metrics_path && dl_metrics_open(&p.metrics, metrics_path, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        dl_net_free(&net);
        return 1;
    }
    struct dl_train_hooks hooks = {.ctx = &p, .on_start = on_start, .on_step = on_step, .on_epoch = on_epoch};
    struct dl_train_result res;
    int rc = dl_train(&net, &hooks, &res, &err);
    if (!rc && metrics_path)
        rc = dl_metrics_close(&p.metrics, &err);
    else if (metrics_path)
        dl_metrics_close(&p.metrics, NULL);
    if (rc) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        dl_net_free(&net);
        return rc == DL_ERR_SPEC ? 2 : 1;
    }
    printf("final: test accuracy %.2f%% (%ld samples), test loss %.4f, after %ld steps in %.1f s\n",
           100 * res.last.test_accuracy, res.last.test_samples, res.last.test_loss, res.steps, res.seconds);
    dl_net_free(&net);
    return 0;
}
