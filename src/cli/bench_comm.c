/* bench_comm.c: `dltrain bench comm` (run under mpirun -np N): times every
 * allreduce algorithm on each message size (default: the DeepBench allreduce
 * sizes shipped in bench/data), with algorithm and bus bandwidth, the cost
 * model's prediction and the ratio to the backend's own allreduce; for
 * gradient codecs the bytes on the wire and the reconstruction error; one
 * gossip mixing step per topology (parallel/gossip_exchange.h); and with
 * --alltoall the backend's all-to-all of the vector in equal parts (a
 * mixture of experts' token exchange). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/option_table.h"
#include "cli/options.h"
#include "comm/allreduce.h"
#include "comm/codec.h"
#include "comm/comm.h"
#include "comm/costmodel.h"
#include "core/shipped.h"
#include "comm/emulate.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/rng.h"
#include "parallel/gossip_exchange.h"

#define PROG "dltrain bench comm"
#define MAX_SIZES 64
#define MAX_ITEMS 16

struct bench {
    struct dl_comm *c;
    size_t sizes[MAX_SIZES]; /* floats */
    int nsizes;
    const char *algos[MAX_ITEMS];
    int nalgos;
    char *codecs[MAX_ITEMS];
    int ncodecs;
    int topologies[DL_TOPO_COUNT]; /* the gossip rows */
    int ntopologies;
    int repeat; /* 0: as many as fit in about 0.3 s, 3 to 1000 */
    int csv;
    int alltoall; /* --alltoall: its table too */
    struct dl_allreduce_opts opts;
    struct dl_cost_params cost;
    struct dl_comm_emulation emulation; /* --comm-emulate */
    int emulate;
};

static void usage(FILE *f)
{
    fputs("Usage: mpirun -np N dltrain bench comm [OPTION]...\n"
          "Time allreduce algorithms and gradient codecs on every rank of the job.\n"
          "\n"
          "  --comm NAME          backend: auto (default), mpi, nccl or self\n"
          "  --comm-emulate alpha=TIME,bw=RATE\n"
          "                       testing and teaching aid: delay every message as a network\n"
          "                       of latency TIME (20us, 5ms) and bandwidth RATE (1GB/s) would;\n"
          "                       the model column adds them to the measured parameters\n"
          "  --sizes LIST         comma-separated sizes: a plain number counts floats,\n"
          "                       a unit gives bytes: 1M,16M,64M (K, M, G, T = KiB, MiB,\n"
          "                       GiB, TiB; KB, MB, GB, TB = powers of 1000)\n"
          "  --suite deepbench    the DeepBench allreduce sizes (default when no --sizes)\n"
          "  --algorithms LIST    ring,recursive_doubling,rabenseifner,tree,ps,native,auto\n"
          "                       (default: all but auto)\n"
          "  --compress LIST      codecs to measure as well: 1bit, qsgd:BITS, topk:FRACTION\n"
          "  --gossip LIST        gossip topologies whose mixing step to time: ring, exp,\n"
          "                       one-peer-exp, complete, all (default), none\n"
          "  --alltoall           time the backend's all-to-all too: the vector in equal parts, one\n"
          "                       to each rank (a mixture of experts' token exchange)\n"
          "  --repeat N           timed runs per case (default: about 0.3 s worth, 3 to 1000)\n"
          "  --ps-servers K       parameter server ranks (default: every rank)\n"
          "  --segment SIZE       pipelining segment of ring, rabenseifner, tree, in bytes\n"
          "                       (units as in --sizes; default 1M)\n"
          "  --remeasure          measure alpha, beta, gamma again (else the cached values)\n"
          "  --csv                comma-separated output\n"
          "  --help               print this help and exit\n"
          "  --version            print the version and exit\n"
          "\n"
          "busbw = 2(p-1)/p x bytes / time; model = the alpha-beta-gamma prediction;\n"
          "vs_native = native time / this time.  Only rank 0 prints.\n",
          f);
}

/* One --sizes item: a plain number counts floats; with a unit (4K, 16MiB,
 * 1GB: core/parse.h) it is bytes, a whole number of floats. */
