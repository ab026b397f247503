/* step_guard.c: the step guards' verdicts (see step_guard.h). */
#include "train/step_guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int dl_step_guard_init(struct dl_step_guard *g, const struct dl_step_guard_opts *o, struct dl_error *err)
{
    *g = (struct dl_step_guard){.o = *o};
    if (g->o.window <= 0)
        g->o.window = DL_STEP_GUARD_WINDOW;
    if (g->o.max_in_a_row <= 0)
        g->o.max_in_a_row = DL_STEP_GUARD_IN_A_ROW;
    if (g->o.spike_z > 0) {
        g->loss = dl_calloc((size_t)g->o.window, sizeof *g->loss, err);
        g->norm = dl_calloc((size_t)g->o.window, sizeof *g->norm, err);
        if (!g->loss || !g->norm) {
            dl_step_guard_free(g);
            return DL_ERR_NOMEM;
        }
    }
    return DL_OK;
}

void dl_step_guard_free(struct dl_step_guard *g)
{
    free(g->loss);
    free(g->norm);
    g->loss = g->norm = NULL;
}

/* How many standard deviations v lies above the mean of the window's
 * values x (0 with a window not yet full or without spread). */
static double z_score(const struct dl_step_guard *g, const double *x, double v)
{
    if (g->count < g->o.window || !isfinite(v))
        return 0;
    double mean = 0, var = 0;
    for (int i = 0; i < g->o.window; i++)
        mean += x[i];
    mean /= g->o.window;
    for (int i = 0; i < g->o.window; i++)
        var += (x[i] - mean) * (x[i] - mean);
    double sd = sqrt(var / g->o.window);
    return sd > 0 ? (v - mean) / sd : 0;
}

int dl_step_guard_judge(struct dl_step_guard *g, double loss, double norm)
{
    int skip = 0;
    if (g->o.nonfinite && (!isfinite(loss) || isnan(norm) || isinf(norm))) {
        snprintf(g->why, sizeof g->why, !isfinite(loss) ? "the loss is %g" : "the gradient norm is %g",
                 !isfinite(loss) ? loss : norm);
        skip = 1;
    } else if (g->o.spike_z > 0) {
        double zl = z_score(g, g->loss, loss), zn = isnan(norm) ? 0 : z_score(g, g->norm, norm);
        if (zl > g->o.spike_z || zn > g->o.spike_z) {
            snprintf(g->why, sizeof g->why, zl > g->o.spike_z ? "a loss spike (%.3g, z %.1f)"
                                                               : "a gradient norm spike (%.3g, z %.1f)",
                     zl > g->o.spike_z ? loss : norm, zl > g->o.spike_z ? zl : zn);
            skip = 1;
        }
    }
    if (skip) {
        g->in_a_row++;
        g->skipped++;
        return 1;
    }
    g->in_a_row = 0;
    if (g->loss && isfinite(loss)) {
        g->loss[g->next] = loss;
        g->norm[g->next] = isfinite(norm) ? norm : 0;
        g->next = (g->next + 1) % g->o.window;
        g->count += g->count < g->o.window;
    }
    return 0;
}

int dl_step_guard_exhausted(const struct dl_step_guard *g)
{
    return g->in_a_row >= g->o.max_in_a_row;
}
