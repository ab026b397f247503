/* bench_data.c: `dltrain bench data`: the input pipeline's speed.
 * Without --net: decoded and augmented images/s (random-resized-crop + flip
 * + normalisation at --size) per number of decode threads on the training
 * split of an image folder, side by side with torchvision's ImageFolder +
 * DataLoader with as many workers and the same transforms (bench/
 * data-torchvision, run with /usr/bin/python3).  With --net: training steps
 * fed by the pipeline, and the share of the step time spent waiting for data
 * (the exposed input time). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/options.h"
#include "core/clock.h"
#include "core/shipped.h"
#include "core/threads.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "exec/exec.h"
#include "optim/optim.h"
#include "spec/datafile.h"

#define PROG "dltrain bench data"
#define MAX_THREAD_COUNTS 16

enum { OPT_DATASET = 1, OPT_DATA, OPT_THREADS_LIST, OPT_SIZE, OPT_BATCH, OPT_IMAGES, OPT_NO_TV, OPT_NET, OPT_STEPS,
       OPT_WARMUP, OPT_THREADS, OPT_HELP };

struct bench {
    struct dl_data_spec data;
    int thread_counts[MAX_THREAD_COUNTS], n_counts;
    int size, batch, torchvision, steps, warmup, threads;
    long images;
    const char *net;
};

static void help(void)
{
    fputs("Usage: dltrain bench data [--dataset NAME] --data DIR [--data-threads N,N,...] [--size S]\n"
          "                          [--batch B] [--images M] [--no-torchvision]\n"
          "       dltrain bench data --net FILE [--dataset NAME] --data DIR [--batch B] [--data-threads N]\n"
          "                          [--threads N] [--steps N] [--warmup N]\n"
          "The first form decodes and augments M images of DIR/train (random-resized-crop to SxS, flip,\n"
          "normalisation) with each number of decode threads and prints images/s and images/s per thread,\n"
          "next to torchvision's ImageFolder + DataLoader with as many workers and the same transforms.\n"
          "The second times training steps fed by the pipeline and prints the share of the step time\n"
          "spent waiting for data.\n\n"
          "  --dataset NAME        dataset file or format (default imagefolder)\n"
          "  --data DIR            its folder (DIR/train/<class>/*.jpg ...)\n"
          "  --data-threads LIST   decode threads, e.g. 1,2 (default 1,2; --net: one number, default 2)\n"
          "  --size S              input side (default 224; --net: the network's)\n"
          "  --batch B             batch size (default 32; --net: the network's)\n"
          "  --images M            images timed per thread count (default 512)\n"
          "  --no-torchvision      do not run the torchvision side\n"
          "  --net FILE            time training steps of this network\n"
          "  --threads N           compute threads (--net; default: the available cores)\n"
          "  --steps N, --warmup N timed and untimed steps (--net; default 5 and 1)\n",
          stdout);
}

static int parse_int(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        fprintf(stderr, "%s: --%s: expected an integer in [%ld, %ld], found '%s'\n", PROG, opt, min, max, s);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_counts(const char *s, struct bench *b)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    b->n_counts = 0;
    for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        long v;
        if (b->n_counts == MAX_THREAD_COUNTS || parse_int("data-threads", p, 1, 256, &v))
            return 2;
        b->thread_counts[b->n_counts++] = (int)v;
    }
    return b->n_counts ? 0 : 2;
}

static int parse_args(int argc, char **argv, struct bench *b)
{
    static const struct option opts[] = {
        {"dataset", required_argument, 0, OPT_DATASET}, {"data", required_argument, 0, OPT_DATA},
        {"data-threads", required_argument, 0, OPT_THREADS_LIST}, {"size", required_argument, 0, OPT_SIZE},
        {"batch", required_argument, 0, OPT_BATCH}, {"images", required_argument, 0, OPT_IMAGES},
        {"no-torchvision", no_argument, 0, OPT_NO_TV}, {"net", required_argument, 0, OPT_NET},
        {"steps", required_argument, 0, OPT_STEPS}, {"warmup", required_argument, 0, OPT_WARMUP},
        {"threads", required_argument, 0, OPT_THREADS}, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    struct dl_error err = {0};
    const char *dataset = "imagefolder", *dir = NULL;
    int opt;
    long v;
    optind = 1;
    while ((opt = dl_getopt(argc, argv, opts, PROG)) != -1) {
        switch (opt) {
        case OPT_DATASET: dataset = optarg; break;
        case OPT_DATA: dir = optarg; break;
        case OPT_THREADS_LIST: if (parse_counts(optarg, b)) return 2; break;
        case OPT_SIZE: if (parse_int("size", optarg, 8, 4096, &v)) return 2; b->size = (int)v; break;
        case OPT_BATCH: if (parse_int("batch", optarg, 1, 65536, &v)) return 2; b->batch = (int)v; break;
        case OPT_IMAGES: if (parse_int("images", optarg, 1, 1L << 30, &b->images)) return 2; break;
        case OPT_NO_TV: b->torchvision = 0; break;
        case OPT_NET: b->net = optarg; break;
        case OPT_STEPS: if (parse_int("steps", optarg, 1, 100000, &v)) return 2; b->steps = (int)v; break;
        case OPT_WARMUP: if (parse_int("warmup", optarg, 0, 100000, &v)) return 2; b->warmup = (int)v; break;
        case OPT_THREADS: if (parse_int("threads", optarg, 1, 4096, &v)) return 2; b->threads = (int)v; break;
        case OPT_HELP: help(); return -1;
        default: return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", PROG, argv[optind]);
        return 2;
    }
    if (dl_data_use_dataset(&b->data, dataset, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err.msg);
        return 2;
    }
    if (dir)
        snprintf(b->data.dir, sizeof b->data.dir, "%s", dir);
    if (b->data.kind != DL_DATASET_IMAGEFOLDER) {
        fprintf(stderr, "%s: --dataset %s: expected an image-folder dataset\n", PROG, dataset);
        return 2;
    }
    return 0;
}

/* First batch untimed (thread start-up, first files); then images/s over
 * at least `images` images, wrapping around epochs. */
