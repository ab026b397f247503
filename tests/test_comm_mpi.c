/* test_comm_mpi.c: run under mpirun by test_comm_mpi.sh.  Every allreduce
 * algorithm must give the exact sum (integer-valued floats) for awkward sizes
 * on this rank count; also split, non-blocking test/wait, the native
 * collectives, the compressed allreduce, and the step metrics' sum over the
 * ranks (dl_comm_sum_small).  Rank 0 prints one TAP line per
 * check without numbers ("ok - ..."); the shell script numbers them.
 * Usage: test_comm_mpi [--big] (adds a 64 MiB vector). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "comm/codec.h"
#include "comm/comm.h"
#include "parallel/strategy.h"

static struct dl_comm *world;

/* Value of element i on rank r: small integers, so every sum is exact. */
static float value(size_t i, int r)
{
    return (float)((long)((i * 7 + (size_t)r * 13) % 61) - 30);
}

/* Agrees on one verdict: ok on every rank.  Prints on rank 0. */
static void report(int ok, const char *what, const char *detail)
{
    float bad = ok ? 0.0f : 1.0f;
    struct dl_error err;
    if (world->ops->allreduce(world, &bad, 1, &err) != DL_OK)
        bad = 1;
    if (world->rank == 0) {
        if (bad == 0)
            printf("ok - P=%d %s\n", world->size, what);
        else
            printf("not ok - P=%d %s%s%s (failed on %g ranks)\n", world->size, what,
                   ok ? "" : ": ", ok ? "" : detail, bad);
        fflush(stdout);
    }
}

/* Checks one algorithm on every size; returns 1 when all sums were exact. */
static int check_sizes(struct dl_comm *c, const char *algo, const struct dl_allreduce_opts *o,
                       const size_t *sizes, int nsizes, char *detail, size_t dlen)
{
    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        float *buf = malloc((n + 1) * sizeof *buf);
        if (!buf) {
            snprintf(detail, dlen, "out of memory at n=%zu", n);
            return 0;
        }
        for (size_t i = 0; i < n; i++)
            buf[i] = value(i, c->rank);
        buf[n] = 12345.0f; /* guard: nothing may write past n */
        struct dl_error err = {0};
        int rc = dl_allreduce(c, algo, buf, n, o, &err);
        if (rc != DL_OK) {
            snprintf(detail, dlen, "n=%zu: %s", n, err.msg);
            free(buf);
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < c->size; r++)
                want += value(i, r);
            if (buf[i] != want) {
                snprintf(detail, dlen, "n=%zu: element %zu is %g, expected %g", n, i,
                         (double)buf[i], (double)want);
                free(buf);
                return 0;
            }
        }
        if (buf[n] != 12345.0f) {
            snprintf(detail, dlen, "n=%zu: wrote past the end", n);
            free(buf);
            return 0;
        }
        free(buf);
    }
    return 1;
}

static void check_algorithms(int big)
{
    int p = world->size;
    size_t sizes[12] = {0, 1, 2, 7, 13, (size_t)p * 5 + 1, (size_t)p * 64 + 3, 1000003};
    int nsizes = 8;
    if (big)
        sizes[nsizes++] = 16u << 20; /* 64 MiB of floats */
    const char *algos[] = {"ring", "recursive_doubling", "rabenseifner", "tree", "ps",
                           "native", "auto"};
    char detail[1200], what[96];
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++) {
        int ok = check_sizes(world, algos[a], NULL, sizes, nsizes, detail, sizeof detail);
        snprintf(what, sizeof what, "%s exact sums, sizes 0..1000003%s", algos[a],
                 big ? " and 64 MiB" : "");
        report(ok, what, detail);
    }
    /* Small segments force many pipelined pieces; one and two PS servers. */
    struct dl_allreduce_opts o = {.segment_bytes = 12};
    int ok = check_sizes(world, "ring", &o, sizes, 7, detail, sizeof detail) &&
             check_sizes(world, "rabenseifner", &o, sizes, 7, detail, sizeof detail) &&
             check_sizes(world, "tree", &o, sizes, 7, detail, sizeof detail);
    report(ok, "ring, rabenseifner, tree with 3-float segments", detail);
    for (int k = 1; k <= 2; k++) {
        struct dl_allreduce_opts ps = {.ps_servers = k};
        ok = check_sizes(world, "ps", &ps, sizes, 8, detail, sizeof detail);
        snprintf(what, sizeof what, "ps with %d server rank%s", k, k > 1 ? "s" : "");
        report(ok, what, detail);
    }
}