static int parse_size(const char *s, size_t *floats, struct dl_error *err)
{
    const size_t max_bytes = (size_t)1 << 40;
    if (*s && strspn(s, "0123456789") == strlen(s)) {
        long count;
        int rc = dl_parse_long("--sizes", s, 0, (long)(max_bytes / dl_dtype_size(DL_F32)), &count, err);
        if (!rc)
            *floats = (size_t)count;
        return rc;
    }
    size_t bytes;
    int rc = dl_parse_bytes("--sizes", s, 0, max_bytes, &bytes, err);
    if (!rc && bytes % dl_dtype_size(DL_F32))
        rc = dl_errorf(err, DL_ERR_SPEC, "--sizes: expected a whole number of floats (4 bytes each), found '%s'", s);
    if (!rc)
        *floats = bytes / dl_dtype_size(DL_F32);
    return rc;
}

/* Splits a comma list in place into items[]; returns the count or -1. */
static int split_list(char *s, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max)
            return -1;
        items[n++] = tok;
    }
    return n;
}

/* The DeepBench allreduce sizes, shipped in bench/data (core/shipped.h). */
static int load_deepbench(struct bench *b)
{
    const char *rel = "bench/data/deepbench_allreduce.csv";
    char path[4096], looked[4200];
    FILE *f = dl_shipped_find(rel, path, sizeof path, looked, sizeof looked) ? fopen(path, "r") : NULL;
    if (!f) {
        fprintf(stderr, "%s: cannot find %s (looked in %s; set DLTRAIN_DATADIR)\n", PROG, rel, looked);
        return -1;
    }
    char line[256];
    while (fgets(line, sizeof line, f) && b->nsizes < MAX_SIZES) {
        char *end;
        unsigned long long v = strtoull(line, &end, 10);
        if (end != line && *end == ',')
            b->sizes[b->nsizes++] = (size_t)v;
    }
    fclose(f);
    return b->nsizes > 0 ? 0 : -1;
}

/* Slowest rank's time of one call. */
static double max_over_ranks(struct dl_comm *c, double t)
{
    double all[1024];
    if (c->size > 1024 || c->ops->allgather(c, &t, all, sizeof t, NULL) != DL_OK)
        return t;
    for (int i = 0; i < c->size; i++)
        if (all[i] > t)
            t = all[i];
    return t;
}

static void sort_doubles(double *t, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
}

/* One call of a on buf: the slowest rank's seconds, or < 0 after an error. */
static double time_once(struct bench *b, const struct dl_allreduce_algo *a, float *buf, size_t n,
                        struct dl_error *err)
{
    struct dl_comm *c = b->c;
    c->ops->barrier(c, NULL);
    double t0 = dl_clock_now();
    if (a->run(c, buf, n, &b->opts, err) != DL_OK)
        return -1;
    return max_over_ranks(c, dl_clock_now() - t0);
}

/* Timed runs of a case whose warm-up took `slowest` seconds: --repeat, or
 * about 0.3 s worth (3 to 1000). */
static int repetitions(const struct bench *b, double slowest)
{
    if (b->repeat > 0)
        return b->repeat;
    int reps = slowest > 0 ? (int)(0.3 / slowest) : 1000;
    return reps < 3 ? 3 : reps > 1000 ? 1000 : reps;
}

/* Seconds per call of each of the k algorithms on buf: the median of the
 * per-call slowest-rank times, after a warm-up call each.  The repetitions
 * go round the algorithms (1, 2, ..., k, 1, 2, ...) so that a machine whose
 * speed drifts slows them all alike and their ratios stay meaningful.
 * Returns 0, or -1 after an error. */
