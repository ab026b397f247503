/* rank_grid.c: the grid's layout, parsing and resolution (see rank_grid.h). */
#include "plan/rank_grid.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_grid_parse(const char *text, struct dl_grid_dims *out, struct dl_error *err)
{
    *out = (struct dl_grid_dims){0};
    const char *s = text;
    while (*s) {
        int *slot = strncmp(s, "dp=", 3) == 0 ? &out->dp : strncmp(s, "tp=", 3) == 0 ? &out->tp
                  : strncmp(s, "pp=", 3) == 0 ? &out->pp : strncmp(s, "ep=", 3) == 0 ? &out->ep : NULL;
        if (!slot)
            return dl_errorf(err, DL_ERR_SPEC, "--grid: expected dp=D,ep=E,tp=T,pp=P (any of them), found '%s'",
                             text);
        char *end;
        errno = 0;
        long v = strtol(s + 3, &end, 10);
        if (end == s + 3 || errno || v < 1 || v > 1 << 20 || (*end && (*end != ',' || !end[1])))
            return dl_errorf(err, DL_ERR_SPEC, "--grid: %.2s must be a positive integer, found '%s'", s, text);
        if (*slot)
            return dl_errorf(err, DL_ERR_SPEC, "--grid: %.2s given twice in '%s'", s, text);
        *slot = (int)v;
        s = *end ? end + 1 : end;
    }
    if (!out->dp && !out->tp && !out->pp && !out->ep)
        return dl_errorf(err, DL_ERR_SPEC, "--grid: expected dp=D,ep=E,tp=T,pp=P (any of them), found '%s'", text);
    return DL_OK;
}

static int given(struct dl_grid_dims w)
{
    return w.dp || w.tp || w.pp || w.ep > 1;
}

int dl_grid_resolve(enum dl_parallel_kind kind, struct dl_grid_dims want, int world, struct dl_grid_dims *out,
                    struct dl_error *err)
{
    static const char *const names[] = {"auto", "none", "data", "model", "pipeline", "hybrid"};
    const char *name = names[kind];
    int one_axis = kind == DL_PAR_DATA || kind == DL_PAR_MODEL || kind == DL_PAR_PIPELINE;
    if (kind == DL_PAR_NONE) {
        if (world > 1)
            return dl_errorf(err, DL_ERR_SPEC, "parallel strategy 'none' but %d ranks are running", world);
        *out = (struct dl_grid_dims){1, 1, 1};
        return DL_OK;
    }
    if (one_axis && want.ep > 1)
        return dl_errorf(err, DL_ERR_SPEC, "parallel strategy '%s' puts the whole world on one axis, but the grid "
                         "asks for ep=%d expert ranks (use --parallel hybrid for a grid)", name, want.ep);
    if (one_axis) { /* the whole world on one axis; a grid, if given, must say the same */
        struct dl_grid_dims all = {kind == DL_PAR_DATA ? world : 1, kind == DL_PAR_MODEL ? world : 1,
                                   kind == DL_PAR_PIPELINE ? world : 1};
        if ((want.dp && want.dp != all.dp) || (want.tp && want.tp != all.tp) || (want.pp && want.pp != all.pp)) {
            char a[64], b[64];
            return dl_errorf(err, DL_ERR_SPEC, "parallel strategy '%s' on %d ranks means %s, but the grid asks for "
                             "%s (use --parallel hybrid for a grid)", name, world, dl_grid_str(&all, a, sizeof a),
                             dl_grid_str(&want, b, sizeof b));
        }
        *out = all;
        return DL_OK;
    }
    if (!given(want)) { /* auto or hybrid without a grid: data parallel */
        if (kind == DL_PAR_HYBRID && world > 1)
            return dl_errorf(err, DL_ERR_SPEC, "parallel strategy 'hybrid' needs a grid: --grid dp=D,tp=T,pp=P "
                             "or parallel: {dp: D, tp: T, pp: P} in the network file");
        *out = (struct dl_grid_dims){world, 1, 1};
        return DL_OK;
    }
    int ep = dl_grid_ep(&want);
    struct dl_grid_dims g = {want.dp * ep, want.tp ? want.tp : 1, want.pp ? want.pp : 1, 0, ep > 1 ? ep : 0};
    if (!g.dp) {
        if (world % (g.tp * g.pp * ep))
            return dl_errorf(err, DL_ERR_SPEC, "grid ep=%d x tp=%d x pp=%d = %d does not divide the %d ranks", ep,
                             g.tp, g.pp, ep * g.tp * g.pp, world);
        g.dp = world / (g.tp * g.pp);
    }
    if ((long)g.dp * g.tp * g.pp != world) {
        char experts[32] = "";
        if (ep > 1)
            snprintf(experts, sizeof experts, " x ep=%d", ep);
        return dl_errorf(err, DL_ERR_SPEC, "grid dp=%d%s x tp=%d x pp=%d = %ld ranks, but %d are running", g.dp / ep,
                         experts, g.tp, g.pp, (long)g.dp * g.tp * g.pp, world);
    }
    *out = g;
    return DL_OK;
}

struct dl_grid_pos dl_grid_position(const struct dl_grid_dims *g, int rank)
{
    return (struct dl_grid_pos){rank % g->tp, rank / g->tp % g->dp, rank / (g->tp * g->dp)};
}

int dl_grid_rank(const struct dl_grid_dims *g, struct dl_grid_pos pos)
{
    return pos.t + g->tp * (pos.d + g->dp * pos.p);
}

const char *dl_grid_str(const struct dl_grid_dims *g, char *buf, size_t size)
{
    if (g->ep > 1)
        snprintf(buf, size, "dp=%d,ep=%d,tp=%d,pp=%d", g->dp / g->ep, g->ep, g->tp, g->pp);
    else
        snprintf(buf, size, "dp=%d,tp=%d,pp=%d", g->dp, g->tp, g->pp);
    return buf;
}
