/* costmodel.c: alpha-beta-gamma cost formulas of the allreduce algorithms
 * (Thakur, Rabenseifner & Gropp 2005), the measurement of alpha, beta and
 * gamma on the running machine, and their cache file (one per host and rank
 * count, written through io/atomic_file.h). */
#include "comm/costmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/allreduce.h"
#include "core/folders.h"
#include "core/clock.h"
#include "io/atomic_file.h"

static double lg_floor(int p, int *p2)
{
    int q = 1, k = 0;
    while (q * 2 <= p)
        q *= 2, k++;
    if (p2)
        *p2 = q;
    return k;
}

/* Linear between (2, at_two) and (p, at_p) in the active ranks. */
static double by_active(double at_two, double at_p, int active, int p)
{
    if (at_two <= 0 || p <= 2 || active >= p)
        return at_p;
    if (active <= 2)
        return at_two;
    return at_two + (at_p - at_two) * (active - 2) / (p - 2);
}

#define SMALL_VECTOR (1u << 20) /* bytes: the calibration sizes of beta_small, beta and beta_large */
#define BASE_VECTOR (16u << 20)
#define LARGE_VECTOR (64u << 20)

/* How much slower than at 16 MiB a vector of `bytes` is handled, given the
 * per-byte rates at 1 MiB (small), 16 MiB (base) and 64 MiB (large): by
 * log(size) between the calibration sizes, constant past them; a rate not
 * measured (0) counts as the base one. */
static double scale_by_size(double small, double base, double large, double bytes)
{
    if (bytes <= BASE_VECTOR) {
        if (small <= 0)
            return 1;
        double f = bytes <= SMALL_VECTOR ? 0 : log(bytes / SMALL_VECTOR) / log((double)BASE_VECTOR / SMALL_VECTOR);
        return small / base + f * (1 - small / base);
    }
    if (large <= 0)
        return 1;
    double f = bytes >= LARGE_VECTOR ? 1 : log(bytes / BASE_VECTOR) / log((double)LARGE_VECTOR / BASE_VECTOR);
    return 1 + f * (large / base - 1);
}

static double size_factor(const struct dl_cost_params *cp, double bytes)
{
    return scale_by_size(cp->beta_small, cp->beta, cp->beta_large, bytes);
}

double dl_cost_beta(const struct dl_cost_params *cp, int active, int p, double bytes)
{
    return by_active(cp->beta_pair, cp->beta, active, p) * size_factor(cp, bytes);
}

double dl_cost_gamma(const struct dl_cost_params *cp, int active, int p, double bytes)
{
    double g = cp->gamma;
    if (cp->gamma_one > 0 && active < p)
        g = active <= 1 ? cp->gamma_one : cp->gamma_one + (cp->gamma - cp->gamma_one) * (active - 1) / (p - 1);
    return g * scale_by_size(cp->gamma_small, cp->gamma, cp->gamma_large, bytes);
}

/* Fix-up for p not a power of two: one whole vector in (and added), one out,
 * between the 2(p-p2) ranks that pair up. */
static double fixup(const struct dl_cost_params *cp, int p, int p2, double m)
{
    return p == p2 ? 0
                   : 2 * (cp->alpha + m * dl_cost_beta(cp, 2 * (p - p2), p, m)) +
                         m * dl_cost_gamma(cp, p - p2, p, m);
}

double dl_cost_ring(const struct dl_cost_params *cp, int p, double m,
                    const struct dl_allreduce_opts *opts)
{
    if (p <= 1)
        return 0;
    double f = (double)(p - 1) / p;
    return 2 * (p - 1) * cp->alpha + 2 * f * m * dl_cost_beta(cp, p, p, m) + f * m * dl_cost_gamma(cp, p, p, m);
}

double dl_cost_recursive_doubling(const struct dl_cost_params *cp, int p, double m,
                                  const struct dl_allreduce_opts *opts)
{
    int p2;
    double k = lg_floor(p, &p2);
    return k * (cp->alpha + m * dl_cost_beta(cp, p2, p, m) + m * dl_cost_gamma(cp, p2, p, m)) +
           fixup(cp, p, p2, m);
}