static int time_algos(struct bench *b, const struct dl_allreduce_algo *const *a, int k, float *buf, size_t n,
                      double *out, struct dl_error *err)
{
    double slowest = 0;
    for (int j = 0; j < k; j++) {
        double once = time_once(b, a[j], buf, n, err);
        if (once < 0)
            return -1;
        slowest = once > slowest ? once : slowest;
    }
    int reps = repetitions(b, slowest);
    double *t = malloc((size_t)reps * (size_t)k * sizeof *t);
    if (!t)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory"), -1;
    for (int i = 0; i < reps; i++)
        for (int j = 0; j < k; j++)
            if ((t[(size_t)j * reps + i] = time_once(b, a[j], buf, n, err)) < 0) {
                free(t);
                return -1;
            }
    for (int j = 0; j < k; j++) {
        sort_doubles(t + (size_t)j * reps, reps);
        out[j] = t[(size_t)j * reps + reps / 2];
    }
    free(t);
    return 0;
}

static void print_header(const struct bench *b)
{
    if (b->csv)
        printf("floats,bytes,algorithm,time_us,algbw_GBps,busbw_GBps,model_us,model_err_pct,"
               "vs_native\n");
    else
        printf("%11s %11s %-19s %11s %8s %8s %11s %7s %7s\n", "floats", "bytes", "algorithm",
               "time_us", "algbw", "busbw", "model_us", "err%", "/native");
}

static void print_row(const struct bench *b, size_t n, const char *name, double t,
                      double model, double t_native)
{
    int p = b->c->size;
    double bytes = (double)n * dl_dtype_size(DL_F32);
    double algbw = t > 0 ? bytes / t / 1e9 : 0;
    double busbw = algbw * (p > 1 ? 2.0 * (p - 1) / p : 0);
    double err = model > 0 && t > 0 ? 100.0 * (model - t) / t : NAN;
    double ratio = t_native > 0 && t > 0 ? t_native / t : NAN;
    if (b->csv)
        printf("%zu,%.0f,%s,%.2f,%.4f,%.4f,%.2f,%.1f,%.3f\n", n, bytes, name, t * 1e6, algbw,
               busbw, model * 1e6, err, ratio);
    else
        printf("%11zu %11.0f %-19s %11.1f %8.3f %8.3f %11.1f %7.1f %7.3f\n", n, bytes, name,
               t * 1e6, algbw, busbw, model * 1e6, err, ratio);
}

static int run_algorithms(struct bench *b, float *buf, size_t n, struct dl_error *err)
{
    const struct dl_allreduce_algo *native = dl_allreduce_find("native");
    const struct dl_allreduce_algo *a[MAX_ITEMS];
    double t[MAX_ITEMS], t_native = -1;
    for (int i = 0; i < b->nalgos; i++)
        a[i] = dl_allreduce_find(b->algos[i]);
    memset(buf, 0, n * sizeof *buf);
    if (time_algos(b, a, b->nalgos, buf, n, t, err))
        return -1;
    for (int i = 0; i < b->nalgos; i++)
        if (a[i] == native)
            t_native = t[i];
    for (int i = 0; i < b->nalgos; i++) {
        const struct dl_allreduce_algo *m = a[i]->cost ? a[i] : NULL;
        char name[64];
        snprintf(name, sizeof name, "%s", a[i]->name);
        if (strcmp(a[i]->name, "auto") == 0) {
            m = dl_allreduce_choose(b->c, n, &b->opts);
            snprintf(name, sizeof name, "auto:%s", m->name);
        }
        double model = m ? m->cost(&b->cost, b->c->size, (double)n * sizeof *buf, &b->opts) : 0;
        if (b->c->rank == 0)
            print_row(b, n, name, t[i], model, t_native);
    }
    return 0;
}

/* Gaussian gradients, different on every rank, for the codec rows. */
static void fill_gradient(float *g, size_t n, int rank)
{
    struct dl_rng r;
    dl_rng_seed(&r, 1000 + (uint64_t)rank);
    for (size_t i = 0; i < n; i++)
        g[i] = (float)dl_rng_normal(&r);
}

