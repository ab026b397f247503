/* bench_data.c: `dltrain bench data`: the input pipeline's speed.
 * Without --net: decoded and augmented images/s (random-resized-crop + flip
 * + normalisation at --size) per number of decode threads on the training
 * split of an image folder, side by side with torchvision's ImageFolder +
 * DataLoader with as many workers and the same transforms (bench/
 * data-torchvision, run with /usr/bin/python3).  With --net: training steps
 * fed by the pipeline, and the share of the step time spent waiting for data
 * (the exposed input time). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/option_table.h"
#include "cli/options.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/shipped.h"
#include "core/threads.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "exec/exec.h"
#include "optim/optim.h"
#include "spec/datafile.h"

#define PROG "dltrain bench data"
#define MAX_THREAD_COUNTS 16

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

/* The command line: the bench's settings and the dataset's name and folder. */
struct bench_data_command {
    struct bench b;
    const char *dataset, *dir;
};

/* --data-threads N,N,...: at most MAX_THREAD_COUNTS counts of 1 to 256. */
static int take_thread_counts(void *settings, const char *value, struct dl_error *err)
{
    struct bench *b = &((struct bench_data_command *)settings)->b;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", value);
    b->n_counts = 0;
    for (char *save, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (b->n_counts == MAX_THREAD_COUNTS)
            return 2;
        int rc = dl_parse_int("--data-threads", p, 1, 256, &b->thread_counts[b->n_counts++], err);
        if (rc)
            return rc;
    }
    return b->n_counts ? DL_OK : 2;
}

static const struct dl_option options[] = {
    DL_OPTION_STRING("dataset", struct bench_data_command, dataset),
    DL_OPTION_STRING("data", struct bench_data_command, dir),
    DL_OPTION_CALL("data-threads", required_argument, take_thread_counts),
    DL_OPTION_INT("size", struct bench_data_command, b.size, 8, 4096),
    DL_OPTION_INT("batch", struct bench_data_command, b.batch, 1, 65536),
    DL_OPTION_LONG("images", struct bench_data_command, b.images, 1, 1L << 30),
    DL_OPTION_FLAG("no-torchvision", struct bench_data_command, b.torchvision, 0),
    DL_OPTION_STRING("net", struct bench_data_command, b.net),
    DL_OPTION_INT("steps", struct bench_data_command, b.steps, 1, 100000),
    DL_OPTION_INT("warmup", struct bench_data_command, b.warmup, 0, 100000),
    DL_OPTION_INT("threads", struct bench_data_command, b.threads, 1, 4096),
    DL_OPTION_HELP,
    DL_OPTION_END};

