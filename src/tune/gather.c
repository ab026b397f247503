/* gather.c: the tuner's candidates and their measurements.  For each layer
 * that may be split: the kernels that can run it (the reference only when
 * nothing else can; only the --kernel choice when one names this layer),
 * grouped by the memory layouts they negotiate (kernels of one group can
 * share a layer's parts), and the directions that run.  Every (kernel,
 * micro-batch size, direction) is read from the database; what is missing
 * is measured under the database's lock (re-read first: another process may
 * have measured it while this one waited) and stored at once. */
#include "tune/tune_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

#define MEASURE_CAP ((size_t)2 << 30) /* never allocate more workspace than this to time a candidate */

static int same_layouts(const struct dl_kernel *a, const struct dl_kernel *b, const struct dl_layer *l)
{
    for (int off = 0; off < DL_N_LAYOUTS; off++) {
        enum dl_layout offered[DL_MAX_INPUTS], ia[DL_MAX_INPUTS], ib[DL_MAX_INPUTS], oa, ob;
        for (int j = 0; j < DL_MAX_INPUTS; j++)
            offered[j] = (enum dl_layout)off;
        dl_kernel_layouts(a, l, offered, ia, &oa);
        dl_kernel_layouts(b, l, offered, ib, &ob);
        if (oa != ob || memcmp(ia, ib, sizeof ia[0] * (size_t)l->n_in) != 0)
            return 0;
    }
    return 1;
}

static void candidates(const struct dl_layer *l, const struct dl_kernel_choices *ch, struct dl_tune_layer *L)
{
    const struct dl_kernel *chosen = NULL;
    if (ch && ch->n) { /* a --kernel choice for this layer differs from the default: keep it alone */
        const struct dl_kernel *sel = dl_kernel_select(l, ch);
        chosen = sel != dl_kernel_select(l, NULL) ? sel : NULL;
    }
    int fallback = 1; /* the precision's kernels when one can run l, else the f32 ones */
    for (int i = 0; dl_kernels[i] && fallback; i++)
        fallback = !(dl_kernel_in_precision(dl_kernels[i], ch, 0) && dl_kernel_usable(dl_kernels[i], l, ch));
    for (int i = 0; dl_kernels[i] && L->n_k < DL_TUNE_MAX_KERNELS; i++) {
        const struct dl_kernel *k = dl_kernels[i];
        if (!dl_kernel_usable(k, l, ch) || k->whole_batch || (!chosen && !dl_kernel_in_precision(k, ch, fallback)))
            continue;
        if ((chosen && k != chosen) || (!k->op && L->n_k > 0)) /* the reference only as a last resort */
            continue;
        L->k[L->n_k++] = k;
    }
    for (int i = 0; i < L->n_k; i++) {
        L->group[i] = -1;
        for (int j = 0; j < i && L->group[i] < 0; j++)
            if (same_layouts(L->k[i], L->k[j], l))
                L->group[i] = L->group[j];
        if (L->group[i] < 0)
            L->group[i] = L->n_groups++;
    }
}

static void directions(const struct dl_graph *g, const struct dl_layer *l, int all_dirs, int *want)
{
    want[DL_DIR_FORWARD] = 1;
    want[DL_DIR_BACKWARD_DATA] = all_dirs;
    for (int j = 0; j < l->n_in; j++)
        want[DL_DIR_BACKWARD_DATA] |= l->in[j] != DL_GRAPH_INPUT;
    want[DL_DIR_BACKWARD_WEIGHTS] = 0;
    for (int j = 0; j < l->n_params; j++)
        want[DL_DIR_BACKWARD_WEIGHTS] |= l->param[j].trainable;
}

/* Reads (kernel ki, size si) from the database: 1 when every wanted
 * direction is there and usable under cap. */
static int lookup(struct dl_tune_db *db, struct dl_tune_key *key, struct dl_tune_layer *L, int ki, int si,
                  size_t cap, struct dl_error *err)
{
    struct dl_tune_row *r = DL_TUNE_ROW(L, ki, si);
    key->mb = L->sizes[si];
    for (int d = 0; d < DL_N_DIRS; d++) {
        if (!L->want[d])
            continue;
        key->dir = d;
        int found = dl_tune_db_get(db, key, &r[d], err);
        if (found < 0)
            return found;
        if (!found || (isnan(r[d].time_s) && r[d].ws <= cap)) /* untimed, and now within the cap */
            return 0;
    }
    return 1;
}