static int run_codecs(struct bench *b, float *buf, size_t n, struct dl_error *err)
{
    struct dl_comm *c = b->c;
    float *exact = malloc((n + 1) * sizeof *exact);
    if (!exact)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory"), -1;
    fill_gradient(exact, n, c->rank);
    int rc = c->ops->allreduce(c, exact, DL_F32, n, err);
    for (int k = 0; k < b->ncodecs && rc == DL_OK; k++) {
        struct dl_codec_spec spec;
        struct dl_codec_state *st = NULL;
        struct dl_codec_stats stats = {0};
        rc = dl_codec_parse(b->codecs[k], &spec, err);
        if (rc == DL_OK)
            rc = dl_codec_state_create(&spec, n, 77 + (uint64_t)c->rank, &st, err);
        /* one step from a zero residual: the error of a single exchange */
        fill_gradient(buf, n, c->rank);
        c->ops->barrier(c, NULL);
        double t0 = dl_clock_now();
        if (rc == DL_OK)
            rc = dl_compressed_allreduce(c, st, buf, n, &stats, err);
        double t = max_over_ranks(c, dl_clock_now() - t0);
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++) {
            num += (buf[i] - exact[i]) * (double)(buf[i] - exact[i]);
            den += (double)exact[i] * exact[i];
        }
        /* The time: the median of warm steps (the first one also touched the
         * codec's buffers for the first time), on fresh gradients with the
         * error feedback the steps before left. */
        int reps = b->repeat > 0 ? b->repeat : 3;
        double *tw = malloc((size_t)reps * sizeof *tw);
        if (!tw && rc == DL_OK)
            rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
        for (int i = 0; i < reps && rc == DL_OK; i++) {
            fill_gradient(buf, n, c->rank);
            c->ops->barrier(c, NULL);
            t0 = dl_clock_now();
            struct dl_codec_stats warm = {0};
            rc = dl_compressed_allreduce(c, st, buf, n, &warm, err);
            tw[i] = max_over_ranks(c, dl_clock_now() - t0);
        }
        sort_doubles(tw, reps);
        if (rc == DL_OK)
            t = tw[reps / 2];
        free(tw);
        if (rc == DL_OK && c->rank == 0) {
            double ratio = stats.bytes_sent ? (double)stats.dense_bytes / stats.bytes_sent : 0;
            const char *fmt = b->csv ? "%zu,%s,%.1f,%zu,%zu,%.1f,%.4g,%d\n"
                                     : "%11zu %-19s %11.1f %13zu %13zu %8.1f %10.4g %5d\n";
            printf(fmt, n, spec.text, t * 1e6, stats.bytes_sent, stats.dense_bytes, ratio,
                   den > 0 ? sqrt(num / den) : 0.0, stats.went_dense);
        }
        dl_codec_state_free(st);
    }
    free(exact);
    return rc == DL_OK ? 0 : -1;
}

/* One gossip mixing step (post, wait, combine) of n floats over topology t
 * on every rank: the slowest rank's seconds, or < 0 after an error. */
static double time_mixing(struct bench *b, struct dl_gossip_exchange *x, long step, float *buf, struct dl_error *err)
{
    struct dl_comm *c = b->c;
    memcpy(x->own, buf, x->n * sizeof *buf);
    c->ops->barrier(c, NULL);
    double t0 = dl_clock_now();
    if (dl_gossip_exchange_start(x, step, err) || dl_gossip_exchange_wait(x, err))
        return -1;
    dl_gossip_exchange_combine(x, 0, x->n, buf, 0);
    return max_over_ranks(c, dl_clock_now() - t0);
}

/* A row per gossip topology: the median mixing step, the bytes a rank sends
 * (the most of any step of the topology) and what a ring allreduce of the
 * same vector sends per rank. */
