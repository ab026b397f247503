/* attention_rows.h: what attention's CPU kernels share: a layer's
 * dimensions as they read them (both kernels), and the row-wise steps of
 * the f32 kernel (cpu_blas/attention.c; the bf16 one has oneDNN's softmax)
 * between its matrix products, on one head's T x T matrices (row t: query
 * t; column s: key s). */
#ifndef DL_BACKENDS_ATTENTION_ROWS_H
#define DL_BACKENDS_ATTENTION_ROWS_H

#include <stdint.h>

#include "graph/graph.h"

/* Attention layer l's positions T, width C, heads H of d = C / H features,
 * KV heads of k and v (grouped-query attention: query head h reads kv head
 * h / (H / KV)) and their width Ckv = KV d, the whole layer's index of its
 * first head (a tensor rank's part), q, k, v packed in one input or three,
 * the causal mask and the dropout rate. */
struct dl_attention_dims {
    long T, C, H, d, KV, Ckv, head0;
    int packed, causal;
    double dropout;
};

struct dl_attention_dims dl_attention_dims(const struct dl_layer *l);

/* 1 when layer l's k and v have as many heads as q (a kernel that does not
 * group kv heads supports only these). */
int dl_attention_ungrouped(const struct dl_layer *l);

/* Where a head's dropout draws its factors (ops/attention.h's
 * dl_attention_kept): rate 0 keeps every weight. */
struct dl_attention_drop {
    uint64_t key;
    long sample, head;
    double rate;
};

/* The columns (keys) a block of query rows computes: [c0, c1), and the
 * sample's document starts the rows' masks read (NULL: one document). */
struct dl_attention_cols {
    long c0, c1;
    const int *doc;
};

/* Scores to weights in place, rows [r0, r1) of T-float rows over columns
 * [cols.c0, cols.c1): p[t][s] = softmax over s of scale p[t][s] over the
 * keys query t sees (ops/attention.h's dl_attention_keys: s <= t when
 * causal, s in t's document); the masked ones in the columns set to 0. */
void dl_attention_softmax(float *p, long T, long r0, long r1, struct dl_attention_cols cols, int causal, float scale);

/* The scores' gradient in place of the dropped weights' gradient g, from
 * the weights p, rows [r0, r1) over the columns: g[t][s] = scale p
 * (g f - sum_s' p g f), f the dropout factor of (t, s); 0 where masked. */
void dl_attention_score_grad(float *g, const float *p, long T, long r0, long r1, struct dl_attention_cols cols,
                             int causal, float scale, const struct dl_attention_drop *drop);

#endif