/* Parses argv into cmd->b (its dataset an image folder); -1 to go on, else the exit status. */
static int parse_args(struct bench_data_command *cmd, int argc, char **argv)
{
    struct bench *b = &cmd->b;
    struct dl_error err = {0};
    cmd->dataset = "imagefolder";
    struct dl_command_line line = {PROG, options, cmd, NULL, help};
    int status = dl_options_parse(&line, argc, argv, NULL);
    if (status >= 0)
        return status;
    if (dl_data_use_dataset(&b->data, cmd->dataset, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err.msg);
        return 2;
    }
    if (cmd->dir)
        snprintf(b->data.dir, sizeof b->data.dir, "%s", cmd->dir);
    if (b->data.kind != DL_DATASET_IMAGEFOLDER) {
        fprintf(stderr, "%s: --dataset %s: expected an image-folder dataset\n", PROG, cmd->dataset);
        return 2;
    }
    return -1;
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

/* Training fed by the pipeline: the network's dataset, batcher, executor and
 * optimizer, one batch's buffers, and the times summed over the timed steps. */
struct training {
    struct dl_net net;
    struct dl_dataset ds;
    struct dl_batcher bt;
    struct dl_exec e;
    struct dl_optim o;
    void *x; /* values of the input's dtype */
    int *y;
    double total, input, waited; /* seconds: steps, taking batches, waiting for them */
};

/* Loads --net (the exit status on failure) and readies t for its batches. */
static int start_training(struct bench *b, struct training *t, int *rc, struct dl_error *err)
{
    struct dl_net_options no;
    dl_net_options_init(&no);
    no.net_path = b->net;
    no.threads = b->threads;
    int status = dl_net_options_load(&no, &t->net, PROG);
    if (status)
        return status;
    if (b->batch)
        t->net.train.batch = b->batch;
    b->data.threads = b->n_counts ? b->thread_counts[0] : 2;
    int N = t->net.train.batch;
    const struct dl_graph *g = &t->net.graph;
    struct dl_exec_options eo;
    dl_net_exec_options(&no, &eo);
    *rc = dl_dataset_load(&b->data, 1, g->input, g->classes, 1, &t->ds, err);
    if (!*rc)
        *rc = dl_batcher_init(&t->bt, &t->ds, N, 0, 1, 1, 1, 1, err);
    if (!*rc)
        *rc = dl_exec_init(&t->e, g, N, t->net.train.seed, &eo, err);
    if (!*rc)
        *rc = dl_optim_init_on(&t->o, &t->net.train.optim, t->e.n_weights, dl_exec_device(&t->e), err);
    if (!*rc) {
        t->x = dl_calloc((size_t)N * (size_t)dl_shape_count(g->input), dl_dtype_value_size(g->input.dtype), err);
        t->y = dl_calloc((size_t)N, sizeof *t->y, err);
        *rc = t->x && t->y ? DL_OK : DL_ERR_NOMEM;
    }
    return 0;
}

/* --warmup untimed steps, then --steps timed ones; DL_OK or an error in err. */
static int time_steps(const struct bench *b, struct training *t, struct dl_error *err)
{
    double waited0 = 0;
    long epoch = 0;
    for (int s = 0; s < b->warmup + b->steps; s++) {
        if (s == b->warmup)
            waited0 = t->bt.waited_s;
        double t0 = dl_clock_now();
        int n = dl_batcher_next(&t->bt, t->x, t->y);
        if (n == 0) {
            dl_batcher_start_epoch(&t->bt, ++epoch);
            n = dl_batcher_next(&t->bt, t->x, t->y);
        }
        if (n < 0) {
            *err = t->bt.error;
            return err->code;
        }
        double t1 = dl_clock_now();
        dl_exec_zero_grad(&t->e);
        dl_exec_forward(&t->e, t->x, t->y, n, 1);
        dl_exec_backward(&t->e);
        dl_optim_step(&t->o, t->net.train.optim.lr, t->e.weights, t->e.dweights);
        double t2 = dl_clock_now();
        if (s >= b->warmup) {
            t->total += t2 - t0;
            t->input += t1 - t0;
        }
    }
    if (t->e.status) {
        *err = t->e.err;
        return DL_ERR_INTERNAL;
    }
    t->waited = t->bt.waited_s - waited0;
    return DL_OK;
}

static void print_training(const struct bench *b, const struct training *t)
{
    printf("network %s, batch %d, %d compute threads, %d decode threads, %d timed steps after %d warm-up\n",
           t->net.name, t->net.train.batch, dl_threads_get(), b->data.threads, b->steps, b->warmup);
    printf("step time: %.3f s (mean, with the input)\n", t->total / b->steps);
    printf("waiting for decoded batches: %.4f s per step, %.2f%% of the step time (exposed input time)\n",
           t->waited / b->steps, 100 * t->waited / t->total);
    printf("taking a batch (waiting + copying): %.4f s per step, %.2f%% of the step time\n", t->input / b->steps,
           100 * t->input / t->total);
}

static void stop_training(struct training *t)
{
    free(t->x);
    free(t->y);
    dl_optim_free(&t->o);
    dl_exec_free(&t->e);
    dl_batcher_free(&t->bt);
    dl_dataset_free(&t->ds);
    dl_net_free(&t->net);
}

/* Training steps fed by the pipeline: how long each step waits for its batch. */
static int bench_training(struct bench *b)
{
    struct training t = {0};
    struct dl_error err = {0};
    int rc = DL_OK, status = start_training(b, &t, &rc, &err);
    if (status)
        return status;
    if (!rc)
        rc = time_steps(b, &t, &err);
    if (!rc)
        print_training(b, &t);
    else
        fprintf(stderr, "%s: %s\n", PROG, err.msg);
    stop_training(&t);
    return rc ? (rc == DL_ERR_SPEC ? 2 : 1) : 0;
}

int dl_cli_bench_data(int argc, char **argv)
{
    struct bench_data_command cmd = {.b = {.thread_counts = {1, 2}, .n_counts = 2, .size = 224, .batch = 0,
                                           .torchvision = 1, .steps = 5, .warmup = 1, .images = 512}};
    struct bench *b = &cmd.b;
    dl_data_defaults(&b->data);
    int status = parse_args(&cmd, argc, argv);
    if (status >= 0)
        return status;
    if (!b->data.dir[0]) {
        fprintf(stderr, "%s: missing --data DIR (an image folder with train/; try --help)\n", PROG);
        return 2;
    }
    if (b->net)
        return bench_training(b);
    if (!b->batch)
        b->batch = 32;
    dl_threads_set(1);
    return bench_decoding(b);
}