static int run_topologies(struct bench *b, float *buf, size_t n, struct dl_error *err)
{
    int rc = 0;
    for (int k = 0; k < b->ntopologies && !rc; k++) {
        struct dl_gossip_exchange x;
        enum dl_topology t = (enum dl_topology)b->topologies[k];
        if (dl_gossip_exchange_init(&x, b->c, t, n, err))
            return -1;
        fill_gradient(buf, n, b->c->rank);
        double once = time_mixing(b, &x, 0, buf, err);
        int reps = once < 0 ? 0 : repetitions(b, once);
        double *tw = reps ? malloc((size_t)reps * sizeof *tw) : NULL;
        if (once < 0 || !tw)
            rc = once < 0 ? -1 : (dl_errorf(err, DL_ERR_NOMEM, "out of memory"), -1);
        for (int i = 0; i < reps && !rc; i++) /* round the steps of a time-varying topology */
            if ((tw[i] = time_mixing(b, &x, i, buf, err)) < 0)
                rc = -1;
        if (!rc && b->c->rank == 0) {
            sort_doubles(tw, reps);
            size_t bytes = sizeof *buf * n * (size_t)x.max_peers, ring = dl_allreduce_ring_bytes(b->c->size, n);
            char name[40];
            snprintf(name, sizeof name, "gossip:%s", dl_topology_names[t]);
            const char *fmt = b->csv ? "%zu,%s,%d,%.1f,%zu,%zu,%.2f\n" : "%11zu %-19s %6d %11.1f %13zu %13zu %8.2f\n";
            printf(fmt, n, name, x.max_peers, tw[reps / 2] * 1e6, bytes, ring, ring ? (double)bytes / ring : 0.0);
        }
        free(tw);
        dl_gossip_exchange_free(&x);
    }
    return rc;
}

/* The backend's all-to-all of n floats in p equal parts (the last ones
 * one float short where p does not divide n): the median over repetitions
 * of the slowest rank's time, the bytes a rank sends the others, and the
 * alpha-beta model's (p - 1)(alpha + part beta). */
static int run_alltoall(struct bench *b, float *buf, size_t n, struct dl_error *err)
{
    struct dl_comm *c = b->c;
    int p = c->size, rc = DL_OK;
    size_t *v = calloc(2 * (size_t)p, sizeof *v), *count = v, *displ = v + p, at = 0;
    float *out = malloc((n + 1) * sizeof *out);
    if (!v || !out)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    for (int q = 0; !rc && q < p; q++) {
        count[q] = sizeof *buf * (n / (size_t)p + ((size_t)q < n % (size_t)p));
        displ[q] = at, at += count[q];
    }
    fill_gradient(buf, n, c->rank);
    double once = 0;
    for (int i = 0; !rc && i < 2; i++) { /* a warm call, then one to size the repetitions */
        c->ops->barrier(c, NULL);
        double t0 = dl_clock_now();
        rc = c->ops->alltoallv(c, buf, count, displ, out, count, displ, err);
        once = max_over_ranks(c, dl_clock_now() - t0);
    }
    int reps = rc ? 0 : repetitions(b, once);
    double *t = reps ? malloc((size_t)reps * sizeof *t) : NULL;
    if (!rc && !t)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < reps; i++) {
        c->ops->barrier(c, NULL);
        double t0 = dl_clock_now();
        rc = c->ops->alltoallv(c, buf, count, displ, out, count, displ, err);
        t[i] = max_over_ranks(c, dl_clock_now() - t0);
    }
    if (!rc && c->rank == 0) {
        sort_doubles(t, reps);
        size_t sent = at - count[0], part = count[p > 1 ? 1 : 0];
        double model = (p - 1) * (b->cost.alpha + (double)part * b->cost.beta);
        const char *fmt = b->csv ? "%zu,%s,%.1f,%zu,%.3f,%.1f\n" : "%11zu %-19s %11.1f %13zu %10.3f %11.1f\n";
        printf(fmt, n, "alltoall", t[reps / 2] * 1e6, sent, sent / t[reps / 2] * 1e-9, model * 1e6);
    }
    free(t), free(v), free(out);
    return rc ? -1 : 0;
}

/* The command line: the bench's settings, and what opens the network. */
struct bench_command {
    struct bench b;
    const char *comm;                /* --comm (default auto) */
    const char *suite;               /* --suite deepbench */
    int remeasure;                   /* --remeasure */
    char algos_text[1024];           /* --algorithms, split in place: b.algos point into it */
    char codecs_text[1024];          /* --compress, likewise b.codecs */
};

/* Prints "PROG: --OPT VAL: WANT" and the help hint; returns 2 (a handler's
 * refusal with its message printed). */
static int bad(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "%s: --%s %s: %s\nTry '%s --help'.\n", PROG, opt, val, want, PROG);
    return 2;
}

