/* test_tune.c: the tuner's pieces on synthetic tables: the micro-batch DP
 * equals a brute force over every split for small batches (with and without
 * a workspace limit, every policy), never loses to the undivided candidate,
 * and respects the limit; Pareto filtering; the ILP equals a brute force and
 * is never worse than the per-layer DP given the DP plan's total workspace;
 * the SQLite database round-trips rows (the kernel's dtype in the key) and is
 * shared by processes, and a file of its first schema is carried over; keys
 * and measurements follow the kernel's device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/reference/reference.h"
#include "core/rng.h"
#include "spec/netfile.h"
#include "tune/tune_impl.h"

#define NK 3 /* kernels in the synthetic tables */

/* Random candidates for every kernel and policy size of B: time roughly
 * linear in mb with a per-call overhead and noise, workspace growing with mb
 * for some kernels. */
static int synth(struct dl_rng *r, enum dl_tune_policy p, int B, struct dl_tune_cand *c)
{
    int sizes[64], ns = dl_tune_policy_sizes(p, B, sizes), n = 0;
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < ns; i++) {
            if (dl_rng_below(r, 8) == 0)
                continue; /* a kernel that cannot run this size */
            double t = (0.2 + dl_rng_uniform(r)) * sizes[i] + 3 * dl_rng_uniform(r);
            size_t ws = (size_t)(k * sizes[i] * 100 + dl_rng_below(r, 50)) * 1024;
            c[n++] = (struct dl_tune_cand){k, sizes[i], t, ws};
        }
    return n;
}

/* Brute force: the best time over every split of b into candidate sizes. */
static double brute(const struct dl_tune_cand *c, int n, int b, int min_part, size_t limit)
{
    double best = INFINITY;
    for (int i = 0; i < n; i++) {
        if (c[i].ws > limit || c[i].mb > b || c[i].mb < min_part)
            continue;
        double rest = c[i].mb == b ? 0 : brute(c, n, b - c[i].mb, c[i].mb, limit);
        best = fmin(best, c[i].time_s + rest);
    }
    return best;
}

static void check_config(const struct dl_tune_cand *c, int n, int B, size_t limit, const struct dl_tune_config *cf)
{
    int samples = 0;
    double t = 0;
    size_t ws = 0;
    for (int p = 0; p < cf->n; p++) {
        const struct dl_tune_cand *best = NULL;
        for (int i = 0; i < n; i++)
            if (c[i].kernel == cf->part[p].kernel && c[i].mb == cf->part[p].mb)
                best = &c[i];
        assert_non_null(best);
        assert_true(best->ws <= limit);
        samples += cf->part[p].mb * cf->part[p].count;
        t += best->time_s * cf->part[p].count;
        ws = best->ws > ws ? best->ws : ws;
    }
    assert_int_equal(samples, B);
    assert_true(fabs(t - cf->time_s) <= 1e-9 * t);
    assert_true(ws == cf->ws);
}