/* Split into even and odd ranks (reversed order by key); ring on each half. */
static void check_split(void)
{
    struct dl_comm *half = NULL;
    struct dl_error err = {0};
    char detail[1200] = "";
    int rc = world->ops->split(world, world->rank % 2, -world->rank, &half, &err);
    int ok = rc == DL_OK && half;
    if (!ok)
        snprintf(detail, sizeof detail, "split: %s", err.msg);
    if (ok) {
        int want_size = (world->size + 1 - world->rank % 2) / 2;
        int want_rank = want_size - 1 - world->rank / 2;
        ok = half->size == want_size && half->rank == want_rank;
        if (!ok)
            snprintf(detail, sizeof detail, "rank %d: got %d of %d, expected %d of %d",
                     world->rank, half->rank, half->size, want_rank, want_size);
    }
    if (ok) {
        float v = 1.0f + (float)world->rank;
        ok = dl_allreduce(half, "ring", &v, 1, NULL, &err) == DL_OK;
        float want = 0;
        for (int r = world->rank % 2; r < world->size; r += 2)
            want += 1.0f + (float)r;
        ok = ok && v == want;
        if (!ok)
            snprintf(detail, sizeof detail, "sum on the half is %g, expected %g", (double)v,
                     (double)want);
    }
    dl_comm_close(half);
    report(ok, "split(rank % 2) sizes, ranks and ring sum", detail);
    struct dl_comm *none = world;
    rc = world->ops->split(world, world->rank == 0 ? -1 : 0, 0, &none, &err);
    ok = rc == DL_OK && (world->rank == 0 ? none == NULL : none && none->size == world->size - 1);
    dl_comm_close(none);
    report(ok, "split with a negative color leaves the rank out", "wrong membership");
}

/* isend/irecv around the ring, polled with test, then the native collectives. */
static void check_p2p_and_collectives(void)
{
    int p = world->size, r = world->rank;
    struct dl_error err = {0};
    int got = -1, mine = r * 10;
    struct dl_comm_req rq = {0}, sq = {0};
    int rc = world->ops->irecv(world, &got, sizeof got, (r + p - 1) % p, 5, &rq, &err);
    if (rc == DL_OK)
        rc = world->ops->isend(world, &mine, sizeof mine, (r + 1) % p, 5, &sq, &err);
    int done = 0;
    for (long spins = 0; rc == DL_OK && !done && spins < 100000000; spins++)
        rc = world->ops->test(world, &rq, &done, &err);
    if (rc == DL_OK)
        rc = world->ops->wait(world, &sq, &err);
    report(rc == DL_OK && done && got == ((r + p - 1) % p) * 10, "isend/irecv/test/wait ring",
           err.msg);

    size_t count = 5;
    float *send = malloc((size_t)p * count * sizeof *send), recv[5];
    int *all = malloc((size_t)p * sizeof *all);
    for (size_t i = 0; i < (size_t)p * count; i++)
        send[i] = (float)(i + (size_t)r);
    rc = world->ops->reduce_scatter(world, send, recv, count, &err);
    int ok = rc == DL_OK;
    for (size_t i = 0; ok && i < count; i++) {
        float want = 0;
        for (int q = 0; q < p; q++)
            want += (float)((size_t)r * count + i + (size_t)q);
        ok = recv[i] == want;
    }
    report(ok, "native reduce_scatter", err.msg);
    rc = world->ops->allgather(world, &mine, all, sizeof mine, &err);
    ok = rc == DL_OK;
    for (int q = 0; ok && q < p; q++)
        ok = all[q] == q * 10;
    report(ok, "native allgather", err.msg);
    int root_val = r == p - 1 ? 77 : 0;
    rc = world->ops->bcast(world, &root_val, sizeof root_val, p - 1, &err);
    rc = rc == DL_OK ? world->ops->barrier(world, &err) : rc;
    report(rc == DL_OK && root_val == 77, "native bcast from the last rank, barrier", err.msg);
    free(send);
    free(all);
}

/* Compressed allreduce: exact where the codec is exact, and close otherwise. */
static void check_codecs(void)
{
    const char *specs[] = {"none", "1bit", "qsgd:4", "topk:0.1", "topk:1"};
    size_t n = 1003;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        struct dl_error err = {0};
        struct dl_codec_spec spec;
        struct dl_codec_state *st = NULL;
        int rc = dl_codec_parse(specs[k], &spec, &err);
        if (rc == DL_OK)
            rc = dl_codec_state_create(&spec, n, 1234 + (uint64_t)world->rank, &st, &err);
        float *buf = malloc(n * sizeof *buf);
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(i, world->rank);
        struct dl_codec_stats stats = {0};
        if (rc == DL_OK)
            rc = dl_compressed_allreduce(world, st, buf, n, &stats, &err);
        for (size_t i = 0; rc == DL_OK && i < n; i++) {
            float want = 0;
            for (int r = 0; r < world->size; r++)
                want += value(i, r);
            num += (buf[i] - want) * (double)(buf[i] - want);
            den += (double)want * want;
        }
        /* Exact: none and top-k keeping everything.  Lossy: a loose bound on
         * the squared error, as one step of a lossy codec is only right on
         * average (the codec tests check the statistics). */
        int exact = strcmp(specs[k], "none") == 0 || strcmp(specs[k], "topk:1") == 0;
        double rel = den > 0 ? num / den : 0;
        int ok = rc == DL_OK && (exact ? num == 0 : rel < 1.0);
        char what[96], detail[1200];
        snprintf(what, sizeof what, "compressed allreduce %s (relative error %.3g)", specs[k],
                 rel);
        snprintf(detail, sizeof detail, "%s", rc == DL_OK ? "error too large" : err.msg);
        report(ok, what, detail);
        free(buf);
        dl_codec_state_free(st);
    }
}