static int take_emulation(void *settings, const char *value, struct dl_error *err)
{
    struct bench *b = &((struct bench_command *)settings)->b;
    int rc = dl_comm_emulation_parse("--comm-emulate", value, &b->emulation, err);
    b->emulate = !rc;
    return rc;
}

static int take_sizes(void *settings, const char *value, struct dl_error *err)
{
    struct bench *b = &((struct bench_command *)settings)->b;
    static char text[4096];
    snprintf(text, sizeof text, "%s", value);
    char *items[MAX_SIZES];
    int n = split_list(text, items, MAX_SIZES);
    if (n <= 0)
        return bad("sizes", value, "expected a comma-separated list of at most 64 sizes");
    for (b->nsizes = 0; b->nsizes < n; b->nsizes++) {
        int rc = parse_size(items[b->nsizes], &b->sizes[b->nsizes], err);
        if (rc)
            return rc;
    }
    return DL_OK;
}

static int take_suite(void *settings, const char *value, struct dl_error *err)
{
    (void)err;
    if (strcmp(value, "deepbench") != 0)
        return bad("suite", value, "the only suite is deepbench");
    ((struct bench_command *)settings)->suite = value;
    return DL_OK;
}

static int take_algorithms(void *settings, const char *value, struct dl_error *err)
{
    (void)err;
    struct bench_command *cmd = settings;
    struct bench *b = &cmd->b;
    snprintf(cmd->algos_text, sizeof cmd->algos_text, "%s", value);
    b->nalgos = split_list(cmd->algos_text, (char **)b->algos, MAX_ITEMS);
    if (b->nalgos <= 0)
        return bad("algorithms", value, "expected a comma-separated list");
    for (int i = 0; i < b->nalgos; i++)
        if (!dl_allreduce_find(b->algos[i]))
            return bad("algorithms", b->algos[i],
                       "unknown (ring, recursive_doubling, rabenseifner, tree, ps, native, auto)");
    return DL_OK;
}

/* A codec refused is said without the help hint. */
static int take_codecs(void *settings, const char *value, struct dl_error *err)
{
    struct bench_command *cmd = settings;
    struct bench *b = &cmd->b;
    snprintf(cmd->codecs_text, sizeof cmd->codecs_text, "%s", value);
    b->ncodecs = split_list(cmd->codecs_text, b->codecs, MAX_ITEMS);
    struct dl_codec_spec spec;
    for (int i = 0; i < b->ncodecs; i++)
        if (dl_codec_parse(b->codecs[i], &spec, err) != DL_OK) {
            fprintf(stderr, "%s: %s\n", PROG, err->msg);
            err->msg[0] = 0;
            return 2;
        }
    return DL_OK;
}

/* --gossip all, none, or a list of topologies. */
static int take_topologies(void *settings, const char *value, struct dl_error *err)
{
    struct bench *b = &((struct bench_command *)settings)->b;
    static char text[256];
    char *names[DL_TOPO_COUNT + 1];
    snprintf(text, sizeof text, "%s", value);
    int k = split_list(text, names, DL_TOPO_COUNT + 1);
    if (k == 1 && strcmp(names[0], "none") == 0) {
        b->ntopologies = 0;
        return DL_OK;
    }
    if (k == 1 && strcmp(names[0], "all") == 0)
        return DL_OK;
    if (k <= 0 || k > DL_TOPO_COUNT)
        return bad("gossip", value, "expected all, none or a list of ring, exp, one-peer-exp, complete");
    for (int i = 0; i < k; i++) {
        enum dl_topology t;
        int rc = dl_topology_parse("--gossip", names[i], &t, err);
        if (rc)
            return rc;
        b->topologies[i] = (int)t;
    }
    b->ntopologies = k;
    return DL_OK;
}

static void help(void)
{
    usage(stdout);
}

