/* attr.c: attribute access through the op's table and the convolution and
 * pooling geometry of a layer (see attr.h). */
#include "backends/attr.h"

#include <string.h>

static const struct dl_attr_desc *find(const struct dl_layer *l, const char *key)
{
    for (int i = 0; i < l->kind->n_attrs; i++)
        if (strcmp(l->kind->attrs[i].key, key) == 0)
            return &l->kind->attrs[i];
    return NULL;
}

int dl_attr_int(const struct dl_layer *l, const char *key, int i, int def)
{
    const struct dl_attr_desc *d = find(l, key);
    if (!d || d->type == DL_ATTR_FLOAT)
        return def;
    const int *v = (const int *)((const char *)l->attr + d->offset);
    return d->type == DL_ATTR_INT2 ? v[i] : v[0];
}

double dl_attr_float(const struct dl_layer *l, const char *key, double def)
{
    const struct dl_attr_desc *d = find(l, key);
    if (!d || d->type != DL_ATTR_FLOAT)
        return def;
    return *(const double *)((const char *)l->attr + d->offset);
}

/* Padding after the last window so that (in + pl + pr - span) / s + 1 == out
 * exactly (negative when the last input rows are never read). */
static int right_pad(int in, int out, int k, int s, int pl, int d)
{
    return (out - 1) * s + (k - 1) * d + 1 - in - pl;
}

struct dl_conv_geom dl_conv_geom(const struct dl_layer *l)
{
    struct dl_conv_geom g = {
        .C = l->in_shape[0].c, .H = l->in_shape[0].h, .W = l->in_shape[0].w,
        .K = l->out_shape.c, .P = l->out_shape.h, .Q = l->out_shape.w,
        .R = dl_attr_int(l, "kernel", 0, 1), .S = dl_attr_int(l, "kernel", 1, 1),
        .sh = dl_attr_int(l, "stride", 0, 1), .sw = dl_attr_int(l, "stride", 1, 1),
        .ph = dl_attr_int(l, "pad", 0, 0), .pw = dl_attr_int(l, "pad", 1, 0),
        .dh = dl_attr_int(l, "dilation", 0, 1), .dw = dl_attr_int(l, "dilation", 1, 1),
        .G = dl_attr_int(l, "groups", 0, 1), .bias = dl_attr_int(l, "bias", 0, 1),
    };
    g.Cg = g.C / g.G;
    g.Kg = g.K / g.G;
    g.pr_h = right_pad(g.H, g.P, g.R, g.sh, g.ph, g.dh);
    g.pr_w = right_pad(g.W, g.Q, g.S, g.sw, g.pw, g.dw);
    return g;
}

int dl_pool_geom(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    struct dl_shape in = l->in_shape[0], out = l->out_shape;
    memset(pg, 0, sizeof *pg);
    int adaptive = dl_attr_int(l, "output", 0, 0) > 0 || strcmp(l->kind->name, "global_avgpool") == 0;
    if (adaptive) { /* adaptive: uniform windows only */
        if (in.h % out.h || in.w % out.w)
            return 0;
        pg->kh = pg->sh = in.h / out.h;
        pg->kw = pg->sw = in.w / out.w;
        return 1;
    }
    pg->kh = dl_attr_int(l, "kernel", 0, 1);
    pg->kw = dl_attr_int(l, "kernel", 1, 1);
    pg->sh = dl_attr_int(l, "stride", 0, 0);
    pg->sw = dl_attr_int(l, "stride", 1, 0);
    pg->sh = pg->sh > 0 ? pg->sh : pg->kh;
    pg->sw = pg->sw > 0 ? pg->sw : pg->kw;
    pg->ph = dl_attr_int(l, "pad", 0, 0);
    pg->pw = dl_attr_int(l, "pad", 1, 0);
    pg->pr_h = right_pad(in.h, out.h, pg->kh, pg->sh, pg->ph, 1);
    pg->pr_w = right_pad(in.w, out.w, pg->kw, pg->sw, pg->pw, 1);
    pg->exclude_pad = !dl_attr_int(l, "count_include_pad", 0, 1);
    return 1;
}