static void dp_equals_brute_force(void **state)
{
    struct dl_rng r;
    dl_rng_seed(&r, 7);
    struct dl_tune_cand c[NK * 64];
    int checked = 0;
    for (int trial = 0; trial < 300; trial++) {
        enum dl_tune_policy p = (enum dl_tune_policy)(trial % 3);
        int B = 1 + (int)dl_rng_below(&r, 12);
        int n = synth(&r, p, B, c);
        size_t limit = trial % 2 ? SIZE_MAX : (size_t)dl_rng_below(&r, 1200) * 1024;
        struct dl_tune_config cf;
        double want = brute(c, n, B, 1, limit);
        int rc = dl_tune_dp(c, n, B, limit, &cf);
        if (!isfinite(want)) {
            assert_int_equal(rc, -1);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_true(fabs(cf.time_s - want) <= 1e-9 * want);
        check_config(c, n, B, limit, &cf);
        for (int i = 0; i < n; i++) /* never slower than any undivided candidate that fits */
            if (c[i].mb == B && c[i].ws <= limit)
                assert_true(cf.time_s <= c[i].time_s);
        checked++;
    }
    print_message("# %d random tables: DP = brute force\n", checked);
    assert_true(checked > 150);
}

static void dp_ties_and_limits(void **state)
{
    /* two halves cost exactly the whole with the same workspace: keep one call */
    struct dl_tune_cand c[] = {{0, 4, 2.0, 20}, {0, 8, 4.0, 20}};
    struct dl_tune_config cf;
    assert_int_equal(dl_tune_dp(c, 2, 8, SIZE_MAX, &cf), 0);
    assert_int_equal(cf.n, 1);
    assert_int_equal(cf.part[0].mb, 8);
    /* the same time with less workspace: the split */
    c[0].ws = 10;
    assert_int_equal(dl_tune_dp(c, 2, 8, SIZE_MAX, &cf), 0);
    assert_true(cf.n == 1 && cf.part[0].mb == 4 && cf.part[0].count == 2 && cf.ws == 10);
    /* a limit below the whole batch's workspace forces the split even when slower */
    c[0].time_s = 3.0;
    assert_int_equal(dl_tune_dp(c, 2, 8, SIZE_MAX, &cf), 0);
    assert_int_equal(cf.part[0].mb, 8);
    assert_int_equal(dl_tune_dp(c, 2, 8, 15, &cf), 0);
    assert_true(cf.n == 1 && cf.part[0].mb == 4 && cf.part[0].count == 2 && cf.time_s == 6.0);
    assert_int_equal(dl_tune_dp(c, 2, 8, 5, &cf), -1);
}

static void policy_sizes(void **state)
{
    int s[16];
    assert_int_equal(dl_tune_policy_sizes(DL_TUNE_UNDIVIDED, 12, s), 1);
    assert_int_equal(s[0], 12);
    assert_int_equal(dl_tune_policy_sizes(DL_TUNE_POWER_OF_TWO, 12, s), 5);
    int want[] = {1, 2, 4, 8, 12};
    assert_memory_equal(s, want, sizeof want);
    assert_int_equal(dl_tune_policy_sizes(DL_TUNE_POWER_OF_TWO, 8, s), 4);
    assert_int_equal(s[3], 8);
    assert_int_equal(dl_tune_policy_sizes(DL_TUNE_ALL, 5, s), 5);
}

static void pareto_filter(void **state)
{
    struct dl_tune_config c[6] = {0};
    double t[] = {5, 3, 4, 3, 1, 2};
    size_t w[] = {10, 20, 30, 20, 50, 60};
    for (int i = 0; i < 6; i++)
        c[i].time_s = t[i], c[i].ws = w[i];
    int n = dl_tune_pareto(c, 6);
    /* (10,5) (20,3) (50,1) survive; (30,4), the duplicate (20,3) and (60,2) do not */
    assert_int_equal(n, 3);
    assert_true(c[0].ws == 10 && c[0].time_s == 5);
    assert_true(c[1].ws == 20 && c[1].time_s == 3);
    assert_true(c[2].ws == 50 && c[2].time_s == 1);
}

/* Units for L layers with 1 or 2 groups and 1 to 3 directions, desirable
 * sets from random candidate tables (workspaces in KiB multiples). */
#define L 4
struct synth_net {
    int n;
    struct dl_tune_unit u[L * 6];
    struct dl_tune_config conf[L * 6][NK * 16];
    struct dl_tune_cand cand[L * 6][NK * 16];
    int n_cand[L * 6];
};

static void synth_net(struct dl_rng *r, int B, struct synth_net *s)
{
    s->n = 0;
    for (int layer = 0; layer < L; layer++) {
        int groups = 1 + (int)dl_rng_below(r, 2), dirs = 1 + (int)dl_rng_below(r, 3);
        for (int g = 0; g < groups; g++)
            for (int d = 0; d < dirs; d++) {
                int i = s->n++;
                s->n_cand[i] = synth(r, DL_TUNE_POWER_OF_TWO, B, s->cand[i]);
                int m = dl_tune_desirable(s->cand[i], s->n_cand[i], B, s->conf[i]);
                s->u[i] = (struct dl_tune_unit){layer, g, m, s->conf[i]};
            }
    }
}

/* Brute force over every group choice and configuration. */
static double ilp_brute(const struct synth_net *s, int i, size_t budget, const int *group_of_layer)
{
    if (i == s->n)
        return 0;
    const struct dl_tune_unit *u = &s->u[i];
    if (group_of_layer[u->layer] != u->group)
        return ilp_brute(s, i + 1, budget, group_of_layer);
    double best = INFINITY;
    for (int c = 0; c < u->n; c++) {
        size_t w = (u->c[c].ws + 1023) / 1024 * 1024;
        if (w <= budget)
            best = fmin(best, u->c[c].time_s + ilp_brute(s, i + 1, budget - w, group_of_layer));
    }
    return best;
}

static double ilp_brute_all(const struct synth_net *s, size_t total)
{
    int groups[L] = {0}, n_groups[L] = {0};
    for (int i = 0; i < s->n; i++)
        n_groups[s->u[i].layer] = s->u[i].group + 1;
    double best = INFINITY;
    for (int code = 0; code < 1 << L; code++) {
        int ok = 1;
        for (int l = 0; l < L; l++) {
            groups[l] = (code >> l) & 1;
            ok &= groups[l] < n_groups[l];
        }
        if (ok)
            best = fmin(best, ilp_brute(s, 0, total, groups));
    }
    return best;
}

static void ilp_equals_brute_force_and_beats_dp(void **state)
{
    struct dl_rng r;
    dl_rng_seed(&r, 11);
    static struct synth_net s;
    struct dl_error err = {0};
    int solved = 0;
    for (int trial = 0; trial < 40; trial++) {
        int B = 4 + (int)dl_rng_below(&r, 5);
        synth_net(&r, B, &s);
        /* the per-layer DP under a limit: each layer its best group, each unit its pick */
        size_t limit = (size_t)(200 + dl_rng_below(&r, 600)) * 1024, dp_ws = 0;
        double dp_time = 0;
        int feasible = 1;
        for (int layer = 0; layer < L; layer++) {
            double best = INFINITY;
            size_t best_ws = 0;
            for (int g = 0; g < 2; g++) {
                double t = 0;
                size_t ws = 0;
                int any = 0;
                for (int i = 0; i < s.n; i++) {
                    if (s.u[i].layer != layer || s.u[i].group != g)
                        continue;
                    struct dl_tune_config cf;
                    any = 1;
                    if (dl_tune_dp(s.cand[i], s.n_cand[i], B, limit, &cf)) {
                        t = INFINITY;
                        break;
                    }
                    t += cf.time_s;
                    ws += (cf.ws + 1023) / 1024 * 1024;
                }
                if (any && t < best)
                    best = t, best_ws = ws;
            }
            feasible &= isfinite(best);
            dp_time += best;
            dp_ws += best_ws;
        }
        int choice[L * 6];
        double t;
        double want = ilp_brute_all(&s, feasible ? dp_ws : limit * 3);
        int rc = dl_tune_ilp(s.u, s.n, feasible ? dp_ws : limit * 3, choice, &t, &err);
        if (!isfinite(want)) {
            assert_int_not_equal(rc, 0);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_true(fabs(t - want) <= 1e-6 * want);
        if (feasible) {
            assert_true(t <= dp_time * (1 + 1e-9));
            solved++;
        }
    }
    print_message("# %d random networks: ILP = brute force and <= DP under the DP's total workspace\n", solved);
    assert_true(solved >= 10);
}

/* A fresh path for a database file (nothing there yet). */
static void db_path(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
}

/* Removes a database file and SQLite's and the lock's files beside it. */
static void db_remove(const char *path)
{
    char aux[64];
    unlink(path);
    snprintf(aux, sizeof aux, "%s-wal", path), unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", path), unlink(aux);
    snprintf(aux, sizeof aux, "%s.lock", path), unlink(aux);
}

/* A file of the first schema (no dtype in the key) is carried over when
 * opened: each row under the dtype its kernel's name says, once. */
static void db_first_schema_carried_over(void **state)
{
    char path[] = "/tmp/dltrain-test-tune-XXXXXX";
    db_path(path);
    sqlite3 *old;
    assert_int_equal(sqlite3_open(path, &old), SQLITE_OK);
    assert_int_equal(sqlite3_exec(old,
                                  "CREATE TABLE measurement (op TEXT NOT NULL, direction INTEGER NOT NULL, mb INTEGER "
                                  "NOT NULL, kernel TEXT NOT NULL, versions TEXT NOT NULL, device TEXT NOT NULL, threads "
                                  "INTEGER NOT NULL, time_s REAL, workspace INTEGER NOT NULL, saved INTEGER NOT NULL, "
                                  "measured_at INTEGER NOT NULL, PRIMARY KEY (op, direction, mb, kernel, versions, "
                                  "device, threads));"
                                  "INSERT INTO measurement VALUES ('fc', 0, 8, 'onednn', 'v', 'cpu', 2, 0.5, 0, 0, 1);"
                                  "INSERT INTO measurement VALUES ('fc', 0, 8, 'onednn-bf16', 'v', 'cpu', 2, 0.25, 0, 0, 1);",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(old);
    struct dl_tune_db *db;
    struct dl_error err = {0};
    assert_int_equal(dl_tune_db_open(&db, path, &err), 0);
    struct dl_tune_key k = {.op = "fc", .kernel = "onednn", .dtype = "f32", .dir = 0, .mb = 8, .threads = 2,
                            .versions = "v", .device = "cpu"};
    struct dl_tune_row r = {0};
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
    assert_true(r.time_s == 0.5);
    k.kernel = "onednn-bf16";
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 0);
    k.dtype = "bf16";
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
    assert_true(r.time_s == 0.25);
    dl_tune_db_close(db);
    assert_int_equal(dl_tune_db_open(&db, path, &err), 0); /* again: nothing left to carry */
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
    dl_tune_db_close(db);
    assert_int_equal(sqlite3_open(path, &old), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(old, "SELECT count(*) FROM sqlite_master WHERE name='measurement'", -1, &s,
                                        NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 0);
    sqlite3_finalize(s);
    sqlite3_close(old);
    db_remove(path);
}

static void db_round_trip(void **state)
{
    char path[] = "/tmp/dltrain-test-tune-XXXXXX";
    db_path(path);
    struct dl_tune_db *db;
    struct dl_error err = {0};
    assert_int_equal(dl_tune_db_open(&db, path, &err), 0);
    struct dl_tune_key k = {.op = "conv,filters=8 in=1x4x4 out=8x4x4", .kernel = "onednn", .dtype = "f32", .dir = 1,
                            .mb = 4, .threads = 2, .versions = "v", .device = "cpu"};
    struct dl_tune_row r = {0}, in = {0.25, 4096, 64};
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 0);
    assert_int_equal(dl_tune_db_put(db, &k, &in, &err), 0);
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
    assert_true(r.time_s == 0.25 && r.ws == 4096 && r.saved == 64);
    k.dtype = "bf16"; /* the dtype is in the key */
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 0);
    k.dtype = "f32";
    k.threads = 1; /* any key field makes another row */
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 0);
    struct dl_tune_row untimed = {NAN, 1 << 30, 0};
    assert_int_equal(dl_tune_db_put(db, &k, &untimed, &err), 0);
    assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
    assert_true(isnan(r.time_s) && r.ws == 1 << 30);
    dl_tune_db_close(db);

    /* 6 processes write 200 rows each at once (transactions, the lock file) */
    for (int p = 0; p < 6; p++)
        if (fork() == 0) {
            struct dl_tune_db *d;
            struct dl_error e = {0};
            int bad = dl_tune_db_open(&d, path, &e) != 0;
            for (int i = 0; !bad && i < 200; i++) {
                struct dl_tune_key kk = k;
                kk.mb = 1000 * p + i;
                struct dl_tune_row rr = {i, (size_t)p, 0};
                bad |= dl_tune_db_lock(d, &e) || dl_tune_db_begin(d, &e) || dl_tune_db_put(d, &kk, &rr, &e) ||
                       dl_tune_db_commit(d, &e);
                dl_tune_db_unlock(d);
            }
            if (bad)
                fprintf(stderr, "# child %d: %s\n", p, e.msg);
            dl_tune_db_close(d);
            _exit(bad);
        }
    for (int p = 0; p < 6; p++) {
        int st;
        assert_true(wait(&st) > 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(dl_tune_db_open(&db, path, &err), 0);
    for (int p = 0; p < 6; p++)
        for (int i = 0; i < 200; i += 37) {
            k.mb = 1000 * p + i;
            assert_int_equal(dl_tune_db_get(db, &k, &r, &err), 1);
            assert_true(r.time_s == i && r.ws == (size_t)p);
        }
    dl_tune_db_close(db);
    db_remove(path);
}

/* A measurement's key names the kernel's device: the CPU model for a host
 * kernel, the device's own description (GPU name, cuDNN version) for a
 * device kernel, here the reference declared to run on CUDA; measuring that
 * kernel where this build has no CUDA is refused, and a host measurement
 * gives a finite non-negative time for every direction it runs. */
static void device_in_key_and_measurement(void **state)
{
    (void)state;
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("t.yaml", "input: {shape: [2, 6, 5], classes: 3}\nlayers:\n"
                                        "  - {type: conv, filters: 4, kernel: 3, pad: 1, name: t}\n"
                                        "  - {type: fc, units: 3}\nloss: softmax_cross_entropy\n",
                                        &net, &err), 0);
    const struct dl_layer *l = &net.graph.layers[0];
    struct dl_kernel on_cuda = dl_kernel_reference;
    on_cuda.device = DL_DEVICE_CUDA;
    struct dl_tune_key host, cuda;
    dl_tune_key_layer(&host, l, &dl_kernel_reference);
    dl_tune_key_layer(&cuda, l, &on_cuda);
    const struct dl_device *dev = dl_device_get(DL_DEVICE_CUDA);
    char want[256];
    snprintf(want, sizeof want, "cuda: %s", dev ? dev->describe() : "absent");
    print_message("# host kernel's device: '%s'; a CUDA kernel's: '%s'\n", host.device, cuda.device);
    assert_string_equal(cuda.device, want);
    assert_true(strncmp(host.device, "cuda", 4) != 0 && host.device[0]);
    assert_string_equal(host.op, cuda.op);

    int want_dirs[DL_N_DIRS] = {1, 1, 1};
    struct dl_tune_row row[DL_N_DIRS];
    assert_int_equal(dl_tune_measure(&dl_kernel_reference, l, 2, want_dirs, 1, 3, (size_t)1 << 30, row, &err), 0);
    for (int d = 0; d < DL_N_DIRS; d++)
        if (dl_kernel_runs(&dl_kernel_reference, (enum dl_dir)d, 1, 1))
            assert_true(isfinite(row[d].time_s) && row[d].time_s >= 0);
    if (!dev) {
        assert_int_equal(dl_tune_measure(&on_cuda, l, 2, want_dirs, 1, 3, (size_t)1 << 30, row, &err),
                         DL_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "cuda"));
    }
    dl_net_free(&net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dp_equals_brute_force),
        cmocka_unit_test(dp_ties_and_limits),
        cmocka_unit_test(policy_sizes),
        cmocka_unit_test(pareto_filter),
        cmocka_unit_test(ilp_equals_brute_force_and_beats_dp),
        cmocka_unit_test(db_round_trip),
        cmocka_unit_test(device_in_key_and_measurement),
        cmocka_unit_test(db_first_schema_carried_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