static const struct dl_option options[] = {
    DL_OPTION_STRING("comm", struct bench_command, comm),
    DL_OPTION_CALL("sizes", required_argument, take_sizes),
    DL_OPTION_CALL("comm-emulate", required_argument, take_emulation),
    DL_OPTION_CALL("suite", required_argument, take_suite),
    DL_OPTION_CALL("algorithms", required_argument, take_algorithms),
    DL_OPTION_CALL("compress", required_argument, take_codecs),
    DL_OPTION_CALL("gossip", required_argument, take_topologies),
    DL_OPTION_INT("repeat", struct bench_command, b.repeat, 1, 1000000),
    DL_OPTION_INT("ps-servers", struct bench_command, b.opts.ps_servers, 1, 1 << 20),
    DL_OPTION_BYTES("segment", struct bench_command, b.opts.segment_bytes, sizeof(float), (size_t)1 << 40),
    DL_OPTION_FLAG("remeasure", struct bench_command, remeasure, 1),
    DL_OPTION_FLAG("csv", struct bench_command, b.csv, 1),
    DL_OPTION_FLAG("alltoall", struct bench_command, b.alltoall, 1),
    DL_OPTION_HELP,
    DL_OPTION_VERSION,
    DL_OPTION_END};

/* The sizes (--sizes, else DeepBench's) and algorithms (default: all but auto) to time. */
static int fill_defaults(struct bench_command *cmd)
{
    struct bench *b = &cmd->b;
    if (b->nsizes == 0 || cmd->suite) {
        b->nsizes = 0;
        if (load_deepbench(b) != 0)
            return 1;
    }
    if (b->nalgos == 0) {
        static const char *all[] = {"native", "ring", "recursive_doubling", "rabenseifner", "tree", "ps"};
        b->nalgos = 6;
        memcpy(b->algos, all, sizeof all);
    }
    return -1;
}

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(struct bench_command *cmd, int argc, char **argv)
{
    struct bench *b = &cmd->b;
    cmd->comm = "auto";
    for (int t = 0; t < DL_TOPO_COUNT; t++)
        b->topologies[t] = t;
    b->ntopologies = DL_TOPO_COUNT;
    struct dl_command_line line = {PROG, options, cmd, NULL, help, .version = 1, .try_after_bad_value = 1};
    int first, status = dl_options_parse(&line, argc, argv, &first);
    if (status >= 0)
        return status;
    if (first < argc)
        return bad("", argv[first], "unexpected argument");
    return fill_defaults(cmd);
}

/* Rank 0's opening lines: the backend, the cost model (cached or measured,
 * and the emulated network's part in it) and the allreduce table's header. */
static void print_setup(const struct bench *b, int cached)
{
    const struct dl_cost_params *m = &b->cost;
    int p = b->c->size;
    printf("# backend %s, %d ranks, thread level %d; cost model%s: alpha %.3g us, 1/beta %.3g GB/s (all "
           "ranks; %.3g GB/s at 1 MiB, %.3g at 64 MiB), %.3g GB/s (one pair), %.3g GB/s (one way, half the ranks "
           "receiving), 1/gamma %.3g GB/s (all ranks; %.3g GB/s at 1 MiB, %.3g at 64 MiB), %.3g GB/s (one)\n",
           b->c->ops->name, p, b->c->thread_level, cached ? " (cached)" : " (measured)", m->alpha * 1e6,
           1e-9 / m->beta, 1e-9 / dl_cost_beta(m, p, p, 1 << 20), 1e-9 / dl_cost_beta(m, p, p, 64u << 20),
           1e-9 / dl_cost_beta(m, 2, p, 16u << 20), m->beta_oneway > 0 ? 1e-9 / m->beta_oneway : 1e-9 / m->beta,
           1e-9 / m->gamma, 1e-9 / dl_cost_gamma(m, p, p, 1 << 20), 1e-9 / dl_cost_gamma(m, p, p, 64u << 20),
           1e-9 / dl_cost_gamma(m, 1, p, 16u << 20));
    if (b->emulate) {
        char what[96];
        printf("# emulated network (--comm-emulate): %s, included in the model column\n",
               dl_comm_emulation_str(&b->emulation, what, sizeof what));
    }
    print_header(b);
}

