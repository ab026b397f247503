/* decisions.c: see decisions.h.  Every activation of the last forward is
 * still in the arena (each lives until its producer's backward), so the
 * choices are read from plain copies of act[]: a ReLU's sign from its own
 * output (or, when it was moved into the max pooling after it, from its
 * input, which act[] then shows), a window's winner from the pooling's
 * input, clamped at 0 when that input is a ReLU's (windows without a
 * positive value pass no gradient, whichever element a run picked). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "backends/attr.h"
#include "backends/layout.h"
#include "decisions.h"
#include "ops/kinds.h"

/* A plain (NCHW) copy of layer i's output (or the graph input for i < 0). */
static float *plain_output(const struct dl_exec *e, int i, struct dl_shape s)
{
    long n = (long)e->run.batch * dl_shape_count(s);
    float *p = malloc(sizeof *p * (size_t)(n ? n : 1));
    assert_non_null(p);
    if (i < 0) {
        struct dl_tensor input = dl_tensor_of_const(e->run.input, e->g->input);
        const dl_real *x = dl_tensor_const_f32(&input); /* a network whose choices these are reads f32 */
        for (long k = 0; k < n; k++)
            p[k] = x[k];
    } else {
        dl_layout_reorder(dl_tensor_const_f32(&e->act[i]), e->act[i].layout, p, DL_LAYOUT_PLAIN, e->run.batch, s, 0);
    }
    return p;
}

/* Index of the first largest value of window (n, c, oh, ow), or -1 when it
 * holds no positive value and clamp is set. */
static long winner(const float *x, struct dl_shape in, const struct dl_pool_geom *pg, long plane, int oh, int ow,
                   int clamp)
{
    long best = -1;
    float top = 0;
    for (int r = 0; r < pg->kh; r++)
        for (int c = 0; c < pg->kw; c++) {
            int h = oh * pg->sh - pg->ph + r, w = ow * pg->sw - pg->pw + c;
            if (h < 0 || h >= in.h || w < 0 || w >= in.w)
                continue;
            long at = plane + (long)h * in.w + w;
            float v = clamp && x[at] < 0 ? 0 : x[at];
            if (best < 0 ? !(clamp && v == 0) : v > top)
                best = at, top = v;
        }
    return best;
}

static long pooling_differs(const struct dl_exec *a, const struct dl_exec *b, const struct dl_layer *l)
{
    struct dl_pool_geom pg;
    assert_true(dl_maxpool_geom(l, &pg));
    int p = l->in[0];
    struct dl_shape in = l->in_shape[0], out = l->out_shape;
    int clamp = p >= 0 && a->g->layers[p].kind == &dl_op_relu;
    float *xa = plain_output(a, p, in), *xb = plain_output(b, p, in);
    long differ = 0;
    for (long plane = 0; plane < (long)a->run.batch * in.c; plane++)
        for (int oh = 0; oh < out.h; oh++)
            for (int ow = 0; ow < out.w; ow++) {
                long base = plane * in.h * in.w;
                differ += winner(xa, in, &pg, base, oh, ow, clamp) != winner(xb, in, &pg, base, oh, ow, clamp);
            }
    free(xa);
    free(xb);
    return differ;
}

static long signs_differ(const struct dl_exec *a, const struct dl_exec *b, int i)
{
    struct dl_shape s = a->g->layers[i].out_shape;
    float *ya = plain_output(a, i, s), *yb = plain_output(b, i, s);
    long differ = 0;
    for (long k = 0; k < (long)a->run.batch * dl_shape_count(s); k++)
        differ += (ya[k] > 0) != (yb[k] > 0);
    free(ya);
    free(yb);
    return differ;
}

long forward_decisions_differ(const struct dl_exec *a, const struct dl_exec *b)
{
    assert_int_equal(a->run.batch, b->run.batch);
    long differ = 0;
    for (int i = 0; i < a->g->n; i++) {
        const struct dl_layer *l = &a->g->layers[i];
        if (l->kind == &dl_op_relu || l->kind == &dl_op_leaky_relu)
            differ += signs_differ(a, b, i);
        else if (l->kind == &dl_op_maxpool)
            differ += pooling_differs(a, b, l);
    }
    return differ;
}
