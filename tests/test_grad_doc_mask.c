/* test_grad_doc_mask.c: document masking in the reference ops that read a
 * call's document starts (op.h's doc_start: attention, rope,
 * position_embedding), in double: finite-difference gradient checks on
 * odd shapes and several document layouts, and the forward's meaning: a
 * window of packed documents gives, document by document, what each
 * document gives alone as its own window (attention never crosses a
 * boundary, positions restart at each). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "optest.h"
#include "ops/kinds.h"

#define SEQ(T, C) dl_shape_seq((T), (C), DL_F32)

/* Document starts of a sample of T positions whose documents begin at the
 * positions listed in begins (0 first, then increasing; -1 ends it). */
static void starts_of(int *start, long T, const int *begins)
{
    for (long t = 0, i = 0; t < T; t++) {
        if (begins[i] == t)
            i++;
        start[t] = begins[i - 1];
    }
}

/* Layouts of T = 7: one document; 3 + 1 + 3; every position alone; 2 + 5. */
static const int layouts[][8] = {{0, -1}, {0, 3, 4, -1}, {0, 1, 2, 3, 4, 5, 6, -1}, {0, 2, -1}};
enum { N_LAYOUTS = sizeof layouts / sizeof layouts[0], T7 = 7 };

/* Two samples of T = 7, sample n in layout (first + n) % N_LAYOUTS. */
static void two_samples(int *start, int first)
{
    for (int n = 0; n < 2; n++)
        starts_of(start + n * T7, T7, layouts[(first + n) % N_LAYOUTS]);
}

static void attention_doc_grad(void **state)
{
    static const struct {
        const char *attrs;
        int n_in, C;
    } cases[] = {
        {"{heads: 2}", 1, 3 * 4},                         /* packed q, k, v */
        {"{heads: 4, kv_heads: 2}", 3, 12},               /* grouped-query, three inputs */
        {"{heads: 2, causal: false}", 1, 3 * 4},          /* within the document both ways */
        {"{heads: 2, dropout: 0.3}", 1, 3 * 4},           /* the same mask on every evaluation */
    };
    int start[2 * T7];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int first = 0; first < N_LAYOUTS; first++) {
            two_samples(start, first);
            struct gc_case c = {.op = &dl_op_attention, .attrs = cases[i].attrs, .batch = 2, .n_in = cases[i].n_in,
                                .training = 1, .doc_start = start};
            for (int k = 0; k < c.n_in; k++)
                c.in[k] = SEQ(T7, cases[i].C);
            if (c.n_in == 3)
                c.in[1] = c.in[2] = SEQ(T7, 6);
            gc_assert(&c);
        }
}

/* rope and position_embedding: positions from each document's start. */
static void positions_doc_grad(void **state)
{
    static const struct {
        const struct dl_op_kind *op;
        const char *attrs;
        int C;
    } kinds[] = {{&dl_op_rope, "{head_dim: 4, theta: 100}", 8}, {&dl_op_position_embedding, "{context: 9}", 3}};
    int start[2 * T7];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int first = 0; first < N_LAYOUTS; first++) {
            two_samples(start, first);
            struct gc_case c = {.op = kinds[k].op, .attrs = kinds[k].attrs, .batch = 2, .n_in = 1,
                                .in = {SEQ(T7, kinds[k].C)}, .training = 1, .doc_start = start};
            gc_assert(&c);
        }
}

/* One forward of op on a sample [T, C] of features x ([n_in][C_i T]
 * packed one after another), with document starts (NULL: none): y. */
static void forward_one(const struct dl_op_kind *op, const char *attrs, int n_in, const int *C, long T,
                        const dl_real *const *x, const int *doc, const dl_real *table, dl_real *y)
{
    struct dl_shape in[3];
    for (int i = 0; i < n_in; i++)
        in[i] = SEQ((int)T, C[i]);
    struct ot_run r;
    ot_setup(&r, op, attrs, 1, n_in, in, x, NULL, 0);
    r.call.doc_start = doc;
    r.param[0] = (dl_real *)(uintptr_t)table;
    op->forward(&r.call);
    memcpy(y, dl_tensor_f32(&r.call.out), sizeof *y * (size_t)r.out_count);
    ot_free(&r);
}

/* Features [C][len] of x [C][T] from position t0. */
static void cut(const dl_real *x, long C, long T, long t0, long len, dl_real *part)
{
    for (long k = 0; k < C; k++)
        for (long t = 0; t < len; t++)
            part[k * len + t] = x[k * T + t0 + t];
}

/* Each layer kind's window of packed documents against its documents run
 * alone: equal (to rounding) position by position. */
static void documents_alone(void **state)
{
    static const struct {
        const struct dl_op_kind *op;
        const char *attrs;
        int n_in, C[3];
    } kinds[] = {
        {&dl_op_attention, "{heads: 2, kv_heads: 1}", 3, {8, 4, 4}},
        {&dl_op_attention, "{heads: 2, causal: false}", 3, {8, 8, 8}},
        {&dl_op_attention, "{heads: 2}", 1, {12}},
        {&dl_op_rope, "{head_dim: 4, theta: 50}", 1, {8}},
        {&dl_op_position_embedding, "{context: 16}", 1, {5}},
    };
    enum { T = 11 };
    static const int begins[] = {0, 4, 5, 10, -1}; /* documents of 4, 1, 5 and 1 positions */
    int start[T];
    starts_of(start, T, begins);
    dl_real table[16 * 5];
    struct dl_rng rng;
    dl_rng_seed(&rng, 5);
    for (int i = 0; i < 16 * 5; i++)
        table[i] = (dl_real)dl_rng_normal(&rng);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        dl_real x[3][12 * T], y[12 * T], alone[12 * T], part[3][12 * T];
        for (int i = 0; i < kinds[k].n_in; i++)
            for (int j = 0; j < kinds[k].C[i] * T; j++)
                x[i][j] = (dl_real)dl_rng_normal(&rng);
        const dl_real *xs[3] = {x[0], x[1], x[2]};
        forward_one(kinds[k].op, kinds[k].attrs, kinds[k].n_in, kinds[k].C, T, xs, start, table, y);
        long Cout = kinds[k].op == &dl_op_attention && kinds[k].n_in == 1 ? kinds[k].C[0] / 3 : kinds[k].C[0];
        double worst = 0;
        for (int d = 0; begins[d] >= 0; d++) {
            long t0 = begins[d], len = (begins[d + 1] >= 0 ? begins[d + 1] : T) - t0;
            const dl_real *ps[3] = {part[0], part[1], part[2]};
            for (int i = 0; i < kinds[k].n_in; i++)
                cut(x[i], kinds[k].C[i], T, t0, len, part[i]);
            forward_one(kinds[k].op, kinds[k].attrs, kinds[k].n_in, kinds[k].C, len, ps, NULL, table, alone);
            for (long c = 0; c < Cout; c++)
                for (long t = 0; t < len; t++)
                    worst = fmax(worst, fabs((double)y[c * T + t0 + t] - (double)alone[c * len + t]));
        }
        print_message("# %s %s: packed against alone, largest difference %.2g\n", kinds[k].op->name,
                      kinds[k].attrs, worst);
        assert_true(worst < 1e-12);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attention_doc_grad),
        cmocka_unit_test(positions_doc_grad),
        cmocka_unit_test(documents_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