static int time_decoding(struct bench *b, int threads, double *rate, struct dl_error *err)
{
    struct dl_shape shape = {3, b->size, b->size};
    struct dl_dataset ds;
    b->data.threads = threads;
    int rc = dl_dataset_load(&b->data, 1, shape, 1 << 24, 1, &ds, err);
    if (rc)
        return rc;
    struct dl_batcher bt;
    rc = dl_batcher_init(&bt, &ds, b->batch, 0, 1, 1, 1, 1, err);
    float *x = rc ? NULL : dl_calloc((size_t)b->batch * (size_t)dl_shape_count(shape), sizeof *x, err);
    int *y = x ? dl_calloc((size_t)b->batch, sizeof *y, err) : NULL;
    if (!rc && !y)
        rc = DL_ERR_NOMEM;
    long done = -1, epoch = 0;
    double t0 = 0;
    while (!rc && done < b->images) {
        int n = dl_batcher_next(&bt, x, y);
        if (n < 0) {
            *err = bt.error;
            rc = err->code;
        } else if (n == 0) {
            dl_batcher_start_epoch(&bt, ++epoch);
        } else if (done < 0) {
            done = 0;
            t0 = dl_clock_now();
        } else
            done += n;
    }
    *rate = rc ? 0 : (double)done / (dl_clock_now() - t0);
    free(x);
    free(y);
    dl_batcher_free(&bt);
    dl_dataset_free(&ds);
    return rc;
}

/* bench/data-torchvision among the shipped files (core/shipped.h); its
 * "images/s: X" line. */
static int time_torchvision(const struct bench *b, int workers, double *rate)
{
    char script[1200];
    if (!dl_shipped_find("bench/data-torchvision", script, sizeof script, NULL, 0))
        return -1;
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' --workers %d --size %d --batch %d --images %ld 2>&1", script,
             b->data.dir, workers, b->size, b->batch, b->images);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "images/s: %lf", rate) == 1)
            found = 1;
        else
            fprintf(stderr, "%s: torchvision: %s", PROG, line);
    pclose(p);
    return found ? 0 : -1;
}

static int bench_decoding(struct bench *b)
{
    printf("decoding + random-resized-crop %dx%d + flip + normalisation of %s/train, batches of %d, "
           "%ld images per row\n", b->size, b->size, b->data.dir, b->batch, b->images);
    printf("%-8s %14s %18s %16s %18s %8s\n", "threads", "dltrain img/s", "img/s per thread", "torchvision",
           "per worker", "ratio");
    for (int i = 0; i < b->n_counts; i++) {
        int t = b->thread_counts[i];
        double ours, tv = 0;
        struct dl_error err = {0};
        if (time_decoding(b, t, &ours, &err)) {
            fprintf(stderr, "%s: %s\n", PROG, err.msg);
            return err.code == DL_ERR_SPEC ? 2 : 1;
        }
        int have_tv = b->torchvision && time_torchvision(b, t, &tv) == 0;
        if (have_tv)
            printf("%-8d %14.1f %18.1f %16.1f %18.1f %7.2fx\n", t, ours, ours / t, tv, tv / t, ours / tv);
        else
            printf("%-8d %14.1f %18.1f %16s %18s %8s\n", t, ours, ours / t, "-", "-", "-");
        fflush(stdout);
    }
    return 0;
}

