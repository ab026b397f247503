/* attention_rows.c: softmax rows and their gradient for attention's fast
 * CPU kernels (see attention_rows.h).  The row sum of the gradient is
 * summed in double, as the reference does. */
#include "backends/attention_rows.h"

#include <math.h>

#include "ops/attention.h"

void dl_attention_softmax(float *p, long T, int causal, float scale)
{
    for (long t = 0; t < T; t++) {
        float *row = p + t * T, most = -INFINITY;
        long len = causal ? t + 1 : T;
        for (long s = 0; s < len; s++) {
            row[s] *= scale;
            most = row[s] > most ? row[s] : most;
        }
        float sum = 0;
        for (long s = 0; s < len; s++)
            sum += (row[s] = expf(row[s] - most));
        float inv = 1 / sum;
        for (long s = 0; s < len; s++)
            row[s] *= inv;
        for (long s = len; s < T; s++)
            row[s] = 0;
    }
}

void dl_attention_score_grad(float *g, const float *p, long T, int causal, float scale,
                             const struct dl_attention_drop *drop)
{
    for (long t = 0; t < T; t++) {
        float *gr = g + t * T;
        const float *w = p + t * T;
        long len = causal ? t + 1 : T;
        if (drop->rate > 0)
            for (long s = 0; s < len; s++)
                gr[s] *= (float)dl_attention_kept(drop->key, drop->sample, drop->head, t, s, T, drop->rate);
        double row = 0;
        for (long s = 0; s < len; s++)
            row += (double)w[s] * (double)gr[s];
        for (long s = 0; s < len; s++)
            gr[s] = scale * w[s] * (gr[s] - (float)row);
        for (long s = len; s < T; s++)
            gr[s] = 0;
    }
}
