/* ilp.c: network-wide workspace division (mu-cuDNN's "WD") as a 0-1 integer
 * linear program solved by GLPK: every layer-direction (unit) picks one of
 * its desirable configurations, every layer one kernel group (kernels with
 * the same memory layouts), the workspaces of the picks add up to at most
 * the total, and the sum of their times is minimal.  A multiple-choice
 * knapsack: tiny for GLPK's branch and cut.  Times are scaled to
 * microseconds, workspaces to KiB, for a well-conditioned matrix. */
#include "tune/tune_impl.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>

struct ilp_index {
    int *y_col;   /* [unit]: column of y[layer(u)][group(u)] */
    int *x_col;   /* [unit]: first column of x[u][.] */
};

static int find_y(const struct dl_tune_unit *u, int i)
{
    for (int j = 0; j < i; j++)
        if (u[j].layer == u[i].layer && u[j].group == u[i].group)
            return j;
    return i;
}

int dl_tune_ilp(const struct dl_tune_unit *u, int n_units, size_t total, int *choice, double *time_s,
                struct dl_error *err)
{
    *time_s = 0;
    if (n_units == 0)
        return DL_OK;
    int nnz_max = 1, n_x = 0;
    for (int i = 0; i < n_units; i++) {
        n_x += u[i].n;
        nnz_max += 2 * u[i].n + 2;
        if (u[i].n == 0)
            return dl_errorf(err, DL_ERR_INTERNAL, "ILP: layer %d has a direction without configurations",
                             u[i].layer);
    }
    struct ilp_index ix = {malloc(sizeof(int) * (size_t)n_units), malloc(sizeof(int) * (size_t)n_units)};
    int *ia = malloc(sizeof(int) * (size_t)(nnz_max + 1)), *ja = malloc(sizeof(int) * (size_t)(nnz_max + 1));
    double *ar = malloc(sizeof *ar * (size_t)(nnz_max + 1));
    int *layer_row = malloc(sizeof(int) * (size_t)n_units);
    if (!ix.y_col || !ix.x_col || !ia || !ja || !ar || !layer_row) {
        free(ix.y_col), free(ix.x_col), free(ia), free(ja), free(ar), free(layer_row);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory (ILP)");
    }
    glp_term_out(GLP_OFF);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    int cap = glp_add_rows(lp, 1); /* row 1: the workspace budget */
    glp_set_row_bnds(lp, cap, GLP_UP, 0, floor((double)total / 1024.0));
    int nz = 0;
    for (int i = 0; i < n_units; i++) {
        int first = find_y(u, i);
        if (first == i) { /* a new (layer, group): its y column */
            ix.y_col[i] = glp_add_cols(lp, 1);
            glp_set_col_kind(lp, ix.y_col[i], GLP_BV);
            int lf = -1;
            for (int j = 0; j < i && lf < 0; j++)
                if (u[j].layer == u[i].layer)
                    lf = j;
            if (lf < 0) { /* a new layer: sum over its groups of y = 1 */
                layer_row[i] = glp_add_rows(lp, 1);
                glp_set_row_bnds(lp, layer_row[i], GLP_FX, 1, 1);
            } else {
                layer_row[i] = layer_row[lf];
            }
            nz++, ia[nz] = layer_row[i], ja[nz] = ix.y_col[i], ar[nz] = 1;
        } else {
            ix.y_col[i] = ix.y_col[first];
            layer_row[i] = layer_row[first];
        }
        int row = glp_add_rows(lp, 1); /* sum_c x[u][c] - y = 0 */
        glp_set_row_bnds(lp, row, GLP_FX, 0, 0);
        nz++, ia[nz] = row, ja[nz] = ix.y_col[i], ar[nz] = -1;
        ix.x_col[i] = glp_add_cols(lp, u[i].n);
        for (int c = 0; c < u[i].n; c++) {
            int col = ix.x_col[i] + c;
            glp_set_col_kind(lp, col, GLP_BV);
            glp_set_obj_coef(lp, col, 1e6 * u[i].c[c].time_s);
            nz++, ia[nz] = row, ja[nz] = col, ar[nz] = 1;
            nz++, ia[nz] = cap, ja[nz] = col, ar[nz] = ceil((double)u[i].c[c].ws / 1024.0);
        }
    }
    glp_load_matrix(lp, nz, ia, ja, ar);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = 60000;
    int rc = glp_intopt(lp, &parm), st = glp_mip_status(lp);
    if (rc != 0 || (st != GLP_OPT && st != GLP_FEAS)) {
        int code = st == GLP_NOFEAS || rc == GLP_ENOPFS ? DL_ERR_SPEC : DL_ERR_INTERNAL;
        dl_errorf(err, code, "workspace division: no plan fits %zu bytes of workspace%s", total,
                  code == DL_ERR_SPEC ? " (raise --workspace-total)" : " (GLPK failed)");
        rc = code;
    } else {
        for (int i = 0; i < n_units; i++) {
            choice[i] = -1;
            for (int c = 0; c < u[i].n; c++)
                if (glp_mip_col_val(lp, ix.x_col[i] + c) > 0.5) {
                    choice[i] = c;
                    *time_s += u[i].c[c].time_s;
                }
        }
        rc = DL_OK;
    }
    glp_delete_prob(lp);
    free(ix.y_col), free(ix.x_col), free(ia), free(ja), free(ar), free(layer_row);
    return rc;
}
