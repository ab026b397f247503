/* attention_rows.c: a layer's attention dimensions, and softmax rows and
 * their gradient for attention's f32 CPU kernel (see attention_rows.h).
 * The softmax takes exp 8 lanes at a time (cpu_simd/vec8.h's polynomial,
 * within 2 ulp), the row's sum in float lanes; the row sum of the
 * gradient is summed in double, as the reference does. */
#include "backends/attention_rows.h"

#include <math.h>

#include "backends/attr.h"
#include "backends/cpu_simd/vec8.h"
#include "ops/attention.h"

struct dl_attention_dims dl_attention_dims(const struct dl_layer *l)
{
    struct dl_attention_dims a = {.T = l->out_shape.h, .C = l->out_shape.c, .H = dl_attr_int(l, "heads", 0)};
    a.d = a.C / a.H;
    a.KV = dl_attention_kv_heads(l->attr);
    a.Ckv = a.KV * a.d;
    a.head0 = dl_attention_first_head(l->attr);
    a.packed = l->n_in == 1;
    a.causal = dl_attr_int(l, "causal", 0);
    a.dropout = dl_attr_float(l, "dropout");
    return a;
}

int dl_attention_ungrouped(const struct dl_layer *l)
{
    return dl_attention_kv_heads(l->attr) == dl_attr_int(l, "heads", 0);
}

/* row[s] = exp(row[s] - most) for s < len; returns their sum. */
CLONE float exp_row(float *row, long len, float most)
{
    v8 sums = {0};
    long s = 0;
    for (; s + 8 <= len; s += 8) {
        v8 e;
        EXP8(e, LD8(row + s) - most);
        ST8(row + s, e);
        sums += e;
    }
    float sum = 0;
    for (int k = 0; k < 8; k++)
        sum += sums[k];
    if (s < len) { /* the tail, padded with lanes that give 0 */
        v8 x = (v8){0} - 1e30f, e;
        for (long k = s; k < len; k++)
            x[k - s] = row[k] - most;
        EXP8(e, x);
        for (long k = s; k < len; k++)
            sum += (row[k] = e[k - s]);
    }
    return sum;
}

void dl_attention_softmax(float *p, long T, long r0, long r1, struct dl_attention_cols cols, int causal, float scale)
{
    for (long t = r0; t < r1; t++) {
        float *row = p + t * T, most = -INFINITY;
        long lo, len = dl_attention_keys(cols.doc, cols.c1, t, causal, &lo);
        for (long s = cols.c0; s < lo; s++)
            row[s] = 0;
        for (long s = lo; s < len; s++) {
            row[s] *= scale;
            most = row[s] > most ? row[s] : most;
        }
        float inv = 1 / exp_row(row + lo, len - lo, most);
        for (long s = lo; s < len; s++)
            row[s] *= inv;
        for (long s = len; s < cols.c1; s++)
            row[s] = 0;
    }
}

void dl_attention_score_grad(float *g, const float *p, long T, long r0, long r1, struct dl_attention_cols cols,
                             int causal, float scale, const struct dl_attention_drop *drop)
{
    for (long t = r0; t < r1; t++) {
        float *gr = g + t * T;
        const float *w = p + t * T;
        long lo, len = dl_attention_keys(cols.doc, cols.c1, t, causal, &lo);
        if (drop->rate > 0)
            for (long s = lo; s < len; s++)
                gr[s] *= (float)dl_attention_kept(drop->key, drop->sample, drop->head, t, s, T, drop->rate);
        double row = 0;
        for (long s = lo; s < len; s++)
            row += (double)w[s] * (double)gr[s];
        for (long s = cols.c0; s < lo; s++)
            gr[s] = 0;
        for (long s = lo; s < len; s++)
            gr[s] = scale * w[s] * (gr[s] - (float)row);
        for (long s = len; s < cols.c1; s++)
            gr[s] = 0;
    }
}
