/* swiglu.c: the "simd" SwiGLU kernel, the default for swiglu (ops/swiglu.c's
 * op: out = silu(gate) x up).  The reference takes exp and the products in
 * double per element; here 8 elements to a vector in float, exp by vec8.h's
 * polynomial (within 2 ulp), s = 1 / (1 + exp(-g)):
 *   out = g s u,  dgate = dout u s (1 + g (1 - s)),  dup = dout g s.
 * A task is a contiguous run of elements; the tail of fewer than 8 in a
 * vector padded with zeros. */
#include "backends/cpu_simd/simd.h"

#include <stdlib.h>

#include "backends/cpu_simd/vec8.h"
#include "core/long_loop.h"
#include "ops/kinds.h"

enum { CHUNK = 4096 }; /* elements a task */

/* The instance: the executor needs one (a non-NULL pointer); the kernel
 * keeps nothing but the element count it was made for. */
struct swiglu_inst {
    long per_sample;
};

static int swiglu_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                         struct dl_error *err)
{
    (void)cfg;
    struct swiglu_inst *m = dl_calloc(1, sizeof *m, err);
    if (!m)
        return DL_ERR_NOMEM;
    m->per_sample = dl_shape_count(l->out_shape);
    *inst = m;
    return DL_OK;
}

static void swiglu_destroy(void *inst)
{
    free(inst);
}

/* s = sigmoid(g) on 8 lanes */
#define SIGMOID8(s, g)                                \
    do {                                              \
        v8 e_;                                        \
        EXP8(e_, -(g));                               \
        (s) = (v8){0} + 1.0f;                         \
        (s) = (s) / ((s) + e_);                       \
    } while (0)

/* Elements [0, n) of one run: out, or (backward) dgate and dup (either NULL). */
CLONE void swiglu_run(long n, const float *g, const float *u, const float *dy, float *y, float *dg, float *du)
{
    for (long i = 0; i < n; i += 8) {
        v8 gv, uv, dv = {0}, s;
        long m = n - i < 8 ? n - i : 8;
        if (m == 8) {
            gv = LD8(g + i), uv = LD8(u + i);
            if (dy)
                dv = LD8(dy + i);
        } else {
            gv = (v8){0}, uv = (v8){0};
            for (long k = 0; k < m; k++) {
                gv[k] = g[i + k], uv[k] = u[i + k];
                if (dy)
                    dv[k] = dy[i + k];
            }
        }
        SIGMOID8(s, gv);
        v8 one = (v8){0} + 1.0f, a = y ? gv * s * uv : (v8){0}, b = dg ? dv * uv * s * (one + gv * (one - s)) : (v8){0},
           c = du ? dv * gv * s : (v8){0};
        for (long k = 0; k < m; k++) {
            if (y)
                y[i + k] = a[k];
            if (dg)
                dg[i + k] = b[k];
            if (du)
                du[i + k] = c[k];
        }
    }
}

/* Task t of the call's elements, CHUNK a task. */
static void swiglu_task(long t, long n, const struct dl_op_call *c, const float *dy, float *y, float *dg, float *du)
{
    const float *g = dl_tensor_const_f32(&c->in[0]), *u = dl_tensor_const_f32(&c->in[1]);
    long i = t * CHUNK, m = n - i < CHUNK ? n - i : CHUNK;
    swiglu_run(m, g + i, u + i, dy ? dy + i : NULL, y ? y + i : NULL, dg ? dg + i : NULL, du ? du + i : NULL);
}

/* The call's elements in tasks, over the threads only when they are many
 * (core/long_loop.h says why not an if clause). */
static void swiglu_all(const struct swiglu_inst *m, const struct dl_op_call *c, const float *dy, float *y, float *dg,
                       float *du)
{
    long n = (long)c->batch * m->per_sample, tasks = (n + CHUNK - 1) / CHUNK;
    if (n > DL_LONG_LOOP) {
        #pragma omp parallel for schedule(static)
        for (long t = 0; t < tasks; t++)
            swiglu_task(t, n, c, dy, y, dg, du);
    } else {
        for (long t = 0; t < tasks; t++)
            swiglu_task(t, n, c, dy, y, dg, du);
    }
}

static void swiglu_forward(void *inst, const struct dl_kernel_args *a)
{
    swiglu_all(inst, &a->c, NULL, dl_tensor_f32(&a->c.out), NULL, NULL);
}

static void swiglu_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct dl_op_call *c = &a->c;
    float *dg = c->din[0].data ? dl_tensor_f32(&c->din[0]) : NULL, *du = c->din[1].data ? dl_tensor_f32(&c->din[1]) : NULL;
    if (dg || du)
        swiglu_all(inst, c, dl_tensor_const_f32(&c->dout), NULL, dg, du);
}

const struct dl_kernel dl_kernel_simd_swiglu = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_swiglu, .create = swiglu_create,
    .destroy = swiglu_destroy, .forward = swiglu_forward, .backward_data = swiglu_backward,
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS,
};