double dl_cost_rabenseifner(const struct dl_cost_params *cp, int p, double m,
                            const struct dl_allreduce_opts *opts)
{
    int p2;
    double k = lg_floor(p, &p2), f = (double)(p2 - 1) / p2;
    return 2 * k * cp->alpha + 2 * f * m * dl_cost_beta(cp, p2, p, m) + f * m * dl_cost_gamma(cp, p2, p, m) +
           fixup(cp, p, p2, m);
}

/* Step j of the binomial reduce (and of the broadcast) pairs rank r with
 * r + 2^j for r a multiple of 2^(j+1): fewer ranks work at each step, and
 * data moves one way (child to parent, parent to child), at beta_oneway when
 * it was measured.  The parent adds each segment while the next one arrives
 * (allreduce_tree.c), but over shared memory its own CPU also does the
 * copy, so a reduce step costs moving plus adding (with the slower of the
 * two, the tree was predicted 21-42% too fast at 16-64 MiB on 4 ranks). */
double dl_cost_tree(const struct dl_cost_params *cp, int p, double m,
                    const struct dl_allreduce_opts *opts)
{
    double t = 0;
    for (int d = 1; d < p; d *= 2) {
        int pairs = 0;
        for (int r = 0; r + d < p; r += 2 * d)
            pairs++;
        double beta = cp->beta_oneway > 0 ? cp->beta_oneway * size_factor(cp, m) : dl_cost_beta(cp, 2 * pairs, p, m);
        double move = m * beta, add = m * dl_cost_gamma(cp, pairs, p, m);
        t += 2 * cp->alpha + move + add + move;
    }
    return t;
}

/* The busiest server receives p-1 shards of m/K and sends p-1 back. */
double dl_cost_ps(const struct dl_cost_params *cp, int p, double m,
                  const struct dl_allreduce_opts *opts)
{
    if (p <= 1)
        return 0;
    int k = opts && opts->ps_servers > 0 && opts->ps_servers < p ? opts->ps_servers : p;
    double shard = m / k;
    int busy = k < p ? k : p; /* ranks adding at once */
    return 2 * (p - 1) * (cp->alpha + shard * dl_cost_beta(cp, p, p, m)) +
           (p - 1) * shard * dl_cost_gamma(cp, busy, p, m);
}

void dl_cost_defaults(struct dl_cost_params *cp)
{
    /* Open MPI over shared memory on a 2-core VM (see doc/comm.md). */
    cp->alpha = 5e-6;
    cp->beta = 1.0 / 1.5e9;
    cp->gamma = 1.0 / 4e9;
    cp->beta_pair = cp->beta_small = cp->gamma_one = cp->beta_oneway = cp->gamma_small = 0;
    cp->beta_large = cp->gamma_large = 0;
}

/* In the cache file's name: bumped when the measured quantities change
 * meaning (v2: gamma with the vectorized addition; v3: beta_oneway; v4:
 * gamma_small; v5: beta_large, gamma_large), so older files are left alone and
 * measured again. */
#define COST_CACHE_VERSION 5

/* Ranks whose times the calibration compares (beyond, each rank's own). */
#define DL_COST_MAX_RANKS 1024

/* *out = the largest of every rank's mine (its own when there are more
 * ranks than DL_COST_MAX_RANKS). */
static int slowest(struct dl_comm *c, double mine, double *out, struct dl_error *err)
{
    double all[DL_COST_MAX_RANKS];
    *out = mine;
    if (c->size > DL_COST_MAX_RANKS)
        return DL_OK;
    int rc = c->ops->allgather(c, &mine, all, sizeof mine, err);
    for (int r = 0; rc == DL_OK && r < c->size; r++)
        *out = all[r] > *out ? all[r] : *out;
    return rc;
}

