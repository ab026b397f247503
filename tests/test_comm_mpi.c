/* test_comm_mpi.c: run under mpirun by test_comm_mpi.sh.  Every allreduce
 * algorithm must give the exact sum (integer-valued floats) for awkward sizes
 * on this rank count; also split, non-blocking test/wait, the native
 * collectives, and the compressed allreduce: exact codecs exact, the lossy
 * ones' error feedback on both sides checked as an invariant over steps;
 * the step metrics' sum over the ranks (dl_comm_sum_small); every grid's
 * group communicators; bf16 sums by every algorithm and the native
 * reduce-scatter equal to the f32 sum rounded once; the all-to-all of uneven
 * and empty parts (each rank's bytes where its offsets put them) on the
 * world, a split group and the emulated link; a mixture of experts' rows
 * to their experts' ranks and back.  Rank 0 prints one TAP line per check without
 * numbers ("ok - ..."); the shell script numbers them.
 * Usage: test_comm_mpi [--big] (adds a 64 MiB vector). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/allreduce.h"
#include "comm/codec.h"
#include "comm/comm.h"
#include "backends/moe_rows.h"
#include "comm/emulate.h"
#include "parallel/grid.h"
#include "parallel/strategy.h"
#include "mpi_report.h"

static struct dl_comm *world;

/* Value of element i on rank r: small integers, so every sum is exact. */
static float value(size_t i, int r)
{
    return (float)((long)((i * 7 + (size_t)r * 13) % 61) - 30);
}

static void report(int ok, const char *what, const char *detail)
{
    mpi_report(world, ok, what, detail);
}

/* The all-to-all's parts: rank r sends rank q part(r, q) bytes, byte i of
 * which is tagged by r, q and i; a rank's parts are laid out with one byte
 * of gap between them (so offsets count), some empty. */
static size_t part(int r, int q)
{
    return (size_t)((r * 3 + q * 5) % 4) * 3;
}

static unsigned char part_byte(int r, int q, size_t i)
{
    return (unsigned char)(r * 31 + q * 7 + (int)i + 1);
}

/* c's all-to-all against the parts' formula (the plain reference); 1 when
 * every byte is where it belongs and the gaps untouched. */
static int alltoallv_right(struct dl_comm *c, char *detail, size_t dlen)
{
    int p = c->size, r = c->rank, ok = 1;
    size_t *v = calloc(4 * (size_t)p, sizeof *v), *sc = v, *sd = v + p, *rc = v + 2 * p, *rd = v + 3 * p, sn = 0, rn = 0;
    for (int q = 0; q < p; q++) {
        sc[q] = part(r, q), sd[q] = sn, sn += sc[q] + 1;
        rc[q] = part(q, r), rd[q] = rn, rn += rc[q] + 1;
    }
    unsigned char *send = malloc(sn + 1), *recv = malloc(rn + 1);
    memset(send, 0xee, sn + 1);
    memset(recv, 0xee, rn + 1);
    for (int q = 0; q < p; q++)
        for (size_t i = 0; i < sc[q]; i++)
            send[sd[q] + i] = part_byte(r, q, i);
    struct dl_error err = {0};
    if (c->ops->alltoallv(c, send, sc, sd, recv, rc, rd, &err) != DL_OK) {
        snprintf(detail, dlen, "%s", err.msg);
        ok = 0;
    }
    for (int q = 0; ok && q < p; q++) {
        for (size_t i = 0; ok && i < rc[q]; i++)
            ok = recv[rd[q] + i] == part_byte(q, r, i);
        ok = ok && recv[rd[q] + rc[q]] == 0xee;
        if (!ok)
            snprintf(detail, dlen, "rank %d: the part from rank %d is wrong", r, q);
    }
    free(send), free(recv), free(v);
    return ok;
}