/* Training steps fed by the pipeline: how long each step waits for its batch. */
static int bench_training(struct bench *b)
{
    struct dl_net_options no;
    dl_net_options_init(&no);
    no.net_path = b->net;
    no.threads = b->threads;
    struct dl_net net;
    int status = dl_net_options_load(&no, &net, PROG);
    if (status)
        return status;
    if (b->batch)
        net.train.batch = b->batch;
    b->data.threads = b->n_counts ? b->thread_counts[0] : 2;
    int N = net.train.batch;
    struct dl_error err = {0};
    struct dl_dataset ds;
    struct dl_batcher bt = {0};
    struct dl_exec e = {0};
    struct dl_exec_options eo;
    struct dl_optim o = {0};
    dl_net_exec_options(&no, &eo);
    float *x = NULL;
    int *y = NULL;
    int rc = dl_dataset_load(&b->data, 1, net.graph.input, net.graph.classes, 1, &ds, &err);
    if (!rc)
        rc = dl_batcher_init(&bt, &ds, N, 0, 1, 1, 1, 1, &err);
    if (!rc)
        rc = dl_exec_init(&e, &net.graph, N, net.train.seed, &eo, &err);
    if (!rc)
        rc = dl_optim_init_on(&o, &net.train.optim, e.n_weights, dl_exec_device(&e), &err);
    if (!rc) {
        x = dl_calloc((size_t)N * (size_t)dl_shape_count(net.graph.input), sizeof *x, &err);
        y = dl_calloc((size_t)N, sizeof *y, &err);
        rc = x && y ? DL_OK : DL_ERR_NOMEM;
    }
    double total = 0, input = 0, waited0 = 0;
    long epoch = 0;
    for (int s = 0; !rc && s < b->warmup + b->steps; s++) {
        if (s == b->warmup)
            waited0 = bt.waited_s;
        double t0 = dl_clock_now();
        int n = dl_batcher_next(&bt, x, y);
        if (n == 0) {
            dl_batcher_start_epoch(&bt, ++epoch);
            n = dl_batcher_next(&bt, x, y);
        }
        if (n < 0) {
            err = bt.error;
            rc = err.code;
            break;
        }
        double t1 = dl_clock_now();
        dl_exec_zero_grad(&e);
        dl_exec_forward(&e, x, y, n, 1);
        dl_exec_backward(&e);
        dl_optim_step(&o, net.train.optim.lr, e.weights, e.dweights);
        double t2 = dl_clock_now();
        if (s >= b->warmup) {
            total += t2 - t0;
            input += t1 - t0;
        }
    }
    if (!rc && e.status) {
        err = e.err;
        rc = DL_ERR_INTERNAL;
    }
    if (!rc) {
        double waited = bt.waited_s - waited0;
        printf("network %s, batch %d, %d compute threads, %d decode threads, %d timed steps after %d warm-up\n",
               net.name, N, dl_threads_get(), b->data.threads, b->steps, b->warmup);
        printf("step time: %.3f s (mean, with the input)\n", total / b->steps);
        printf("waiting for decoded batches: %.4f s per step, %.2f%% of the step time (exposed input time)\n",
               waited / b->steps, 100 * waited / total);
        printf("taking a batch (waiting + copying): %.4f s per step, %.2f%% of the step time\n", input / b->steps,
               100 * input / total);
    } else
        fprintf(stderr, "%s: %s\n", PROG, err.msg);
    free(x);
    free(y);
    dl_optim_free(&o);
    dl_exec_free(&e);
    dl_batcher_free(&bt);
    dl_dataset_free(&ds);
    dl_net_free(&net);
    return rc ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}

int dl_cli_bench_data(int argc, char **argv)
{
    struct bench b = {.thread_counts = {1, 2}, .n_counts = 2, .size = 224, .batch = 0, .torchvision = 1,
                      .steps = 5, .warmup = 1, .images = 512};
    dl_data_defaults(&b.data);
    int rc = parse_args(argc, argv, &b);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!b.data.dir[0]) {
        fprintf(stderr, "%s: missing --data DIR (an image folder with train/; try --help)\n", PROG);
        return 2;
    }
    if (b.net)
        return bench_training(&b);
    if (!b.batch)
        b.batch = 32;
    dl_threads_set(1);
    return bench_decoding(&b);
}