static void print_codec_header(const struct bench *b)
{
    if (b->csv)
        puts("floats,codec,time_us,bytes_sent,fp32_ring_bytes,reduction,rel_error,went_dense");
    else
        printf("%11s %-19s %11s %13s %13s %8s %10s %5s\n", "floats", "codec", "time_us", "bytes_sent", "fp32_ring",
               "x_less", "rel_err", "dense");
}

static void print_topology_header(const struct bench *b)
{
    if (b->csv)
        puts("floats,topology,neighbours,time_us,bytes_sent,fp32_ring_bytes,vs_ring");
    else
        printf("%11s %-19s %6s %11s %13s %13s %8s\n", "floats", "topology", "peers", "time_us", "bytes_sent",
               "fp32_ring", "x_ring");
}

/* The three tables, each size in turn: allreduce algorithms, codecs,
 * gossip topologies (none on one rank).  0, or 1 with err set. */
static int run_tables(struct bench *b, float *buf, struct dl_error *err)
{
    for (int i = 0; i < b->nsizes; i++)
        if (run_algorithms(b, buf, b->sizes[i], err) != 0)
            return 1;
    if (b->ncodecs && b->c->rank == 0)
        print_codec_header(b);
    for (int i = 0; i < b->nsizes && b->ncodecs; i++)
        if (run_codecs(b, buf, b->sizes[i], err) != 0)
            return 1;
    if (b->c->size < 2)
        b->ntopologies = 0; /* one rank has no neighbours */
    if (b->ntopologies && b->c->rank == 0)
        print_topology_header(b);
    for (int i = 0; i < b->nsizes && b->ntopologies; i++)
        if (run_topologies(b, buf, b->sizes[i], err) != 0)
            return 1;
    if (b->alltoall && b->c->rank == 0)
        printf(b->csv ? "%s,%s,%s,%s,%s,%s\n" : "%11s %-19s %11s %13s %10s %11s\n", "floats", "collective", "time_us",
               "bytes_sent", "GB/s", "model_us");
    for (int i = 0; i < b->nsizes && b->alltoall; i++)
        if (run_alltoall(b, buf, b->sizes[i], err) != 0)
            return 1;
    return 0;
}

/* The cost model (measured on the real network, or its cache), then the
 * emulated network over it; the buffer of the largest size; the tables. */
static int run_bench(struct bench *b, int remeasure, struct dl_error *err)
{
    int cached = 0;
    if (dl_cost_load_or_measure(b->c, remeasure, &b->cost, &cached, err) != DL_OK)
        return 1;
    if (b->emulate) {
        if (dl_comm_emulate(&b->c, &b->emulation, err) != DL_OK)
            return 1;
        dl_comm_emulation_cost(&b->emulation, &b->cost);
    }
    b->opts.cost = &b->cost;
    size_t maxn = 0;
    for (int i = 0; i < b->nsizes; i++)
        maxn = b->sizes[i] > maxn ? b->sizes[i] : maxn;
    float *buf = malloc((maxn + 1) * sizeof *buf);
    if (!buf)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for %zu floats", maxn), 1;
    if (b->c->rank == 0)
        print_setup(b, cached);
    int status = run_tables(b, buf, err);
    free(buf);
    return status;
}

int dl_cli_bench_comm(int argc, char **argv)
{
    struct bench_command cmd = {0};
    int status = parse_args(&cmd, argc, argv);
    if (status >= 0)
        return status;
    struct bench *b = &cmd.b;
    struct dl_error err = {0};
    if (dl_comm_open(cmd.comm, &argc, &argv, &b->c, &err) != DL_OK) {
        fprintf(stderr, "%s: %s%s\n", PROG, err.code == DL_ERR_SPEC ? "--comm: " : "", err.msg);
        return err.code == DL_ERR_SPEC ? 2 : 1;
    }
    if (run_bench(b, cmd.remeasure, &err) != 0) {
        fprintf(stderr, "%s: rank %d: %s\n", PROG, b->c->rank, err.msg);
        b->c->ops->abort(b->c, 1);
        dl_comm_close(b->c);
        return 1;
    }
    dl_comm_close(b->c);
    return 0;
}