static void check_alltoallv(void)
{
    char detail[256] = "";
    int ok = alltoallv_right(world, detail, sizeof detail);
    report(ok, "alltoallv of uneven and empty parts", detail);
    struct dl_comm *half = NULL;
    struct dl_error err = {0};
    int rc = world->ops->split(world, world->rank % 2, world->rank, &half, &err);
    ok = rc == DL_OK && alltoallv_right(half, detail, sizeof detail);
    report(ok, "alltoallv on a split group", rc ? err.msg : detail);
    dl_comm_close(half);
    struct dl_comm_emulation e;
    struct dl_comm *slow = NULL;
    rc = world->ops->split(world, 0, world->rank, &slow, &err);
    if (!rc)
        rc = dl_comm_emulation_parse("--comm-emulate", "alpha=1us,bw=10GB/s", &e, &err);
    if (!rc)
        rc = dl_comm_emulate(&slow, &e, &err);
    ok = rc == DL_OK && alltoallv_right(slow, detail, sizeof detail);
    report(ok, "alltoallv through the emulated link", rc ? err.msg : detail);
    dl_comm_close(slow);
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
        int rc = dl_allreduce(c, algo, buf, DL_F32, n, o, &err);
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
        ok = dl_allreduce(half, "ring", &v, DL_F32, 1, NULL, &err) == DL_OK;
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
    rc = world->ops->reduce_scatter(world, send, recv, DL_F32, count, &err);
    int ok = rc == DL_OK;
    for (size_t i = 0; ok && i < count; i++) {
        float want = 0;
        for (int q = 0; q < p; q++)
            want += (float)((size_t)r * count + i + (size_t)q);
        ok = recv[i] == want;
    }
    report(ok, "native reduce_scatter", err.msg);
    /* reduce: every rank's send summed into the last rank's, the others' left as they were */
    rc = world->ops->reduce(world, send, DL_F32, (size_t)p * count, p - 1, &err);
    ok = rc == DL_OK;
    for (size_t i = 0; ok && i < (size_t)p * count; i++) {
        float want = (float)(i + (size_t)r);
        for (int q = 0; r == p - 1 && q < p - 1; q++)
            want += (float)(i + (size_t)q);
        ok = send[i] == want;
    }
    report(ok, "native reduce to the last rank, in place", err.msg);
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

/* A bf16 value of element i on rank r: k 2^-e with |k| <= 255 (8
 * significant bits, so bf16 holds it) and e in 4..7.  On up to 8 ranks
 * every partial sum is a multiple of 2^-7 below 2^7, exact in f32 in any
 * order, so the f32 sum rounded once to bf16 is one value, while sums
 * rounded to bf16 at each addition differ from it on three ranks or more. */
static float bf16_value(size_t i, int r)
{
    long k = (long)((i * 37 + (size_t)r * 101) % 511) - 255;
    return ldexpf((float)k, -(int)(4 + (i + (size_t)r) % 4));
}

static float bf16_sum_rounded_once(size_t i, int p)
{
    float sum = 0;
    for (int r = 0; r < p; r++)
        sum += bf16_value(i, r);
    return dl_bf16_to_f32(dl_f32_to_bf16(sum));
}

/* n bf16 values through dl_allreduce's algo; 1 when each equals the f32 sum rounded once. */
static int check_bf16_size(const char *algo, size_t n, char *detail, size_t dlen)
{
    dl_bf16 *buf = malloc((n + 1) * sizeof *buf);
    if (!buf) {
        snprintf(detail, dlen, "out of memory at n=%zu", n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = dl_f32_to_bf16(bf16_value(i, world->rank));
    buf[n] = 0x1234; /* guard */
    struct dl_error err = {0};
    int ok = dl_allreduce(world, algo, buf, DL_BF16, n, NULL, &err) == DL_OK;
    if (!ok)
        snprintf(detail, dlen, "n=%zu: %s", n, err.msg);
    for (size_t i = 0; ok && i < n; i++) {
        float got = dl_bf16_to_f32(buf[i]), want = bf16_sum_rounded_once(i, world->size);
        if (got != want) {
            snprintf(detail, dlen, "n=%zu: element %zu is %g, the f32 sum rounded once is %g", n, i, (double)got,
                     (double)want);
            ok = 0;
        }
    }
    if (ok && buf[n] != 0x1234) {
        snprintf(detail, dlen, "n=%zu: wrote past the end", n);
        ok = 0;
    }
    free(buf);
    return ok;
}

static void check_bf16_sums(void)
{
    int p = world->size;
    size_t sizes[] = {0, 1, 7, (size_t)p * 5 + 1, 1003, 100003};
    const char *algos[] = {"ring", "recursive_doubling", "rabenseifner", "tree", "ps", "native", "auto"};
    char detail[1200] = "", what[96];
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++) {
        int ok = 1;
        for (size_t k = 0; ok && k < sizeof sizes / sizeof *sizes; k++)
            ok = check_bf16_size(algos[a], sizes[k], detail, sizeof detail);
        snprintf(what, sizeof what, "%s bf16 sums = the f32 sum rounded once, sizes 0..100003", algos[a]);
        report(ok, what, detail);
    }
    /* The values do tell the two apart: rounding at each addition, in rank
     * order, misses the f32 sum rounded once somewhere on 3 ranks or more. */
    if (p >= 3) {
        long differ = 0;
        for (size_t i = 0; i < 1003; i++) {
            float stepwise = 0;
            for (int r = 0; r < p; r++)
                stepwise = dl_bf16_to_f32(dl_f32_to_bf16(stepwise + bf16_value(i, r)));
            differ += stepwise != bf16_sum_rounded_once(i, p);
        }
        snprintf(detail, sizeof detail, "%ld of 1003 sums differ", differ);
        report(differ > 0, "bf16 sums rounded at each addition differ from rounded once", detail);
    }
    /* bf16 on the wire: the same sums, half a ring's bytes of f32 (up to the last block's padding) */
    int ok_wire = 1;
    size_t wire_n[] = {0, 1, 7, (size_t)p * 5 + 1, 1003, 100003}, sent = 0;
    for (size_t k = 0; ok_wire && k < sizeof wire_n / sizeof *wire_n; k++) {
        size_t n = wire_n[k];
        dl_bf16 *b = malloc((n + 1) * sizeof *b);
        for (size_t i = 0; i < n; i++)
            b[i] = dl_f32_to_bf16(bf16_value(i, world->rank));
        struct dl_error e2 = {0};
        ok_wire = dl_allreduce_bf16_wire(world, b, n, &sent, &e2) == DL_OK;
        for (size_t i = 0; ok_wire && i < n; i++)
            if (dl_bf16_to_f32(b[i]) != bf16_sum_rounded_once(i, p)) {
                snprintf(detail, sizeof detail, "n=%zu: element %zu is %g, the f32 sum rounded once is %g", n, i,
                         (double)dl_bf16_to_f32(b[i]), (double)bf16_sum_rounded_once(i, p));
                ok_wire = 0;
            }
        size_t ring = dl_allreduce_ring_bytes(p, n);
        if (ok_wire && (2 * sent > ring + 8 * (size_t)p || (p > 1 && n > 0 && sent == 0))) {
            snprintf(detail, sizeof detail, "n=%zu: %zu bytes sent, the f32 ring sends %zu", n, sent, ring);
            ok_wire = 0;
        }
        free(b);
    }
    report(ok_wire, "bf16 on the wire: the f32 sum rounded once, half the f32 ring's bytes", detail);
    /* The native reduce-scatter of bf16 blocks, and a dtype no sum takes. */
    size_t count = 5;
    dl_bf16 *send = malloc((size_t)p * count * sizeof *send), recv[5];
    for (size_t i = 0; i < (size_t)p * count; i++)
        send[i] = dl_f32_to_bf16(bf16_value(i, world->rank));
    struct dl_error err = {0};
    int ok = world->ops->reduce_scatter(world, send, recv, DL_BF16, count, &err) == DL_OK;
    for (size_t i = 0; ok && i < count; i++)
        ok = dl_bf16_to_f32(recv[i]) == bf16_sum_rounded_once((size_t)world->rank * count + i, p);
    report(ok, "native reduce_scatter of bf16 = the f32 sums rounded once", err.msg);
    int32_t ids[2] = {1, 2};
    ok = dl_allreduce(world, "ring", ids, DL_I32, 2, NULL, &err) == DL_ERR_INTERNAL &&
         world->ops->allreduce(world, ids, DL_I32, 2, &err) == DL_ERR_INTERNAL;
    report(ok && strstr(err.msg, "i32"), "a sum of i32 values is refused by name", err.msg);
    free(send);
}

/* Compressed allreduce where the codec loses nothing (none, top-k keeping
 * every element): the exact sum of integer-valued floats. */
static void check_exact_codecs(void)
{
    const char *specs[] = {"none", "topk:1"};
    size_t n = 1003;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        struct dl_error err = {0};
        struct dl_codec_spec spec;
        struct dl_codec_state *st = NULL;
        int rc = dl_codec_parse(specs[k], &spec, &err);
        if (rc == DL_OK)
            rc = dl_codec_state_create(&spec, n, 1234 + (uint64_t)world->rank, &st, &err);
        float *buf = malloc(n * sizeof *buf);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(i, world->rank);
        if (rc == DL_OK)
            rc = dl_compressed_allreduce(world, st, buf, n, NULL, &err);
        for (size_t i = 0; rc == DL_OK && i < n; i++) {
            float want = 0;
            for (int r = 0; r < world->size; r++)
                want += value(i, r);
            wrong += buf[i] != want;
        }
        char what[96], detail[1200];
        snprintf(what, sizeof what, "compressed allreduce %s is the exact sum", specs[k]);
        snprintf(detail, sizeof detail, "%s", rc == DL_OK ? "elements differ from the sum" : err.msg);
        if (rc == DL_OK && wrong)
            snprintf(detail, sizeof detail, "%zu of %zu elements differ from the sum", wrong, n);
        report(rc == DL_OK && wrong == 0, what, detail);
        free(buf);
        dl_codec_state_free(st);
    }
}

/* Input of rank r at step t, element i: uniform in [-scale/2, scale/2) with
 * a scale that changes every 100 elements (1, 0.01, 30), as a bucket that
 * spans layers has, plus a bias per element, so that every codec rounds and
 * its error feedback has something to carry. */
static float grad_value(size_t i, int r, int t)
{
    uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(r + 1) * 0xBF58476D1CE4E5B9ULL ^
                 (uint64_t)(t + 1) * 0x94D049BB133111EBULL;
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    static const double scales[3] = {1.0, 0.01, 30.0};
    double scale = scales[i / 100 % 3];
    return (float)(scale * ((double)(h >> 11) * 0x1p-53 - 0.5 + 0.2 * sin((double)i)));
}

static double max_abs(const float *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

/* What one encoding of x (n floats) may leave in its residual at element i,
 * by the codec's own rules: QSGD rounds to one of the two levels around
 * each value, so at most a level, norm/levels, with the norm the largest
 * magnitude of its bucket (here of x); 1-bit puts back the mean of the
 * element's sign group within a half octave (2^(1/4) = 1.19, with a bfloat16
 * reference), or zero, so at most 1.2 times the largest magnitude; top-k
 * sends an element or leaves it whole.  A negative return: the residual
 * must equal x[i] or 0 exactly. */
static double residual_bound(const struct dl_codec_spec *s, double xmax)
{
    if (s->ops == &dl_codec_qsgd)
        return xmax / (double)((1 << (s->bits - 1)) - 1) * (1 + 1e-6);
    if (s->ops == &dl_codec_1bit)
        return 1.2 * xmax;
    return -1;
}

static int residual_within(const struct dl_codec_spec *s, const float *res, const float *x, size_t n,
                           double *worst)
{
    double bound = residual_bound(s, max_abs(x, n));
    for (size_t i = 0; i < n; i++) {
        if (bound < 0 ? res[i] != 0 && res[i] != x[i] : fabs(res[i]) > bound)
            return 0;
        if (bound > 0 && fabs(res[i]) / bound > *worst)
            *worst = fabs(res[i]) / bound;
    }
    return 1;
}

/* Error feedback on both sides of a dense codec (each rank's own residual
 * and the residual of the summed block it encodes again), and top-k's own
 * residual, over several steps on every rank: compression only delays.
 * After every step, the sum of the outputs so far plus every rank's
 * residuals equals the sum of every rank's inputs so far, within float
 * rounding; every rank gets the same output; and after the first step each
 * residual is within what one encoding may lose. */
static void check_codec_feedback(const char *text)
{
    enum { T = 6 };
    const size_t n = 3001;
    int p = world->size, me = world->rank;
    struct dl_error err = {0};
    struct dl_codec_spec spec;
    struct dl_codec_state *st = NULL;
    int rc = dl_codec_parse(text, &spec, &err);
    if (rc == DL_OK)
        rc = dl_codec_state_create(&spec, n, 99 + (uint64_t)me, &st, &err);
    float *buf = malloc(n * sizeof *buf), *mine = malloc(2 * n * sizeof *mine);
    float *all = malloc((size_t)p * 2 * n * sizeof *all), *outs = malloc((size_t)p * n * sizeof *outs);
    double *owed = calloc(n, sizeof *owed), *paid = calloc(n, sizeof *paid), *scale = calloc(n, sizeof *scale);
    double worst_sum = 0, worst_res = 0;
    int same = 1, bounded = 1;
    for (int t = 0; t < T && rc == DL_OK; t++) {
        for (size_t i = 0; i < n; i++) {
            buf[i] = grad_value(i, me, t);
            for (int r = 0; r < p; r++) {
                owed[i] += grad_value(i, r, t);
                scale[i] += fabs(grad_value(i, r, t));
            }
        }
        if (t == 0)
            memcpy(mine + n, buf, n * sizeof *buf); /* this rank's first input, for the bounds below */
        rc = dl_compressed_allreduce(world, st, buf, n, NULL, &err);
        if (rc != DL_OK)
            break;
        for (size_t i = 0; i < n; i++) {
            paid[i] += buf[i];
            scale[i] += fabs(buf[i]);
        }
        /* every rank holds the same output */
        rc = world->ops->allgather(world, buf, outs, n * sizeof *buf, &err);
        for (int r = 0; rc == DL_OK && r < p; r++)
            same = same && memcmp(outs + (size_t)r * n, buf, n * sizeof *buf) == 0;
        if (t == 0 && rc == DL_OK) {
            /* this rank's residual against its input, and the residual of
             * its block against what was encoded there (output + residual) */
            size_t lo = spec.ops->sparse ? 0 : dl_block_lo(n, p, me), hi = spec.ops->sparse ? 0 : dl_block_lo(n, p, me + 1);
            const float *srv = dl_codec_server_residual(st);
            float *y = mine;
            for (size_t i = lo; i < hi; i++)
                y[i - lo] = buf[i] + srv[i];
            bounded = residual_within(&spec, dl_codec_residual(st), mine + n, n, &worst_res) &&
                      (spec.ops->sparse ? max_abs(srv, n) == 0
                                        : residual_within(&spec, srv + lo, y, hi - lo, &worst_res));
        }
        /* the sum of every rank's two residuals */
        memcpy(mine, dl_codec_residual(st), n * sizeof *mine);
        memcpy(mine + n, dl_codec_server_residual(st), n * sizeof *mine);
        if (rc == DL_OK)
            rc = world->ops->allgather(world, mine, all, 2 * n * sizeof *mine, &err);
        for (size_t i = 0; rc == DL_OK && i < n; i++) {
            double held = 0;
            for (int r = 0; r < p; r++) {
                const float *res = all + (size_t)r * 2 * n;
                held += (double)res[i] + res[n + i];
                scale[i] += fabs(res[i]) + fabs(res[n + i]);
            }
            /* float rounding: a few roundings per step of values no larger
             * than the inputs, outputs and residuals involved */
            double d = fabs(paid[i] + held - owed[i]) / (scale[i] + 1e-30);
            worst_sum = d > worst_sum ? d : worst_sum;
        }
    }
    char what[200], detail[1200];
    snprintf(detail, sizeof detail, "%s", err.msg);
    int ok = rc == DL_OK;
    if (ok && !same)
        snprintf(detail, sizeof detail, "the ranks got different outputs");
    else if (ok && !bounded)
        snprintf(detail, sizeof detail, "a residual exceeds what one encoding may lose");
    else if (ok && !(worst_sum <= 1e-6))
        snprintf(detail, sizeof detail, "outputs + residuals differ from the inputs by %.3g of their magnitude",
                 worst_sum);
    ok = ok && same && bounded && worst_sum <= 1e-6;
    snprintf(what, sizeof what, "%s over %d steps: outputs + residuals = inputs (within %.2g), same output on "
             "every rank, first residuals within the codec's bound (%.2f of it)", text, T, worst_sum, worst_res);
    report(ok, what, detail);
    free(buf), free(mine), free(all), free(outs), free(owed), free(paid), free(scale);
    dl_codec_state_free(st);
}

static void check_codecs(void)
{
    check_exact_codecs();
    const char *lossy[] = {"1bit", "qsgd:4", "qsgd:2", "topk:0.1", "topk:0.01"};
    for (size_t k = 0; k < sizeof lossy / sizeof *lossy; k++)
        check_codec_feedback(lossy[k]);
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

/* 1 when group c (of grid g) holds exactly the world ranks whose
 * coordinates match this rank's except on axis (0 t, 1 d, 2 p), in the
 * order of that coordinate. */
static int group_is(struct dl_comm *c, const struct dl_grid *g, int axis, char *detail, size_t dlen)
{
    int n = axis == 0 ? g->dims.tp : axis == 1 ? g->dims.dp : g->dims.pp;
    int *members = malloc(sizeof *members * (size_t)n), me = world->rank, ok = c && c->size == n;
    struct dl_error err = {0};
    if (ok && c->ops->allgather(c, &me, members, sizeof me, &err) != DL_OK)
        ok = 0;
    for (int i = 0; ok && i < n; i++) {
        struct dl_grid_pos q = g->pos;
        *(axis == 0 ? &q.t : axis == 1 ? &q.d : &q.p) = i;
        ok = members[i] == dl_grid_rank(&g->dims, q);
    }
    if (!ok)
        snprintf(detail, dlen, "axis %d of rank %d", axis, me);
    free(members);
    return ok;
}

/* 1 when g's expert group holds the ranks of this rank's t, p and d / ep
 * in the order of d % ep, and its expert replicas those of its t, p and
 * d % ep in the order of d / ep. */
static int expert_groups_are(const struct dl_grid *g, char *detail, size_t dlen)
{
    int ep = g->dims.ep, R = g->dims.dp / ep, me = world->rank, ok = g->experts && g->expert_replicas &&
                                                               g->experts->size == ep && g->expert_replicas->size == R;
    int *a = malloc(sizeof *a * (size_t)(ep + R)), *b = a + ep;
    struct dl_error err = {0};
    ok = ok && g->experts->ops->allgather(g->experts, &me, a, sizeof me, &err) == DL_OK &&
         g->expert_replicas->ops->allgather(g->expert_replicas, &me, b, sizeof me, &err) == DL_OK;
    struct dl_grid_pos q = g->pos;
    for (int i = 0; ok && i < ep; i++)
        ok = a[i] == dl_grid_rank(&g->dims, (struct dl_grid_pos){q.t, q.d - q.d % ep + i, q.p});
    for (int i = 0; ok && i < R; i++)
        ok = b[i] == dl_grid_rank(&g->dims, (struct dl_grid_pos){q.t, q.d % ep + i * ep, q.p});
    if (!ok)
        snprintf(detail, dlen, "the expert groups of rank %d", me);
    free(a);
    return ok;
}

/* Every grid of this world size: each rank's tensor, data and pipeline
 * groups hold the ranks the layout formula says, in coordinate order; with
 * expert ranks, its expert group and expert replicas too. */
static void check_grids(void)
{
    int P = world->size;
    for (int tp = 1; tp <= P; tp++)
        for (int pp = 1; tp * pp <= P; pp++) {
            if (P % (tp * pp))
                continue;
            for (int ep = 1; ep <= P / (tp * pp); ep++) {
                if (P / (tp * pp) % ep || (ep > 1 && ep != P / (tp * pp) && ep != 2))
                    continue; /* experts: 2 ranks, and all the data ranks */
                struct dl_grid_dims d = {P / (tp * pp), tp, pp, 0, ep > 1 ? ep : 0};
                struct dl_grid g;
                struct dl_error err = {0};
                char what[96], detail[128] = "", dims[64];
                snprintf(what, sizeof what, "grid %s: group members", dl_grid_str(&d, dims, sizeof dims));
                int ok = dl_grid_open(world, &d, &g, &err) == DL_OK;
                if (!ok)
                    snprintf(detail, sizeof detail, "%s", err.msg);
                ok = ok && group_is(g.tensor, &g, 0, detail, sizeof detail) &&
                     group_is(g.data, &g, 1, detail, sizeof detail) && group_is(g.pipeline, &g, 2, detail, sizeof detail);
                ok = ok && (ep == 1 ? !g.experts && !g.expert_replicas : expert_groups_are(&g, detail, sizeof detail));
                report(ok, what, detail);
                dl_grid_close(&g);
            }
        }
}

/* op.h's expert group over c (the executor's adapter, as a test's). */
static int group_alltoallv(void *ctx, const void *send, const size_t *sb, const size_t *sa, void *recv,
                           const size_t *rb, const size_t *ra, struct dl_error *err)
{
    struct dl_comm *c = ctx;
    return c->ops->alltoallv(c, send, sb, sa, recv, rb, ra, err);
}

/* Rows rank r sends expert e of E: uneven, none for some, and all of
 * rank 0's (many) for expert 1. */
static int moe_rows_of(int r, int e, int E)
{
    return r == 0 ? (e == 1 ? 9 : 0) : (r * 5 + e * 3) % 4 == 0 ? 0 : (r + e) % 3 + 1;
}

/* A row's W values: its sender, expert and index among the sender's rows for
 * that expert, then a spare. */
#define MOE_W 4

/* backends/moe_rows.h against its layout's definition: each rank's rows
 * (sorted by expert) reach the ranks of their experts, expert-major (an
 * expert's rows from rank 0, then 1, ...), empty parts and an expert that
 * takes all of one rank's rows included; sent back, marked by the expert's
 * rank, they land where they left. */
static void check_moe_rows(void)
{
    int R = world->size, r = world->rank, EL = 2, E = R * EL;
    struct dl_expert_group g = {R, r, group_alltoallv, world};
    int *offset = calloc((size_t)E + 1, sizeof *offset), *received = calloc((size_t)E, sizeof *received);
    for (int e = 0; e < E; e++)
        offset[e + 1] = offset[e] + moe_rows_of(r, e, E);
    long n_out = offset[E], ok = 1;
    float *rows = malloc(sizeof *rows * (size_t)(n_out * MOE_W + 1));
    for (int e = 0; e < E; e++)
        for (int i = 0; i < offset[e + 1] - offset[e]; i++) {
            float *row = rows + (long)(offset[e] + i) * MOE_W;
            row[0] = (float)r, row[1] = (float)e, row[2] = (float)i, row[3] = 0;
        }
    struct dl_error err = {0};
    /* every rank makes every collective call (a failed check must not leave the others waiting) */
    int sent = dl_moe_rows_count(&g, offset, E, received, &err) == DL_OK;
    for (int s = 0; sent && s < R; s++)
        for (int j = 0; j < EL; j++)
            ok = ok && received[s * EL + j] == moe_rows_of(s, r * EL + j, E);
    long n_in = sent ? dl_moe_rows_received(received, E) : 0;
    float *in = malloc(sizeof *in * (size_t)(n_in * MOE_W + 1)), *back = malloc(sizeof *back * (size_t)(n_out * MOE_W + 1));
    long first[3];
    sent = sent && dl_moe_rows_dispatch(&g, offset, received, E, rows, MOE_W, in, &err) == DL_OK;
    ok = ok && sent;
    if (ok)
        dl_moe_rows_first(received, R, EL, first);
    for (int j = 0, at = 0; ok && j < EL; j++) { /* expert-major: by expert, then sender, then index */
        ok = first[j] == at;
        for (int s = 0; ok && s < R; s++)
            for (int i = 0; ok && i < moe_rows_of(s, r * EL + j, E); i++, at++) {
                const float *row = in + (long)at * MOE_W;
                ok = row[0] == (float)s && row[1] == (float)(r * EL + j) && row[2] == (float)i;
            }
    }
    for (long i = 0; sent && i < n_in; i++)
        in[i * MOE_W + 3] = (float)(100 + r); /* the expert's rank's mark */
    sent = sent && dl_moe_rows_return(&g, offset, received, E, in, MOE_W, back, &err) == DL_OK;
    ok = ok && sent;
    for (long i = 0; ok && i < n_out; i++)
        ok = back[i * MOE_W] == rows[i * MOE_W] && back[i * MOE_W + 1] == rows[i * MOE_W + 1] &&
             back[i * MOE_W + 2] == rows[i * MOE_W + 2] && back[i * MOE_W + 3] == (float)(100 + (int)rows[i * MOE_W + 1] / EL);
    char what[96];
    snprintf(what, sizeof what, "a mixture of experts' rows to %d ranks' experts and back (uneven, empty, one expert "
             "taking all)", R);
    report((int)ok, what, err.msg);
    free(offset), free(received), free(rows), free(in), free(back);
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
    check_alltoallv();
    check_algorithms(big);
    check_bf16_sums();
    check_split();
    check_grids();
    check_moe_rows();
    check_codecs();
    check_step_metrics();
    if (world->size > 1)
        check_1bit_bytes();
    dl_comm_close(world);
    return 0;
}
