/* tune_impl.h: the tuner's internal pieces, one file each: the dynamic
 * program over micro-batch splits (dp.c), Pareto filtering (pareto.c), the
 * workspace-division ILP on GLPK (ilp.c), the SQLite database (db.c), the
 * keys of measurements (key.c) and the timing of one kernel (measure.c).
 * dp.c, pareto.c and ilp.c work on plain tables, so tests feed them
 * synthetic numbers. */
#ifndef DL_TUNE_IMPL_H
#define DL_TUNE_IMPL_H

#include "tune/tune.h"

#define DL_TUNE_MAX_PARTS DL_MBPLAN_MAX_GROUPS

/* One measured candidate of a layer-direction: kernel (an index into the
 * caller's kernel list) on mb samples. */
struct dl_tune_cand {
    int kernel, mb;
    double time_s;
    size_t ws;
};

/* One way to run the whole batch: runs of count micro-batches of mb samples. */
struct dl_tune_config {
    double time_s;
    size_t ws;                     /* the largest part's workspace (parts share it) */
    int n;
    struct { int kernel, mb, count; } part[DL_TUNE_MAX_PARTS];
};

/* dp.c: T(b) = min(best single candidate of b samples, min over b' <= b/2 of
 * T(b') + T(b - b')) over candidates with ws <= limit (SIZE_MAX: none); the
 * best configuration for B samples into *out.  Returns 0, or -1 when no
 * split of B fits (no candidate within the limit). */
int dl_tune_dp(const struct dl_tune_cand *c, int n, int B, size_t limit, struct dl_tune_config *out);

/* dp.c: the desirable set: the DP under every distinct workspace of the
 * candidates, Pareto-filtered; out has room for n configurations.  Returns
 * their number, by increasing workspace. */
int dl_tune_desirable(const struct dl_tune_cand *c, int n, int B, struct dl_tune_config *out);

/* pareto.c: keeps the configurations that no other one beats on both time
 * and workspace (ties keep one), sorted by increasing workspace. */
int dl_tune_pareto(struct dl_tune_config *c, int n);

/* ilp.c: one choice per unit (a layer-direction) among its configurations,
 * one kernel group per layer: binary x[u][c], y[layer][group];
 * sum_g y = 1 per layer, sum_c x[u][c] = y[layer(u)][group(u)], sum ws x <=
 * total, minimise sum time x.  choice[u] = the chosen configuration, or -1
 * for units of groups not chosen. */
struct dl_tune_unit {
    int layer, group;
    int n;
    const struct dl_tune_config *c;
};
int dl_tune_ilp(const struct dl_tune_unit *u, int n_units, size_t total, int *choice, double *time_s,
                struct dl_error *err);

/* key.c: what identifies a measurement. */
struct dl_tune_key {
    char op[512];          /* op kind, attributes, input and output shapes */
    const char *kernel;
    const char *dtype;     /* the kernel's dtype (its tensors'): "f32", "bf16" */
    int dir, mb, threads;
    char versions[256];    /* dltrain and the kernel libraries found at run time */
    char device[128];      /* CPU model (or accelerator name) */
};
void dl_tune_key_layer(struct dl_tune_key *k, const struct dl_layer *l, const struct dl_kernel *kernel);

/* db.c: the persistent database (WAL, busy timeout, transactions; an
 * advisory lock file serialises measuring between processes). */
struct dl_tune_db;
struct dl_tune_row {
    double time_s;         /* < 0: the kernel cannot run it; NaN: not timed (workspace above the cap) */
    size_t ws, saved;
};
int dl_tune_db_open(struct dl_tune_db **db, const char *path, struct dl_error *err);
void dl_tune_db_close(struct dl_tune_db *db);
/* 1 found, 0 missing, < 0 error (in err). */
int dl_tune_db_get(struct dl_tune_db *db, const struct dl_tune_key *k, struct dl_tune_row *r, struct dl_error *err);
int dl_tune_db_put(struct dl_tune_db *db, const struct dl_tune_key *k, const struct dl_tune_row *r,
                   struct dl_error *err);
int dl_tune_db_begin(struct dl_tune_db *db, struct dl_error *err);
int dl_tune_db_commit(struct dl_tune_db *db, struct dl_error *err);
/* Exclusive advisory lock held while measuring (blocks until free). */
int dl_tune_db_lock(struct dl_tune_db *db, struct dl_error *err);
void dl_tune_db_unlock(struct dl_tune_db *db);

/* measure.c: times kernel k on layer l for mb samples, each direction in
 * want[] (warm-up calls, then the median of repeats).  Directions the kernel
 * does not have get time 0.  A workspace above ws_cap is reported without
 * timing (time NaN). */
int dl_tune_measure(const struct dl_kernel *k, const struct dl_layer *l, int mb, const int want[DL_N_DIRS],
                    int warmup, int repeats, size_t ws_cap, struct dl_tune_row row[DL_N_DIRS], struct dl_error *err);

/* gather.c: the candidates of every layer and their measurements, from the
 * database or measured now (see gather.c). */
#define DL_TUNE_MAX_KERNELS 16
struct dl_tune_layer {
    int tunable;
    int n_k, n_groups;
    const struct dl_kernel *k[DL_TUNE_MAX_KERNELS];
    int group[DL_TUNE_MAX_KERNELS];   /* kernels of one group have the same memory layouts */
    int want[DL_N_DIRS];              /* directions that run */
    int n_sizes;
    const int *sizes;                 /* micro-batch sizes of the policy */
    struct dl_tune_row *rows;         /* [k][size][dir] */
    unsigned char *have;              /* [k][size]: rows known */
};
#define DL_TUNE_ROW(L, ki, si) (&(L)->rows[((size_t)(ki) * (size_t)(L)->n_sizes + (size_t)(si)) * DL_N_DIRS])

/* Fills L[g->n] for batch B (free with dl_tune_layers_free). */
int dl_tune_gather(const struct dl_graph *g, int B, const struct dl_tune_options *o, const int *sizes, int n_sizes,
                   struct dl_tune_layer *L, struct dl_tune_report *rep, struct dl_error *err);
void dl_tune_layers_free(struct dl_tune_layer *L, int n);

#endif