/* Who exchanges with whom while beta is measured. */
enum pattern {
    PAIRS,    /* rank r with r^1, all at once (the odd one out of an odd count idles) */
    RING,     /* every rank sends to r+1 and receives from r-1 */
    ONE_PAIR, /* ranks 0 and 1 only; the others wait */
    ONE_WAY,  /* odd rank r sends to r-1, which only receives, all pairs at once */
};

/* Median time of `reps` exchanges of `bytes` in the pattern, synchronised by
 * barriers; a repetition takes as long as its slowest rank (as a collective
 * does: with more ranks than cores, ranks finish far apart).  The bytes
 * travel in segments of DL_ALLREDUCE_SEGMENT, as in the algorithms, so that
 * beta includes the per-segment protocol cost they pay. */
static int time_exchange(struct dl_comm *c, enum pattern pat, char *a, char *b, size_t bytes, int reps,
                         double *out, struct dl_error *err)
{
    enum { MAXSEG = 64 };
    double t[32];
    struct dl_comm_req req[2 * MAXSEG];
    size_t seg = DL_ALLREDUCE_SEGMENT, nseg = bytes ? (bytes + seg - 1) / seg : 1;
    int p = c->size, to = c->rank ^ 1, from = to, rc = DL_OK;
    if (pat == RING)
        to = (c->rank + 1) % p, from = (c->rank + p - 1) % p;
    int active = to < p && (pat != ONE_PAIR || c->rank < 2);
    int sends = active && (pat != ONE_WAY || c->rank % 2 == 1), recvs = active && (pat != ONE_WAY || c->rank % 2 == 0);
    if (nseg > MAXSEG)
        return dl_errorf(err, DL_ERR_INTERNAL, "cost model: %zu bytes is too many segments", bytes);
    if (reps > 32)
        reps = 32;
    for (int i = 0; i < reps && rc == DL_OK; i++) {
        rc = c->ops->barrier(c, err);
        double t0 = dl_clock_now();
        memset(req, 0, sizeof req);
        for (size_t j = 0; j < nseg && rc == DL_OK && active; j++) {
            size_t lo = j * seg, len = bytes - lo < seg ? bytes - lo : seg;
            if (recvs)
                rc = c->ops->irecv(c, b + lo, len, from, DL_TAG_COST_EXCHANGE, &req[j], err);
            if (rc == DL_OK && sends)
                rc = c->ops->isend(c, a + lo, len, to, DL_TAG_COST_EXCHANGE, &req[MAXSEG + j], err);
        }
        int rc2 = dl_comm_waitall(c, req, 2 * MAXSEG, err);
        rc = rc != DL_OK ? rc : rc2;
        rc = rc != DL_OK ? rc : slowest(c, dl_clock_now() - t0, &t[i], err);
    }
    *out = dl_median(t, reps);
    return rc;
}

/* Seconds per byte of an exchange of `bytes` that took t, latency t_small. */
static double per_byte(double t, double t_small, size_t bytes)
{
    return (t > t_small ? t - t_small : t) / (double)bytes;
}

