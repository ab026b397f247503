/* attr.c: attribute access through the op's table and the convolution and
 * pooling geometry of a layer (see attr.h). */
#include "backends/attr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {"int", "int[2]", "float", "bool", "enum"};

/* A kernel asked for something its layer's kind does not declare. */
static _Noreturn void misuse(const struct dl_layer *l, const char *key, const char *what)
{
    fprintf(stderr, "dltrain: internal error: a kernel reads attribute '%s' of layer '%s' (%s): %s\n", key,
            l->name ? l->name : "?", l->kind->name, what);
    abort();
}

/* The declaration of key in l's kind; stops the program when there is none
 * or it is not one of the types in the mask (bits 1 << enum dl_attr_type),
 * which the caller reads as `as`. */
static const struct dl_attr_desc *find(const struct dl_layer *l, const char *key, unsigned types, const char *as)
{
    for (int i = 0; i < l->kind->n_attrs; i++) {
        const struct dl_attr_desc *d = &l->kind->attrs[i];
        if (strcmp(d->key, key) != 0)
            continue;
        if (!(types & 1u << d->type)) {
            char what[96];
            snprintf(what, sizeof what, "declared as %s, read as %s", type_names[d->type], as);
            misuse(l, key, what);
        }
        return d;
    }
    misuse(l, key, "the op kind declares no such attribute");
}

int dl_attr_int(const struct dl_layer *l, const char *key, int i)
{
    const struct dl_attr_desc *d = find(l, key, 1u << DL_ATTR_INT | 1u << DL_ATTR_INT2 | 1u << DL_ATTR_BOOL |
                                                    1u << DL_ATTR_ENUM, "an int");
    if (i < 0 || i > (d->type == DL_ATTR_INT2 ? 1 : 0))
        misuse(l, key, d->type == DL_ATTR_INT2 ? "element index out of [0, 1]" : "element index of a scalar");
    return ((const int *)((const char *)l->attr + d->offset))[i];
}

const char *dl_attr_choice(const struct dl_layer *l, const char *key)
{
    const struct dl_attr_desc *d = find(l, key, 1u << DL_ATTR_ENUM, "an enum");
    return d->choices[*(const int *)((const char *)l->attr + d->offset)];
}

double dl_attr_float(const struct dl_layer *l, const char *key)
{
    const struct dl_attr_desc *d = find(l, key, 1u << DL_ATTR_FLOAT, "a float");
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
        .R = dl_attr_int(l, "kernel", 0), .S = dl_attr_int(l, "kernel", 1),
        .sh = dl_attr_int(l, "stride", 0), .sw = dl_attr_int(l, "stride", 1),
        .ph = dl_attr_int(l, "pad", 0), .pw = dl_attr_int(l, "pad", 1),
        .dh = dl_attr_int(l, "dilation", 0), .dw = dl_attr_int(l, "dilation", 1),
        .G = dl_attr_int(l, "groups", 0), .bias = dl_attr_int(l, "bias", 0),
    };
    g.Cg = g.C / g.G;
    g.Kg = g.K / g.G;
    g.pr_h = right_pad(g.H, g.P, g.R, g.sh, g.ph, g.dh);
    g.pr_w = right_pad(g.W, g.Q, g.S, g.sw, g.pw, g.dw);
    return g;
}

/* Fixed windows: kernel, stride (0 = the kernel) and pad. */
static int pool_windows(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    struct dl_shape in = l->in_shape[0], out = l->out_shape;
    pg->kh = dl_attr_int(l, "kernel", 0);
    pg->kw = dl_attr_int(l, "kernel", 1);
    pg->sh = dl_attr_int(l, "stride", 0);
    pg->sw = dl_attr_int(l, "stride", 1);
    pg->sh = pg->sh > 0 ? pg->sh : pg->kh;
    pg->sw = pg->sw > 0 ? pg->sw : pg->kw;
    pg->ph = dl_attr_int(l, "pad", 0);
    pg->pw = dl_attr_int(l, "pad", 1);
    pg->pr_h = right_pad(in.h, out.h, pg->kh, pg->sh, pg->ph, 1);
    pg->pr_w = right_pad(in.w, out.w, pg->kw, pg->sw, pg->pw, 1);
    return 1;
}

/* Adaptive pooling to the output's size: uniform windows only. */
static int pool_adaptive(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    struct dl_shape in = l->in_shape[0], out = l->out_shape;
    if (in.h % out.h || in.w % out.w)
        return 0;
    pg->kh = pg->sh = in.h / out.h;
    pg->kw = pg->sw = in.w / out.w;
    return 1;
}

int dl_maxpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    memset(pg, 0, sizeof *pg);
    pg->max = 1;
    return pool_windows(l, pg);
}

int dl_avgpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    memset(pg, 0, sizeof *pg);
    if (dl_attr_int(l, "output", 0) > 0)
        return pool_adaptive(l, pg);
    pg->exclude_pad = !dl_attr_int(l, "count_include_pad", 0);
    return pool_windows(l, pg);
}

int dl_global_avgpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg)
{
    memset(pg, 0, sizeof *pg);
    return pool_adaptive(l, pg);
}