/* 1-bit moves at most 1/25 of the bytes of the fp32 ring allreduce. */
static void check_1bit_bytes(void)
{
    size_t n = 1u << 20;
    struct dl_error err = {0};
    struct dl_codec_spec spec;
    struct dl_codec_state *st = NULL;
    struct dl_codec_stats stats = {0};
    float *buf = calloc(n, sizeof *buf);
    int rc = buf ? dl_codec_parse("1bit", &spec, &err) : DL_ERR_NOMEM;
    if (rc == DL_OK)
        rc = dl_codec_state_create(&spec, n, 7, &st, &err);
    for (size_t i = 0; rc == DL_OK && i < n; i++)
        buf[i] = value(i, world->rank);
    if (rc == DL_OK)
        rc = dl_compressed_allreduce(world, st, buf, n, &stats, &err);
    char what[160];
    snprintf(what, sizeof what, "1bit sends %zu bytes per rank, fp32 ring %zu (1/%.1f)",
             stats.bytes_sent, stats.dense_bytes,
             stats.bytes_sent ? (double)stats.dense_bytes / (double)stats.bytes_sent : 0.0);
    report(rc == DL_OK && stats.bytes_sent * 25 <= stats.dense_bytes, what, err.msg);
    dl_codec_state_free(st);
    free(buf);
}

/* The step metrics as the strategies sum them: packed, summed with
 * dl_comm_sum_small, unpacked.  A stop signal on the last rank and a
 * checkpoint due on rank 0 reach every rank; losses and counts add up; more
 * than DL_COMM_SMALL_SUM_MAX values are refused; one rank leaves the values
 * as they are (no rounding through float). */
static void check_step_metrics(void)
{
    int p = world->size, r = world->rank;
    struct dl_step_metrics m = {.loss_sum = 0.5 * (r + 1), .correct = 3 * r, .stop_requested = r == p - 1,
                                .checkpoint_due = r == 0};
    double v[DL_COMM_SMALL_SUM_MAX + 1];
    dl_step_metrics_pack(&m, v);
    struct dl_error err = {0};
    int rc = dl_comm_sum_small(world, v, DL_STEP_METRICS, &err);
    struct dl_step_metrics sum = {0};
    dl_step_metrics_unpack(v, &sum);
    char detail[256];
    snprintf(detail, sizeof detail, "rc %d (%s): loss %g correct %g stop %d checkpoint %d", rc, err.msg,
             sum.loss_sum, sum.correct, sum.stop_requested, sum.checkpoint_due);
    int ok = rc == DL_OK && sum.loss_sum == 0.25 * p * (p + 1) && sum.correct == 1.5 * p * (p - 1) &&
             sum.stop_requested && sum.checkpoint_due;
    m.stop_requested = 0; /* a checkpoint without a stop */
    dl_step_metrics_pack(&m, v);
    rc = dl_comm_sum_small(world, v, DL_STEP_METRICS, &err);
    dl_step_metrics_unpack(v, &sum);
    ok = ok && rc == DL_OK && !sum.stop_requested && sum.checkpoint_due;
    report(ok, "step metrics summed over the ranks (stop on the last rank, checkpoint on rank 0)", detail);
    for (int i = 0; i <= DL_COMM_SMALL_SUM_MAX; i++)
        v[i] = 0.1;
    rc = dl_comm_sum_small(world, v, DL_COMM_SMALL_SUM_MAX + 1, &err);
    report(rc == DL_ERR_INTERNAL && v[0] == 0.1, "dl_comm_sum_small refuses more values than it holds", err.msg);
    rc = dl_comm_sum_small(world, v, 1, &err);
    report(rc == DL_OK && (p > 1 || v[0] == 0.1), "dl_comm_sum_small on one rank leaves the value exact", err.msg);
}

int main(int argc, char **argv)
{
    struct dl_error err = {0};
    int big = argc > 1 && strcmp(argv[1], "--big") == 0;
    if (dl_comm_open("mpi", &argc, &argv, &world, &err) != DL_OK) {
        printf("not ok - open mpi: %s\n", err.msg);
        return 1;
    }
    check_p2p_and_collectives();
    check_algorithms(big);
    check_split();
    check_codecs();
    check_step_metrics();
    if (world->size > 1)
        check_1bit_bytes();
    dl_comm_close(world);
    return 0;
}