int dl_cost_measure(struct dl_comm *c, struct dl_cost_params *out, struct dl_error *err)
{
    /* bytes: large enough to hide latency and to span several scheduler time
     * slices when ranks share cores, so that the median is steady */
    const size_t big = BASE_VECTOR, large = LARGE_VECTOR;
    dl_cost_defaults(out);
    if (c->size == 1)
        return DL_OK;
    float *a = dl_calloc(2 * large / sizeof *a, sizeof *a, err);
    if (!a)
        return DL_ERR_NOMEM;
    float *b = a + large / sizeof *a;
    for (size_t i = 0; i < large / sizeof *a; i++)
        a[i] = (float)(i % 7), b[i] = 1;
    double t_small = 0, t_ring = 0, t_pair = 0, t_ring1 = 0, t_oneway = 0, t_ring64 = 0;
    int rc = time_exchange(c, PAIRS, (char *)a, (char *)b, 8, 5, &t_small, err); /* warm-up */
    if (rc == DL_OK)
        rc = time_exchange(c, PAIRS, (char *)a, (char *)b, 8, 31, &t_small, err);
    if (rc == DL_OK)
        rc = time_exchange(c, RING, (char *)a, (char *)b, big, 15, &t_ring, err);
    if (rc == DL_OK)
        rc = time_exchange(c, ONE_PAIR, (char *)a, (char *)b, big, 15, &t_pair, err);
    if (rc == DL_OK)
        rc = time_exchange(c, RING, (char *)a, (char *)b, SMALL_VECTOR, 31, &t_ring1, err);
    if (rc == DL_OK)
        rc = time_exchange(c, ONE_WAY, (char *)a, (char *)b, big, 15, &t_oneway, err);
    if (rc == DL_OK)
        rc = time_exchange(c, RING, (char *)a, (char *)b, large, 9, &t_ring64, err);
    /* gamma: every rank adds at once, as inside a collective, and the slowest
     * one counts; gamma_one: rank 0 alone; gamma_small: every rank adds 1 MiB
     * vectors that stay in cache, as an allreduce of 1 MiB does;
     * gamma_large: 64 MiB vectors, from memory. */
    double tg[9], tg1[9], tgs[31], tgl[5];
    for (int i = 0; i < 5 && rc == DL_OK; i++) {
        rc = c->ops->barrier(c, err);
        double t0 = dl_clock_now();
        dl_reduce_add(a, b, large / sizeof *a);
        rc = rc != DL_OK ? rc : slowest(c, dl_clock_now() - t0, &tgl[i], err);
    }
    for (int i = 0; i < 31 && rc == DL_OK; i++) {
        rc = c->ops->barrier(c, err);
        double t0 = dl_clock_now();
        dl_reduce_add(a, b, SMALL_VECTOR / sizeof *a);
        rc = rc != DL_OK ? rc : slowest(c, dl_clock_now() - t0, &tgs[i], err);
    }
    for (int i = 0; i < 9 && rc == DL_OK; i++) {
        rc = c->ops->barrier(c, err);
        double t0 = dl_clock_now();
        dl_reduce_add(a, b, big / sizeof *a);
        rc = rc != DL_OK ? rc : slowest(c, dl_clock_now() - t0, &tg[i], err);
        if (rc == DL_OK)
            rc = c->ops->barrier(c, err);
        t0 = dl_clock_now();
        if (c->rank == 0)
            dl_reduce_add(a, b, big / sizeof *a);
        rc = rc != DL_OK ? rc : slowest(c, dl_clock_now() - t0, &tg1[i], err);
    }
    free(a);
    if (rc != DL_OK)
        return rc;
    double p[10] = {t_small, per_byte(t_ring, t_small, big), dl_median(tg, 9) / big, per_byte(t_pair, t_small, big),
                    per_byte(t_ring1, t_small, SMALL_VECTOR), dl_median(tg1, 9) / big,
                    per_byte(t_oneway, t_small, big), dl_median(tgs, 31) / SMALL_VECTOR,
                    per_byte(t_ring64, t_small, large), dl_median(tgl, 5) / large};
    rc = c->ops->bcast(c, p, sizeof p, 0, err);
    out->alpha = p[0];
    out->beta = p[1];
    out->gamma = p[2];
    out->beta_pair = p[3];
    out->beta_small = p[4];
    out->gamma_one = p[5];
    out->beta_oneway = p[6];
    out->gamma_small = p[7];
    out->beta_large = p[8];
    out->gamma_large = p[9];
    return rc;
}

int dl_cost_cache_path(const struct dl_comm *c, char *path, size_t len, struct dl_error *err)
{
    return dl_cost_cache_path_for(c->size, path, len, err);
}