static int measure(struct dl_tune_db *db, struct dl_tune_key *key, const struct dl_layer *l, struct dl_tune_layer *L,
                   int ki, int si, const struct dl_tune_options *o, size_t cap, struct dl_error *err)
{
    struct dl_tune_row *r = DL_TUNE_ROW(L, ki, si);
    struct dl_error merr = {0};
    if (dl_tune_measure(L->k[ki], l, L->sizes[si], L->want, o->warmup, o->repeats, cap, r, &merr))
        for (int d = 0; d < DL_N_DIRS; d++) /* the kernel cannot run this size: remember that too */
            r[d] = (struct dl_tune_row){.time_s = -1};
    int rc = dl_tune_db_begin(db, err);
    key->mb = L->sizes[si];
    for (int d = 0; !rc && d < DL_N_DIRS; d++) {
        key->dir = d;
        if (L->want[d])
            rc = dl_tune_db_put(db, key, &r[d], err);
    }
    return rc ? rc : dl_tune_db_commit(db, err);
}

static int gather_layer(struct dl_tune_db *db, const struct dl_layer *l, struct dl_tune_layer *L, int measuring,
                        const struct dl_tune_options *o, size_t cap, struct dl_tune_report *rep, int *missing,
                        struct dl_error *err)
{
    for (int ki = 0; ki < L->n_k; ki++) {
        struct dl_tune_key key;
        dl_tune_key_layer(&key, l, L->k[ki]);
        for (int si = 0; si < L->n_sizes; si++) {
            if (L->have[ki * L->n_sizes + si])
                continue;
            int rc = lookup(db, &key, L, ki, si, cap, err);
            if (rc < 0)
                return -rc;
            if (rc == 0 && measuring) {
                if ((rc = measure(db, &key, l, L, ki, si, o, cap, err)) != 0)
                    return rc;
                rep->measured++;
            } else if (rc == 0) {
                (*missing)++;
                continue;
            } else {
                rep->cached++;
            }
            L->have[ki * L->n_sizes + si] = 1;
        }
    }
    return DL_OK;
}

void dl_tune_layers_free(struct dl_tune_layer *L, int n)
{
    for (int i = 0; L && i < n; i++) {
        free(L[i].rows);
        free(L[i].have);
    }
}

int dl_tune_gather(const struct dl_graph *g, int B, const struct dl_tune_options *o, const int *sizes, int n_sizes,
                   struct dl_tune_layer *L, struct dl_tune_report *rep, struct dl_error *err)
{
    size_t cap = o->workspace_limit ? o->workspace_limit : o->workspace_total ? o->workspace_total : MEASURE_CAP;
    if (cap > MEASURE_CAP)
        cap = MEASURE_CAP;
    for (int i = 0; i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        memset(&L[i], 0, sizeof L[i]);
        if (!dl_tune_layer_tunable(l))
            continue;
        candidates(l, o->kernels, &L[i]);
        if (L[i].n_k == 0)
            continue;
        L[i].tunable = 1;
        directions(g, l, o->all_dirs, L[i].want);
        L[i].sizes = sizes;
        L[i].n_sizes = n_sizes;
        L[i].rows = dl_calloc((size_t)(L[i].n_k * n_sizes * DL_N_DIRS), sizeof *L[i].rows, err);
        L[i].have = dl_calloc((size_t)(L[i].n_k * n_sizes), 1, err);
        if (!L[i].rows || !L[i].have)
            return DL_ERR_NOMEM;
    }
    struct dl_tune_db *db = NULL;
    int rc = dl_tune_db_open(&db, o->db_path, err), missing = 0;
    for (int i = 0; !rc && i < g->n; i++) /* first without the lock: a warm database needs nothing else */
        if (L[i].tunable)
            rc = gather_layer(db, &g->layers[i], &L[i], 0, o, cap, rep, &missing, err);
    if (!rc && missing && !o->no_measure) {
        double t0 = dl_clock_now();
        rc = dl_tune_db_lock(db, err);
        for (int i = 0; !rc && i < g->n; i++)
            if (L[i].tunable)
                rc = gather_layer(db, &g->layers[i], &L[i], 1, o, cap, rep, &missing, err);
        dl_tune_db_unlock(db);
        rep->tune_seconds = dl_clock_now() - t0;
    }
    dl_tune_db_close(db);
    return rc;
}