int dl_cost_cache_path_for(int ranks, char *path, size_t len, struct dl_error *err)
{
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && *xdg)
        w = snprintf(path, len, "%s/dltrain/comm-v%d-%s-p%d.txt", xdg, COST_CACHE_VERSION, host, ranks);
    else if (home && *home)
        w = snprintf(path, len, "%s/.cache/dltrain/comm-v%d-%s-p%d.txt", home, COST_CACHE_VERSION, host, ranks);
    else
        return dl_errorf(err, DL_ERR_IO, "no cache folder: neither XDG_CACHE_HOME nor HOME is set");
    if (w < 0 || (size_t)w >= len)
        return dl_errorf(err, DL_ERR_IO, "cache path too long");
    return DL_OK;
}

static int read_cache(const char *path, struct dl_cost_params *cp)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int ok = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' &&
            sscanf(line, "%lg %lg %lg %lg %lg %lg %lg %lg %lg %lg", &cp->alpha, &cp->beta, &cp->gamma,
                   &cp->beta_pair, &cp->beta_small, &cp->gamma_one, &cp->beta_oneway, &cp->gamma_small,
                   &cp->beta_large, &cp->gamma_large) == 10)
            ok = cp->alpha >= 0 && cp->beta > 0 && cp->gamma > 0 && cp->beta_pair >= 0 && cp->beta_small >= 0 &&
                 cp->gamma_one >= 0 && cp->beta_oneway >= 0 && cp->gamma_small >= 0 && cp->beta_large >= 0 &&
                 cp->gamma_large >= 0;
    fclose(f);
    return ok;
}

int dl_cost_cached(int ranks, struct dl_cost_params *out)
{
    char path[1024];
    return dl_cost_cache_path_for(ranks, path, sizeof path, NULL) == DL_OK && read_cache(path, out);
}

static int write_cache(const char *path, const struct dl_cost_params *cp, struct dl_error *err)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "# dltrain comm cost model: alpha (s/message) beta (s/byte, all ranks, 16 MiB) gamma (s/byte, "
                     "all ranks) beta_pair (s/byte, one pair) beta_small (s/byte, all ranks, 1 MiB) gamma_one "
                     "(s/byte, one rank) beta_oneway (s/byte, half the ranks receiving) gamma_small (s/byte, all "
                     "ranks, 1 MiB) beta_large (s/byte, all ranks, 64 MiB) gamma_large (s/byte, all ranks, 64 MiB)\n"
                     "%.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n",
                     cp->alpha, cp->beta, cp->gamma, cp->beta_pair, cp->beta_small, cp->gamma_one, cp->beta_oneway,
                     cp->gamma_small, cp->beta_large, cp->gamma_large);
    dl_make_parents(path, NULL); /* a failure shows in the write below */
    return dl_atomic_write_file(path, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, err);
}

int dl_cost_load_or_measure(struct dl_comm *c, int remeasure, struct dl_cost_params *out,
                            int *cached, struct dl_error *err)
{
    char path[4096];
    double p[11] = {0}; /* found, then the parameters in the order of struct dl_cost_params */
    int have_path = c->rank == 0 && dl_cost_cache_path(c, path, sizeof path, NULL) == DL_OK;
    if (have_path && !remeasure && read_cache(path, out)) {
        p[0] = 1, p[1] = out->alpha, p[2] = out->beta, p[3] = out->gamma, p[4] = out->beta_pair;
        p[5] = out->beta_small, p[6] = out->gamma_one, p[7] = out->beta_oneway, p[8] = out->gamma_small;
        p[9] = out->beta_large, p[10] = out->gamma_large;
    }
    int rc = c->ops->bcast(c, p, sizeof p, 0, err);
    if (rc != DL_OK)
        return rc;
    if (cached)
        *cached = p[0] != 0;
    if (p[0] != 0) {
        out->alpha = p[1], out->beta = p[2], out->gamma = p[3], out->beta_pair = p[4];
        out->beta_small = p[5], out->gamma_one = p[6], out->beta_oneway = p[7], out->gamma_small = p[8];
        out->beta_large = p[9], out->gamma_large = p[10];
        return DL_OK;
    }
    rc = dl_cost_measure(c, out, err);
    /* A cache that cannot be written only costs a new measurement next time. */
    if (rc == DL_OK && have_path)
        write_cache(path, out, NULL);
    return rc;
}
